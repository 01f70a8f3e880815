# -*- coding: utf-8 -*-
"""The specdec_models role's background download never carries the HF token as a module argument.

An async module's arguments stay in the node's remote temporary directory (embedded in the AnsiballZ file that
async_wrapper runs) for the whole download. The role writes the token in a 0600 file of a private directory and
passes only its path, with token_file_remove (hf_download reads and removes it at start; its unit tests check that).
The tasks are read from roles/specdec_models/tasks/fetch.yml and download_start.yml (which fetch.yml includes to start
the downloads) and their arguments rendered by Ansible's Templar."""

from __future__ import annotations

import pathlib

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROLE_TASKS = pathlib.Path(__file__).resolve().parents[2] / "roles" / "specdec_models" / "tasks"
TASK_FILES = ("fetch.yml", "download_start.yml")
HF = "sparkops.specdec.hf_download"
COPY = "ansible.builtin.copy"
TOKEN = "hf_RoleTokenNeverAnArgument0123456789"


def flat(items):
    for task in items:
        yield task
        for section in ("block", "rescue", "always"):
            yield from flat(task.get(section) or [])


def load():
    # As Ansible loads a tasks file (trusted as templates, YAML merge keys); yaml for the plain structure.
    loader = DataLoader()
    return [t for name in TASK_FILES for t in loader.load_from_file(str(ROLE_TASKS / name), trusted_as_template=True)]


def find(predicate):
    found = [t for t in flat(load()) if predicate(t)]
    assert len(found) == 1, found
    return found[0]


def render(args, **variables):
    base = {"specdec_server_hf_token": TOKEN, "specdec_server_download": True, "specdec_server_hf_endpoint": "",
            "specdec_server_download_timeout": 60, "specdec_server_download_max_workers": 8,
            "__specdec_models_hf_cache": "/var/cache/hf", "__specdec_models_token_given": True,
            "__specdec_models_token_dir": {"path": "/tmp/ansible.x1.specdec-hf"},
            "item": {"repo": "openai/gpt-oss-120b", "revision": "main", "local_dir": None}}
    base.update(variables)
    rendered = Templar(loader=DataLoader(), variables=base).template(args)
    return dict(rendered)


def test_the_background_download_gets_a_token_file_path_never_the_token():
    start = find(lambda t: HF in t and "async" in t)
    assert start["poll"] == 0
    args = render(start[HF])
    assert TOKEN not in repr(args)
    assert "token" not in args
    assert args["token_file"] == "/tmp/ansible.x1.specdec-hf/openai--gpt-oss-120b.token"
    assert args["token_file_remove"] is True
    # Without a token (public models) no file is named.
    args = render(start[HF], specdec_server_hf_token="", __specdec_models_token_given=False)
    assert "token_file" not in args and "token" not in args


def test_the_token_file_is_private_and_the_one_the_download_reads():
    write = find(lambda t: COPY in t and "token" in str(t[COPY].get("dest", "")))
    assert write["no_log"] is True
    args = render(write[COPY])
    assert args["mode"] == "0600" and args["content"] == TOKEN
    start = find(lambda t: HF in t and "async" in t)
    assert args["dest"] == render(start[HF])["token_file"]
    made = find(lambda t: "ansible.builtin.tempfile" in t)
    assert made["ansible.builtin.tempfile"]["state"] == "directory"  # mkdtemp: mode 0700
    # The directory is removed whatever happens (the always section of the block that holds the start).
    block = [t for t in flat(load()) if any(s == start for s in flat(t.get("block") or []))]
    assert len(block) == 1
    cleanup = [t for t in block[0]["always"] if "ansible.builtin.file" in t]
    assert [c["ansible.builtin.file"] for c in cleanup] == [
        {"path": "{{ __specdec_models_token_dir.path }}", "state": "absent"}]


def test_the_background_download_asks_for_what_the_cache_check_resolved():
    # The two tasks name the same model files (the start's arguments are the check's, the token's file for the token).
    check = find(lambda t: HF in t and t.get("check_mode") is True)
    start = find(lambda t: HF in t and "async" in t)
    # (manifest: the look's list of a complete model for a pair's peer; a download lists its model afterwards.)
    same = {k: v for k, v in check[HF].items() if k not in ("token", "manifest")}
    assert {k: v for k, v in start[HF].items() if k not in ("token_file", "token_file_remove")} == same
    look = {k: v for k, v in check[HF].items() if k != "manifest"}
    assert render(look)["token"] == TOKEN  # the check (synchronous, no_log) keeps the option
