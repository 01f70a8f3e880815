# -*- coding: utf-8 -*-
"""sparkops.specdec.specdec_tuned: records or removes the pick in a state file, only that key, atomically,
keeping the mode; check and diff mode; errors that write nothing."""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkops.specdec.plugins.modules import specdec_tuned


class Done(Exception):
    pass


@pytest.fixture
def run_module(monkeypatch):
    def finish(failed):
        def handler(self, **kwargs):
            kwargs.setdefault("changed", False)
            if failed:
                kwargs["failed"] = True
            raise Done(kwargs)
        return handler

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", finish(False))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", finish(True))

    def run(module, params):
        with patch_module_args(params):
            with pytest.raises(Done) as excinfo:
                module.main()
        return excinfo.value.args[0]
    return run


TUNED = {"engine": "llamacpp", "target_model": "t/T", "draft_model": "d/D", "method": "draft_target",
         "max_draft_len": 2}


def state_file(tmp_path, **extra):
    path = tmp_path / "spark-1.json"
    data = {"schema_version": 1, "deployment": "spark-1", "running": {"max_draft_len": 4}}
    data.update(extra)
    path.write_text(json.dumps(data, indent=2) + "\n")
    os.chmod(path, 0o644)
    return path


def call(run_module, **params):
    return run_module(specdec_tuned, params)


def test_records_the_pick_and_keeps_the_rest(tmp_path, run_module):
    path = state_file(tmp_path)
    result = call(run_module, path=str(path), tuned=dict(TUNED, max_draft_len="2", reason="why"))
    assert result["changed"] and result["previous"] is None and result["tuned"]["max_draft_len"] == 2
    data = json.loads(path.read_text())
    assert data["tuned"]["max_draft_len"] == 2 and data["tuned"]["reason"] == "why"
    assert data["running"] == {"max_draft_len": 4} and oct(os.stat(path).st_mode & 0o777) == "0o644"
    again = call(run_module, path=str(path), tuned=dict(TUNED, reason="why"))
    assert again["changed"] is False
    removed = call(run_module, path=str(path), state="absent")
    assert removed["changed"] and removed["previous"]["max_draft_len"] == 2
    assert json.loads(path.read_text())["tuned"] is None


def test_check_mode_and_diff_write_nothing(tmp_path, run_module):
    path = state_file(tmp_path)
    before = path.read_text()
    result = call(run_module, path=str(path), tuned=TUNED, _ansible_check_mode=True, _ansible_diff=True)
    assert result["changed"] and '"max_draft_len": 2' in result["diff"]["after"] and result["diff"]["before"] == "null\n"
    assert path.read_text() == before


@pytest.mark.parametrize("tuned, message", [
    (dict(TUNED, max_draft_len=40), "tuned.max_draft_len"),
    (dict(TUNED, method="medusa"), "tuned.method"),
    ({"method": "none"}, "tuned: engine is missing"),
])
def test_bad_records_are_refused_before_writing(tmp_path, run_module, tuned, message):
    path = state_file(tmp_path)
    before = path.read_text()
    result = call(run_module, path=str(path), tuned=tuned)
    assert result["failed"] and message in result["msg"] and "nothing was written" in result["msg"]
    assert path.read_text() == before


def test_missing_or_foreign_state_files(tmp_path, run_module):
    result = call(run_module, path=str(tmp_path / "none.json"), tuned=TUNED)
    assert result["failed"] and "deploy first" in result["msg"]
    other = tmp_path / "other.json"
    other.write_text('{"schema_version": 9}')
    result = call(run_module, path=str(other), tuned=TUNED)
    assert result["failed"] and "schema version 1" in result["msg"]
