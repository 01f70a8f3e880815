# -*- coding: utf-8 -*-
"""Issue 21 item 5: specdec_server_engine -> specdec_engine and specdec_server_api_key -> specdec_api_key. The old
names keep working in 0.3.x: sparkops.specdec.specdec_settings publishes the value under the new name with a
deprecation record naming the new one (removal in 0.4.0); both names set to different values is one line naming both;
the old API key name stays a secret (no_log, scrubbed, removed from the support bundle).

Each host is resolved as a play resolves it: its variables, plus specdec_common's role defaults where a role runs
(roles/specdec_common/defaults/main/computed.yml, read from the collection: the new names' defaults read the old
ones), with ansible-core's Templar."""

from __future__ import annotations

import json
import pathlib
import re
import types

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.sparkops.specdec.plugins.action import specdec_settings
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _secret_options, _settings
from ansible_collections.sparkops.specdec.tests.unit.plugins.action.specdec_plan_pair import trusted
from ansible_collections.sparkops.specdec.tests.unit.plugins.action.test_specdec_plan_secrets import run

ROOT = pathlib.Path(__file__).resolve().parents[4]
COMPUTED = ROOT / "roles" / "specdec_common" / "defaults" / "main" / "computed.yml"
KEY = "lab-key-Canary0123456789abcdef"
OTHER_KEY = "lab-key-Other0123456789abcdefgh"
IMAGE = {"trtllm_container_image": "sparkops-lab/llamacpp-server:test"}


@pytest.fixture(autouse=True)
def no_env_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)


def role_defaults():
    """specdec_common's hand-kept Jinja defaults of the renamed options (as a role's defaults reach its tasks;
    specdec_head_host, which needs the play's groups, left out)."""
    defaults = yaml.safe_load(COMPUTED.read_text(encoding="utf-8"))
    return {name: defaults[name] for name in _settings.RENAMED.values()}


def resolve(variables, in_role=True):
    """What specdec_settings publishes for a host with these variables (in a role: with specdec_common's defaults
    under them, as the specdec_server role runs it; else as the preflight play, which applies no role)."""
    merged = dict(role_defaults() if in_role else {}, **variables)
    task_vars = {k: trusted(v) for k, v in merged.items()}
    return specdec_settings.resolve(Templar(loader=DataLoader(), variables=task_vars), task_vars)


def deprecated(result):
    """(the renamed options' names the record names, removal version, collection) per deprecation record."""
    names = sorted(set(_settings.RENAMED) | set(_settings.RENAMED.values()))
    return [(tuple(n for n in names if re.search(r"\b%s\b" % n, record["msg"])), record["version"],
             record["collection_name"]) for record in result["deprecations"]]


@pytest.mark.parametrize("in_role", [True, False], ids=["role", "preflight-play"])
@pytest.mark.parametrize("old,new,value", [
    ("specdec_server_engine", "specdec_engine", "llamacpp"),
    ("specdec_server_api_key", "specdec_api_key", KEY),
])
def test_old_name_alone_works_under_the_new_name_and_is_deprecated(old, new, value, in_role):
    result = resolve({old: value}, in_role=in_role)
    assert result["settings"].get(new) == value and old not in result["settings"]
    assert result["errors"] == [] and result["misnamed"] == []
    assert deprecated(result) == [(tuple(sorted((old, new))), "0.4.0", "sparkops.specdec")]


@pytest.mark.parametrize("in_role", [True, False], ids=["role", "preflight-play"])
def test_new_names_work_without_a_deprecation(in_role):
    result = resolve({"specdec_engine": "llamacpp", "specdec_api_key": KEY}, in_role=in_role)
    assert result["settings"]["specdec_engine"] == "llamacpp" and result["settings"]["specdec_api_key"] == KEY
    assert result["errors"] == [] and result["deprecations"] == []


def test_role_defaults_of_the_new_names_without_either_name():
    """Neither name set: the roles read trtllm and no key, and nothing is deprecated."""
    result = resolve({})
    assert result["settings"]["specdec_engine"] == "trtllm" and result["settings"]["specdec_api_key"] == ""
    assert result["deprecations"] == [] and result["errors"] == []
    # Both defaults pass their own checks (a computed default has no spec default for test_option_coverage to check).
    assert _settings.check_settings(result["settings"], _action.specs()) == []


def test_both_names_with_different_values_is_one_line_naming_both():
    result = resolve({"specdec_server_engine": "llamacpp", "specdec_engine": "trtllm"})
    assert result["errors"] == ["specdec_server_engine: renamed to specdec_engine, and both are set, to different "
                                "values (\"llamacpp\" and \"trtllm\"); set specdec_engine only."]
    assert "specdec_engine" not in result["settings"]


def test_both_key_names_with_different_values_never_show_either_key():
    result = resolve({"specdec_server_api_key": KEY, "specdec_api_key": OTHER_KEY})
    assert result["errors"] == ["specdec_server_api_key: renamed to specdec_api_key, and both are set, to different "
                                "values (the values (hidden)); set specdec_api_key only."]
    assert "specdec_api_key" not in result["settings"] and "specdec_server_api_key" not in result["settings"]
    assert OTHER_KEY not in json.dumps(result["errors"]) and KEY not in json.dumps(result["errors"])


def test_both_names_with_the_same_value_is_only_deprecated():
    result = resolve({"specdec_server_engine": "llamacpp", "specdec_engine": "llamacpp"})
    assert result["errors"] == [] and result["settings"]["specdec_engine"] == "llamacpp"
    assert [names for names, _v, _c in deprecated(result)] == [("specdec_engine", "specdec_server_engine")]


def test_the_action_returns_the_deprecation_record():
    """The action's result carries the record ansible-core turns into a DEPRECATION WARNING."""
    task = types.SimpleNamespace(args={}, check_mode=False, diff=False, async_val=0,
                                 action="sparkops.specdec.specdec_settings")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    task_vars = {"specdec_server_engine": "llamacpp"}
    templar = Templar(loader=DataLoader(), variables=task_vars)
    action = specdec_settings.ActionModule(task, connection, None, DataLoader(), templar, None)
    result = action.run(task_vars=task_vars)
    assert result["settings"]["specdec_engine"] == "llamacpp" and not result.get("failed")
    assert result["deprecations"] == [{"msg": _settings.deprecation("specdec_server_engine"), "version": "0.4.0",
                                       "collection_name": "sparkops.specdec"}]
    assert "specdec_engine" in result["deprecations"][0]["msg"]


def test_old_names_reach_the_plan_under_the_new_names():
    """The preflight's plan with only the old names: engine llamacpp and the key file, as with the new names."""
    old = run({"spark-1": dict(IMAGE, ansible_host="10.0.0.1", specdec_server_engine="llamacpp",
                               specdec_server_api_key=KEY)})
    new = run({"spark-1": dict(IMAGE, ansible_host="10.0.0.1", specdec_engine="llamacpp", specdec_api_key=KEY)})
    assert not old.get("failed"), old.get("msg")
    assert old["plan"]["engine"] == "llamacpp" and "--api-key-file" in old["plan"]["argv"]
    assert old["plan"] == new["plan"]
    assert KEY not in json.dumps(old)


def test_both_names_differing_stop_the_plan_with_the_line():
    result = run({"spark-1": dict(IMAGE, ansible_host="10.0.0.1", specdec_server_engine="llamacpp",
                                  specdec_engine="trtllm")})
    assert result["failed"]
    assert "- specdec_server_engine: renamed to specdec_engine, and both are set" in result["msg"]


def test_check_settings_takes_an_old_name_under_its_new_one():
    """A value the new name refuses is refused under the old one too (checked once, under the new name)."""
    specs = _action.specs()
    assert _settings.check_settings({"specdec_server_engine": "vllm"}, specs) == \
        _settings.check_settings({"specdec_engine": "vllm"}, specs)
    assert _settings.check_settings({"specdec_server_engine": "vllm"}, specs)
    lines = _settings.check_settings({"specdec_server_api_key": "q7Zq7Z"}, specs)
    assert len(lines) == 1 and lines[0].startswith("specdec_api_key: the value (hidden) ") and "q7Zq7Z" not in lines[0]


def test_the_old_key_name_is_a_secret_everywhere():
    """no_log (the plan's scrubber and secret_setting), the support bundle's list (secret_options), and the scrub of a
    failing expression's message, whatever the key's length."""
    assert {"specdec_api_key", "specdec_server_api_key"} <= set(_secret_options.no_log_options())
    assert _action.secret_setting("specdec_server_api_key") and _action.secret_setting("specdec_api_key")
    task_vars = {"specdec_server_api_key": "k3y"}
    found = _action.secrets_of(Templar(loader=DataLoader(), variables=task_vars), task_vars)
    assert "k3y" in found
    assert "specdec_server_engine" not in _secret_options.no_log_options()


def test_the_new_names_role_defaults_read_the_old_names():
    """computed.yml gives each new name of RENAMED the old one's value when set (the roles' YAML reads the new name
    before any settings action runs), else the spec's documented default."""
    defaults = role_defaults()
    for old, new in _settings.RENAMED.items():
        assert defaults[new].startswith("{{ %s | default(" % old), (new, defaults[new])


def test_only_the_role_defaults_read_the_old_names():
    """Roles, playbooks, Molecule scenarios and lab inventories use the new names; the old ones are read only by the
    new names' role defaults (computed.yml) and named in the spec that documents the rename."""
    pattern = re.compile(r"\b(%s)\b" % "|".join(sorted(_settings.RENAMED)))
    allowed = {COMPUTED, ROOT / "roles" / "specdec_common" / "meta" / "argument_specs.yml"}
    offenders = []
    for top in ("roles", "playbooks", "molecule", "inventories"):
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or path.suffix not in (".yml", ".yaml", ".j2") or path in allowed:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line):
                    offenders.append("%s:%d" % (path.relative_to(ROOT), number))
    assert offenders == []
