"""Regression tests of the "Core plan in Python" issue that concern names, not values: one name
per fact, defined once; no playbook reads a role's private variables; no fact re-typed as a literal;
no state recovered from generated scripts. Each test failed on the code before that change (a8acfc2)."""
import pathlib
import re

import yaml

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT / "roles" / "specdec_common" / "defaults" / "main"


def _defaults(directory):
    """The names a role's defaults/main/ directory defines (options.yml, generated, and computed.yml)."""
    names = {}
    for path in sorted(directory.glob("*.yml")):
        names.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return names


def _files(*dirs, suffixes=(".yml", ".yaml", ".j2")):
    for d in dirs:
        for path in sorted((ROOT / d).rglob("*")):
            if path.is_file() and path.suffix in suffixes:
                yield path


def _text_without_comments(path):
    return "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("#"))


def test_regression_shared_facts_defined_once():
    """Was: container name, state dir, HF cache dirs, container ssh port, host-key dir and head host were
    declared in two roles each (e.g. trtllm_container_name and specdec_server_container)."""
    shared = _defaults(SHARED)
    for new in set(_settings.REMOVED.values()):
        assert new in shared, new
    assert shared
    for defaults in (ROOT / "roles").glob("*/defaults/main"):
        if defaults == SHARED:
            continue
        names = set(_defaults(defaults))
        assert not names & set(shared), (defaults, names & set(shared))


def test_regression_removed_names_are_not_read_anywhere():
    """Was: setting trtllm_container_name alone made specdec_server exec into a container that did not
    exist, and trtllm_container_ssh_port alone made ssh_mesh pin a port sshd did not listen on."""
    pattern = re.compile(r"\b(%s)\b" % "|".join(sorted(_settings.REMOVED)))
    offenders = []
    for path in _files("roles", "playbooks", "molecule", "inventories"):
        if path == ROOT / "roles" / "specdec_common" / "meta" / "argument_specs.yml":
            continue  # documents the names it replaced
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                offenders.append("%s:%d: %s" % (path.relative_to(ROOT), number, line.strip()))
    assert offenders == []


def test_regression_playbooks_read_no_private_role_variables():
    """Was: playbooks read role-private __specdec_server* variables in nine places."""
    pattern = re.compile(r"__(specdec_server|netplan_qsfp|trtllm_container|ssh_mesh|docker_group)")
    offenders = [str(p.relative_to(ROOT)) for p in _files("playbooks") if pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_regression_playbooks_do_not_retype_shared_facts():
    """Was: the shared facts were re-typed as literals (`| default('trtllm-multinode')` ...) in three playbooks."""
    shared = _defaults(SHARED)
    literals = [str(v) for v in shared.values() if v not in ("", None) and "{{" not in str(v)]
    offenders = []
    for path in _files("playbooks"):
        text = _text_without_comments(path)
        # A literal as a value, not inside a name (the engine value trtllm is also part of trtllm_container).
        offenders += ["%s: %s" % (path.relative_to(ROOT), lit) for lit in literals
                      if re.search(r"(?<![\w.-])%s(?![\w-])" % re.escape(lit), text)]
    assert offenders == []


def test_regression_no_state_parsed_out_of_generated_scripts():
    """Was: the previous server's port and model were recovered by regex_search over previous/server.sh."""
    offenders = []
    for path in _files("roles", "playbooks"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"server\.sh", text) and re.search(r"regex_search|regex_findall", text):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
