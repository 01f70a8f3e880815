# -*- coding: utf-8 -*-
"""Property (issue 21 item 2): the specdec_plan action, given any option with a value its argument spec does not admit,
fails with ONE line naming the option, the expected type and an example; never a Python error, never a plan built on
the value. Every option of every role's meta/argument_specs.yml and of the playbooks is tried with each sample below
that its spec does not admit (a boolean is no number; null only where the spec's default is null)."""

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action
from ansible_collections.sparkops.specdec.tests.unit.plugins.action.test_specdec_plan_secrets import run

SAMPLES = {"string": "abc", "list": ["a"], "dict": {"a": 1}, "bool": True, "int": 7, "float": 2.5,
           "newline": "two\nlines", "null": None}
# The words that say the expected type, per spec type (one of them must be in the line).
TYPE_WORDS = {"int": ("whole number", "integer"), "float": ("number", "fraction"), "bool": ("true or false",),
              "str": ("string", "text"), "path": ("path", "text"), "list": ("list",), "dict": ("mapping",)}
OPTIONS = _settings.known_options(_action.specs())


def _scalar_admitted(kind, value):
    if kind == "raw":
        return True
    if isinstance(value, bool):
        return kind == "bool"
    if kind == "int":
        return isinstance(value, int)
    if kind == "float":
        return isinstance(value, (int, float))
    if kind in ("str", "path"):
        return isinstance(value, (str, int, float))
    return False


def admitted(name, spec, value):
    """Whether the spec admits the value (Ansible's conversions, except that a boolean is no number or text)."""
    kind = spec.get("type", "str")
    if value is None:
        return spec.get("default") is None
    if name in _settings.AUTO_OR_BOOL and isinstance(value, bool):
        return True
    if kind == "list":
        ok = isinstance(value, list) and all(_scalar_admitted(spec.get("elements", "str"), v) for v in value)
        items = value if ok else []
    elif kind == "dict":
        ok, items = isinstance(value, dict), []
    else:
        ok, items = _scalar_admitted(kind, value), [value]
    choices = spec.get("choices")
    if ok and choices:
        ok = all(str(item) in [str(c) for c in choices] for item in items)
    return ok


CASES = [(name, sample) for name, spec in sorted(OPTIONS.items()) for sample, value in SAMPLES.items()
         if spec.get("type", "str") in TYPE_WORDS and not admitted(name, spec, value)]


@pytest.fixture(autouse=True)
def no_env_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)


def test_every_option_is_tried():
    assert {name for name, sample in CASES} == {n for n, s in OPTIONS.items() if s.get("type", "str") in TYPE_WORDS}
    assert len(CASES) > 4 * len(OPTIONS)


@pytest.mark.parametrize("name,sample", CASES)
def test_a_value_the_spec_does_not_admit_is_one_line(name, sample):
    spec = OPTIONS[name]
    result = run({"spark-1": {"ansible_host": "10.0.0.1", name: SAMPLES[sample]}})
    assert result.get("failed") and "plan" not in result, result
    head, *lines = result["msg"].split("\n")
    assert head.startswith("Deployment spark-1: ") and lines, result["msg"]
    # A few settings name the host as well ("name on HOST: ..."; specdec_deployment_id).
    mine = [line for line in lines if line.startswith(("- %s:" % name, "- %s on spark-1:" % name))]
    assert len(mine) == 1 and len(lines) == 1, result["msg"]
    line = mine[0]
    kind = spec.get("type", "str")
    words = TYPE_WORDS[kind] + (("one of",) if spec.get("choices") else ())
    assert any(word in line for word in words), line
    assert "e.g." in line or (spec.get("choices") and "one of" in line), line
