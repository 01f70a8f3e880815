# -*- coding: utf-8 -*-
"""Secret options: every option whose name or description marks a secret (the rule: _secret_options.marks_secret)
declares no_log in its spec (the roles' meta/argument_specs.yml, the playbook settings' table and the modules'
argument_spec), and the support bundle (playbooks/diagnose.yml) removes the value of every role option and playbook
setting so declared, found from the specs (lookup sparkops.specdec.secret_options): a secret option added to a spec,
in a copy of the collection, is removed from the bundle with no code change."""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _secret_options

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = str(pathlib.Path(sys.executable).parent / "ansible-playbook")

marks_secret = _secret_options.marks_secret


class _Spec(Exception):
    pass


def module_options():
    """[(module, option, spec, description)] of every module with an AnsibleModule: its argument_spec as main() builds
    it (AnsibleModule replaced by a recorder), descriptions from its DOCUMENTATION."""
    found = []
    for path in sorted((ROOT / "plugins" / "modules").glob("*.py")):
        module = importlib.import_module("ansible_collections.sparkops.specdec.plugins.modules." + path.stem)
        if not hasattr(module, "main") or not hasattr(module, "AnsibleModule"):
            continue  # action plugins only: no argument spec in Python
        captured = {}

        def record(*args, **kwargs):
            captured.update(kwargs.get("argument_spec") or args[0])
            raise _Spec()

        docs = (yaml.safe_load(module.DOCUMENTATION) or {}).get("options") or {}
        original = module.AnsibleModule
        module.AnsibleModule = record
        try:
            with patch_module_args({}), pytest.raises(_Spec):
                module.main()
        finally:
            module.AnsibleModule = original
        assert captured, path.stem
        found += [(path.stem, name, spec, (docs.get(name) or {}).get("description")) for name, spec in captured.items()]
    return found


def test_the_rule_tells_secrets_from_settings_about_them():
    for name in ("specdec_server_hf_token", "specdec_api_key", "registry_password", "x_secret", "ssh_private_key",
                 "hf_token"):
        assert marks_secret(name, ""), name
    for name in ("specdec_container_host_key_dir", "ssh_mesh_key_name", "specdec_server_max_num_tokens", "token_file",
                 "specdec_server_tiktoken_files", "specdec_server_env", "secrets_path"):
        assert not marks_secret(name, "Extra environment (no secrets)."), name
    assert marks_secret("registry_auth", "The registry's password.")
    assert not marks_secret("token_file_remove", "Remove the token file.", "bool")


def test_every_role_option_that_marks_a_secret_declares_no_log():
    options = _secret_options.spec_options()
    assert len(options) > 100
    secret = {name for _r, _e, name, o in options if marks_secret(name, o.get("description"), o.get("type", "str"))}
    declared = {name for _r, _e, name, o in options if o.get("no_log") is True}
    assert {"specdec_server_hf_token", "specdec_api_key"} <= secret
    assert sorted(secret - declared) == []
    assert sorted(declared - secret) == []  # a no_log option the rule does not see: teach the rule


def test_every_playbook_setting_that_marks_a_secret_declares_no_log():
    # The playbook settings (module_utils/_settings.PLAYBOOK_SETTINGS) are options too: diagnose_secrets holds secrets.
    options = _secret_options.playbook_options()
    assert len(options) > 20
    secret = {name for name, spec in options if marks_secret(name, "", spec.get("type", "str"))}
    declared = {name for name, spec in options if spec.get("no_log") is True}
    assert "diagnose_secrets" in secret
    assert sorted(secret - declared) == []
    assert sorted(declared - secret) == []
    assert "diagnose_secrets" in _secret_options.no_log_options()


def test_every_module_option_that_marks_a_secret_declares_no_log():
    options = module_options()
    assert {(m, o) for m, o, _s, _d in options} >= {("hf_download", "token"), ("specdec_loadgen", "api_key")}
    missing = [(m, o) for m, o, spec, doc in options
               if marks_secret(o, doc, spec.get("type", "str")) and spec.get("no_log") is not True]
    assert missing == []


def _copy(tmp_path):
    """A copy of the collection (what ansible-playbook loads: plugins, roles, playbooks, meta) under tmp_path."""
    dest = tmp_path / "ansible_collections" / "sparkops" / "specdec"
    for part in ("plugins", "roles", "playbooks", "meta", "galaxy.yml", "ansible.cfg"):
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest / part)
    return dest


NEW = "specdec_registry_password"


def _spec_type(name):
    specs = dict(_secret_options.playbook_options())
    specs.update((n, o) for _r, _e, n, o in _secret_options.spec_options())
    return (specs.get(name) or {}).get("type", "str")


def _add_option(collection):
    spec = collection / "roles" / "specdec_common" / "meta" / "argument_specs.yml"
    text = spec.read_text()
    anchor = "      specdec_api_key:\n"
    assert anchor in text
    spec.write_text(text.replace(anchor, "      %s:\n        type: str\n        default: \"\"\n        no_log: true\n"
                                         "        description: Password of the image registry.\n%s" % (NEW, anchor)))


def test_the_secret_options_are_the_specs_no_log_options(tmp_path):
    assert set(_secret_options.no_log_options()) >= {"specdec_server_hf_token", "specdec_api_key"}
    collection = _copy(tmp_path)
    before = _secret_options.no_log_options(str(collection))
    _add_option(collection)
    assert _secret_options.no_log_options(str(collection)) == sorted(before + [NEW])


def test_the_support_bundle_removes_every_no_log_option_with_no_code_change(tmp_path):
    # A copy of the collection whose specs gain a secret option, and diagnose.yml run on this machine (connection
    # local, read-only collection): the server log it collects quotes every secret option's value as a process
    # argument would (no NAME=value for the redactor to guess from); the bundle must hold none of them.
    collection = _copy(tmp_path)
    _add_option(collection)
    names = _secret_options.no_log_options(str(collection))
    assert NEW in names and "specdec_api_key" in names
    values = {name: "v%02d-%s-0123456789abcdef" % (i, name.replace("_", "")[::-1]) for i, name in enumerate(names)}
    state = tmp_path / "state"
    state.mkdir()
    (state / "server.log").write_text("".join("srv --%s %s --port 8000\n" % (n, v) for n, v in values.items()))
    # A list setting (diagnose_secrets) holds its secret as an item.
    given = {name: [value] if _spec_type(name) == "list" else value for name, value in values.items()}
    host = dict(given, ansible_connection="local", ansible_python_interpreter=sys.executable, ansible_become=False,
                specdec_state_dir=str(state))
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"spark_nodes": {"hosts": {"localhost": host}}}))
    bundle = tmp_path / "bundle.tar.gz"
    env = dict(os.environ, ANSIBLE_CONFIG=str(collection / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(tmp_path), PYTHONPATH=str(tmp_path), HF_TOKEN="")
    run = subprocess.run([PLAYBOOK, "-i", str(inventory), str(collection / "playbooks" / "diagnose.yml"),
                          "-e", "diagnose_bundle_path=%s" % bundle], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    with tarfile.open(bundle) as tar:
        members = {m.name: tar.extractfile(m).read().decode("utf-8", "replace") for m in tar.getmembers() if m.isfile()}
    log = [text for name, text in members.items() if name.endswith("server.log.tail")]
    assert len(log) == 1 and log[0].count("--port 8000") == len(values)
    everything = "\n".join(members.values()) + run.stdout
    assert [n for n, v in values.items() if v in everything] == []


@pytest.mark.parametrize("option, given, shown", [
    ({"type": "str", "choices": ["basic", "bearer"], "default": "basic"}, "Pa55-w0rd-of-the-registry", "is not one of"),
    ({"type": "int", "default": 123456789}, "Pa55-w0rd-of-the-registry", "is not a whole number"),
    ({"type": "list", "elements": "int", "default": [987654321]}, ["Pa55-w0rd-of-the-registry"], "item 1"),
    ({"type": "str", "default": "default-Pa55-w0rd"}, None, "is null"),
])
def test_the_settings_check_never_shows_a_no_log_option_whatever_its_name(option, given, shown):
    # registry_auth does not look secret by its name; its spec says it is one (no_log), so its value, its default and
    # an example built from either are never in the check's line.
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings

    specs = _settings.load_specs(str(ROOT))
    specs["specdec_server"]["specdec_server_registry_auth"] = dict(option, no_log=True)
    lines = _settings.check_settings({"specdec_server_registry_auth": given}, specs)
    assert len(lines) == 1 and lines[0].startswith("specdec_server_registry_auth: ") and shown in lines[0], lines
    assert not any(word in lines[0] for word in ("Pa55", "123456789", "987654321")), lines
