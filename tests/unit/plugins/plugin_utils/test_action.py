# -*- coding: utf-8 -*-
# Unit tests for plugin_utils/_action.run_module: the one way the collection's action plugins run another module on
# the node (engine_container, engine_sshd_image): module_defaults applied, the requested check/diff mode, the task's
# own modes restored.

from __future__ import annotations

import types

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

DOCKER = "community.docker.docker_container"


class Action:
    """An action plugin's surface that run_module uses: its task, templar and _execute_module (recording)."""

    def __init__(self, check_mode=False, diff=False, module_defaults=None, result=None, error=None):
        play = types.SimpleNamespace(_action_groups={})
        self._task = types.SimpleNamespace(check_mode=check_mode, diff=diff, module_defaults=module_defaults or [],
                                           _parent=types.SimpleNamespace(_play=play))
        self._templar = Templar(loader=DataLoader(), variables={})
        self.calls = []
        self.result = {"changed": False} if result is None else result
        self.error = error

    def _execute_module(self, module_name=None, module_args=None, task_vars=None, **_):
        self.calls.append({"name": module_name, "args": module_args, "task_vars": task_vars,
                           "check_mode": self._task.check_mode, "diff": self._task.diff})
        if self.error:
            raise self.error
        return self.result


def test_returns_the_module_result_and_passes_name_args_and_task_vars():
    action = Action(result={"changed": True, "container": {"Id": "c1"}})
    got = _action.run_module(action, DOCKER, {"name": "x"}, {"inventory_hostname": "spark-1"})
    assert got == {"changed": True, "container": {"Id": "c1"}}
    assert action.calls == [{"name": DOCKER, "args": {"name": "x"}, "task_vars": {"inventory_hostname": "spark-1"},
                             "check_mode": False, "diff": False}]


@pytest.mark.parametrize("task_modes", [(False, False), (True, True), (True, False), (False, True)])
@pytest.mark.parametrize("asked", [(True, True), (False, False), (True, None), (None, False), (None, None)])
def test_runs_in_the_asked_mode_and_restores_the_tasks(task_modes, asked):
    action = Action(check_mode=task_modes[0], diff=task_modes[1])
    _action.run_module(action, DOCKER, {}, {}, check_mode=asked[0], diff=asked[1])
    expected = tuple(task if want is None else want for task, want in zip(task_modes, asked))
    assert (action.calls[0]["check_mode"], action.calls[0]["diff"]) == expected
    assert (action._task.check_mode, action._task.diff) == task_modes


def test_task_modes_are_restored_when_the_module_raises():
    action = Action(check_mode=False, diff=False, error=RuntimeError("connection lost"))
    with pytest.raises(RuntimeError, match="connection lost"):
        _action.run_module(action, DOCKER, {}, {}, check_mode=True, diff=True)
    assert action.calls[0]["check_mode"] is True
    assert (action._task.check_mode, action._task.diff) == (False, False)


def test_module_defaults_of_that_module_apply_and_given_args_win():
    """The real ansible-core merge: the play's module_defaults for the module run, not for other modules."""
    action = Action(module_defaults=[{DOCKER: {"docker_host": "unix:///run/docker.sock", "name": "default"}},
                                     {"ansible.legacy.command": {"chdir": "/tmp"}}])
    args = {"name": "trtllm-multinode"}
    _action.run_module(action, DOCKER, args, {})
    assert action.calls[0]["args"] == {"docker_host": "unix:///run/docker.sock", "name": "trtllm-multinode"}
    assert args == {"name": "trtllm-multinode"}  # the caller's dict is not changed
    _action.run_module(action, "ansible.legacy.wait_for", {"port": 22}, {})
    assert action.calls[1]["args"] == {"port": 22}


def test_without_the_core_merge_args_go_as_given(monkeypatch):
    monkeypatch.setattr(_action, "_apply_action_arg_defaults", None)
    action = Action(module_defaults=[{DOCKER: {"docker_host": "unix:///run/docker.sock"}}])
    _action.run_module(action, DOCKER, {"name": "x"}, {})
    assert action.calls[0]["args"] == {"name": "x"}


def test_secret_settings_are_the_token_secret_names_and_every_no_log_option():
    assert _action.secret_setting("specdec_server_hf_token") and _action.secret_setting("specdec_api_key")
    assert _action.secret_setting("diagnose_secrets")  # a playbook setting that declares no_log
    assert _action.secret_setting("registry_password")  # by its name
    assert not _action.secret_setting("specdec_server_port") and not _action.secret_setting("ssh_mesh_key_name")
    assert {"specdec_api_key", "specdec_server_hf_token", "diagnose_secrets"} <= _action.no_log_settings()


def test_secret_strings_of_a_list_or_dict_value():
    assert _action.secret_strings("s3cret-value") == ["s3cret-value"]
    assert _action.secret_strings(["a-secret", {"k": "b-secret"}, 3, None, "a"]) == ["a-secret", "b-secret"]
    assert _action.secret_strings("a") == ["a"]  # text is a secret whatever its length
    assert _action.secret_strings(8355) == []
