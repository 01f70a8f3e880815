# -*- coding: utf-8 -*-
"""The engine container's bind mounts carry the type each source must have (the sshd host key is a file, the rest
directories), and mount_problems names a missing or wrong-typed source before Docker silently makes it a directory.

The stat results come from the real ansible.builtin.stat, run by ansible-playbook on this machine over the real
filter sparkops.specdec.trtllm_container_mounts with the role's stat arguments, on directories made in tmp_path."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import ansible_collections
from ansible_collections.sparkops.specdec.plugins.module_utils import _container as c


def settings(**over):
    """The mount-related settings of the lab's two-node container (as the role's vars/main.yml maps them)."""
    base = {"name": "trtllm-multinode", "image": "sparkops-lab/trtllm-standin:1.3.0rc12", "multinode": True,
            "fabric_interfaces": ["enp1s0f1np1"], "hostfile_hosts": ["192.168.100.10", "192.168.100.11"],
            "sshd_listen_addresses": ["192.168.100.10"], "state_dir": "/var/lib/sparkops/specdec",
            "hf_cache": "/home/spark/.cache/huggingface", "container_hf_cache_dir": "/root/.cache/huggingface",
            "home": "/home/spark", "host_key_dir": "/etc/sparkops/trtllm-ssh", "ssh_port": 2233,
            "entrypoint_sha1": "0" * 40}
    base.update(over)
    return base


def layout(tmp_path, key="file", mesh="directory", cache="directory", state="directory"):
    """Mount sources under tmp_path, each made as the given type (None: missing)."""
    keydir = tmp_path / "keys"
    keydir.mkdir()
    paths = {"key": keydir / c.CONTAINER_HOST_KEY, "mesh": keydir / c.MESH_DIR, "cache": tmp_path / "hf",
             "state": tmp_path / "state"}
    for name, kind in (("key", key), ("mesh", mesh), ("cache", cache), ("state", state)):
        if kind == "file":
            paths[name].write_text("x\n")
        elif kind == "directory":
            paths[name].mkdir()
    return settings(host_key_dir=str(keydir) + "/", hf_cache=str(paths["cache"]), state_dir=str(paths["state"]))


def stat_results(mounts, workdir):
    """The registered loop results of the role's stat task, by the real module (ansible-playbook, connection local)."""
    out = pathlib.Path(workdir) / "mount-stats.json"
    playbook = [{
        "hosts": "localhost", "gather_facts": False, "connection": "local",
        "vars": {"mounts": mounts, "ansible_python_interpreter": sys.executable},
        "tasks": [
            {"name": "Stat", "loop": "{{ mounts }}", "register": "stats",
             "ansible.builtin.stat": {"path": "{{ item.source }}", "follow": True, "get_checksum": False,
                                      "get_mime": False, "get_attributes": False}},
            {"name": "Save",
             "ansible.builtin.copy": {"content": "{{ stats.results | to_json }}", "dest": str(out), "mode": "0600"}},
        ],
    }]
    book = out.with_suffix(".yml")
    book.write_text(json.dumps(playbook))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(pathlib.Path(ansible_collections.__path__[0]).parent),
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    bindir = pathlib.Path(sys.executable).parent
    run = subprocess.run([str(bindir / "ansible-playbook"), "-i", "localhost,", str(book)], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(out.read_text())


def test_mounts_declare_types_and_make_the_same_volumes():
    mounts = c.container_mounts(settings())
    assert [(m["source"], m["type"]) for m in mounts] == [
        ("/home/spark/.cache/huggingface", "directory"), ("/var/lib/sparkops/specdec", "directory"),
        ("/etc/sparkops/trtllm-ssh/ssh_host_ed25519_key", "file"), ("/etc/sparkops/trtllm-ssh/mesh", "directory")]
    assert c.container_spec(settings())["volumes"] == [
        "/home/spark/.cache/huggingface:/root/.cache/huggingface",
        "/var/lib/sparkops/specdec:/var/lib/sparkops/specdec",
        "/etc/sparkops/trtllm-ssh/ssh_host_ed25519_key:/run/sparkops/ssh/ssh_host_ed25519_key:ro",
        "/etc/sparkops/trtllm-ssh/mesh:/root/.ssh:ro"]
    single = c.container_mounts(settings(multinode=False))
    assert [m["type"] for m in single] == ["directory", "directory"]


LAYOUTS = {
    "right": {},
    "key_dir": {"key": "directory"},
    "key_missing": {"key": None},
    "mesh_file_cache_missing": {"mesh": "file", "cache": None},
}


@pytest.fixture(scope="module")
def stated(tmp_path_factory):
    """name -> (settings, spec, stat results of its mounts): every layout stat-ed in one ansible-playbook run."""
    made = {}
    for name, kinds in LAYOUTS.items():
        root = tmp_path_factory.mktemp(name)
        made[name] = (root, layout(root, **kinds))
    mounts = [m for entry in made.values() for m in c.container_mounts(entry[1])]
    results = stat_results(mounts, tmp_path_factory.mktemp("playbook"))
    out = {}
    for name, (root, s) in made.items():
        sources = {m["source"] for m in c.container_mounts(s)}
        out[name] = (root, c.container_spec(s), [r for r in results if r["item"]["source"] in sources])
    return out


def problems_of(stated, name):
    spec, results = stated[name][1:]
    return c.mount_problems(spec, results)


def test_right_types_pass(stated):
    assert problems_of(stated, "right") == []


def test_host_key_made_a_directory_by_docker_is_named_with_the_fix(stated):
    problems = problems_of(stated, "key_dir")
    key = str(stated["key_dir"][0] / "keys" / c.CONTAINER_HOST_KEY)
    assert problems == [
        "Bind mount of the container sshd host key (in specdec_container_host_key_dir), %s -> "
        "/run/sparkops/ssh/ssh_host_ed25519_key: is a directory where a file belongs (Docker made it when a container "
        "started before the file existed); remove it if it is empty (rmdir %s) or move it away, then run the ssh_mesh "
        "role on this node before trtllm_container (playbooks/two_sparks.yml does), which creates it. Nothing was "
        "changed." % (key, key)]
    assert "\n" not in problems[0]


def test_missing_host_key_would_become_a_directory(stated):
    problems = problems_of(stated, "key_missing")
    assert len(problems) == 1
    assert ("ssh_host_ed25519_key -> /run/sparkops/ssh/ssh_host_ed25519_key: does not exist, and Docker would create "
            "an empty directory there where a file belongs; run the ssh_mesh role") in problems[0]


def test_missing_and_wrong_directories_each_get_a_line(stated):
    problems = problems_of(stated, "mesh_file_cache_missing")
    root = stated["mesh_file_cache_missing"][0]
    assert len(problems) == 2
    assert problems[0].startswith("Bind mount of the Hugging Face cache (specdec_hf_cache_dir), %s -> "
                                  "/root/.cache/huggingface: does not exist, and Docker would create an empty "
                                  "directory there; the trtllm_container role creates it" % (root / "hf"))
    assert "the container mesh directory" in problems[1]
    assert "/root/.ssh: is a file where a directory belongs; move it away, then run the ssh_mesh role" in problems[1]


def test_a_mount_without_a_stat_is_not_silently_passed():
    spec = c.container_spec(settings())
    stats = [{"item": m, "stat": {"exists": True, "isdir": True}} for m in c.container_mounts(settings())[:2]]
    problems = c.mount_problems(spec, stats)
    assert len(problems) == 2 and all("was not checked" in p for p in problems)


def test_a_failed_stat_is_reported_not_passed():
    s = settings(multinode=False)
    stats = [{"item": m, "failed": True, "msg": "Permission denied"} for m in c.container_mounts(s)]
    problems = c.mount_problems(c.container_spec(s), stats)
    assert len(problems) == 2 and "cannot be checked (Permission denied)" in problems[0]


@pytest.mark.parametrize("volume", ["models:/models", "relative/path:/x"])
def test_named_volumes_are_left_to_docker(volume):
    assert c.mount_problems({"volumes": [volume]}, []) == []
