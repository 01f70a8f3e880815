# -*- coding: utf-8 -*-
# Unit tests for the action plugin sparkops.specdec.engine_container: the modules it runs on the node (scripted
# results in place of _execute_module), in which check mode, and what it decides and returns.

from __future__ import annotations

import types

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.sparkops.specdec.plugins.action import engine_container
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

SPEC = {"name": "trtllm-multinode", "image": "img:1.3.0rc12", "state": "started",
        "command": ["bash", "/var/lib/sparkops/specdec/entrypoint.sh"], "env": {"A": "1"}}
RUNNING = {"Id": "c1", "State": {"Running": True}}
RELEASE = {"Id": "sha256:abc", "Config": {"Env": ["TRT_LLM_VERSION=1.3.0rc12"], "Labels": {}}}
UNNAMED = {"Id": "sha256:def", "Config": {"Env": ["PATH=/bin"], "Labels": {}}}


class Node:
    """Scripted module results, recording every call with the check and diff mode it ran in."""

    def __init__(self, **results):
        self.results = results
        self.calls = []

    def __call__(self, action):
        def execute_module(module_name=None, module_args=None, task_vars=None, **_):
            key = {engine_container.DOCKER_CONTAINER: "plan" if action._task.check_mode else "apply",
                   engine_container.WAIT_FOR: "wait"}.get(module_name)
            if module_name == engine_container.DOCKER_EXEC:
                key = "version"
            self.calls.append((key, bool(action._task.check_mode), bool(action._task.diff), module_args))
            result = self.results[key]
            return dict(result(module_args) if callable(result) else result)
        return execute_module

    def keys(self):
        return [c[0] for c in self.calls]


def run(node, check=False, diff=False, **args):
    task = types.SimpleNamespace(args=dict({"spec": SPEC, "image": RELEASE, "sshd_port": 2233}, **args),
                                 check_mode=check, diff=diff, async_val=0, action="sparkops.specdec.engine_container")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    action = engine_container.ActionModule(task, connection, None, None, None, None)
    action._execute_module = node(action)
    action._remove_tmp_path = lambda *a, **k: None
    return action.run(task_vars={}), task


@pytest.fixture(autouse=True)
def no_module_defaults(monkeypatch):
    monkeypatch.setattr(_action, "_apply_action_arg_defaults", None)


def test_warm_run_plans_waits_and_publishes():
    node = Node(plan={"changed": False, "container": RUNNING}, wait={"elapsed": 0})
    result, task = run(node)
    assert node.keys() == ["plan", "wait"]  # no exec: the container sees the mesh files through its mount
    plan_call = node.calls[0]
    assert plan_call[1] is True and plan_call[2] is True and plan_call[3] == SPEC  # check mode, diff on, the spec as is
    assert node.calls[1][3] == {"host": "127.0.0.1", "port": 2233, "timeout": 300}
    assert result["changed"] is False and "ssh" not in result and "diff" not in result
    assert result["ansible_facts"]["trtllm_container_image_info"] == {
        "name": "img:1.3.0rc12", "id": "sha256:abc", "env": ["TRT_LLM_VERSION=1.3.0rc12"], "labels": {},
        "package_version": "", "digest": "", "repo_digests": [], "container_image_id": ""}
    assert (task.check_mode, task.diff) == (False, False)  # restored


def test_sshd_is_awaited_on_its_first_fabric_address():
    spec = dict(SPEC, env={"A": "1", "SSHD_LISTEN_ADDRESSES": "192.168.100.11 192.168.101.11"})
    node = Node(plan={"changed": False, "container": RUNNING}, wait={"failed": True, "msg": "Timeout"})
    result = run(node, spec=spec, start_timeout=5)[0]
    assert node.calls[1][3] == {"host": "192.168.100.11", "port": 2233, "timeout": 5}
    assert result["msg"].startswith("The sshd of container trtllm-multinode does not listen on 192.168.100.11:2233 "
                                    "after 5 s: Timeout (docker logs trtllm-multinode shows which fabric address")


def test_running_container_with_other_settings_is_refused_without_consent():
    plan = {"changed": True, "container": RUNNING, "diff": {"before": {"env": ["A=0"]}, "after": {"env": ["A=1"]}}}
    node = Node(plan=plan)
    result = run(node)[0]
    assert node.keys() == ["plan"]
    assert result["failed"] is True and result["changed"] is False and result["differences"] == ["env"]
    assert "trtllm_container_allow_recreate=true" in result["msg"]


def test_consent_recreates_then_waits_without_refresh():
    plan = {"changed": True, "container": RUNNING, "diff": {"before": {"env": 0}, "after": {"env": 1}}}
    node = Node(plan=plan, apply={"changed": True, "container": {"Id": "c2"}, "diff": {"before": {}, "after": {}}},
                wait={})
    result = run(node, diff=True, allow_recreate=True)[0]
    assert node.keys() == ["plan", "apply", "wait"]
    assert node.calls[1][1] is False  # applied for real
    assert result["changed"] is True and result["container"] == {"Id": "c2"} and "diff" in result


def test_new_container_needs_no_consent():
    node = Node(plan={"changed": True, "container": None}, apply={"changed": True, "container": {"Id": "c2"}}, wait={})
    result = run(node)[0]
    assert node.keys() == ["plan", "apply", "wait"] and result["changed"] is True


def test_check_mode_reports_the_plan_only():
    node = Node(plan={"changed": True, "container": None, "actions": [{"created": "x"}], "diff": {"before": {}, "after": {}}})
    result, task = run(node, check=True)
    assert node.keys() == ["plan"]
    assert result["changed"] is True and result["actions"] == [{"created": "x"}] and "diff" not in result
    assert result["ansible_facts"]["trtllm_container_image_info"]["id"] == "sha256:abc"
    assert task.check_mode is True


def test_check_mode_refuses_too():
    node = Node(plan={"changed": True, "container": RUNNING})
    result = run(node, check=True)[0]
    assert result["failed"] is True


def test_single_node_container_has_no_wait_no_refresh():
    node = Node(plan={"changed": False, "container": RUNNING})
    result = run(node, sshd_port=0)[0]
    assert node.keys() == ["plan"] and "ssh" not in result


def test_sshd_timeout_fails_with_the_port():
    node = Node(plan={"changed": False, "container": RUNNING}, wait={"failed": True, "msg": "Timeout when waiting"})
    result = run(node, start_timeout=5)[0]
    assert result["failed"] is True
    assert result["msg"].startswith("The sshd of container trtllm-multinode does not listen on 127.0.0.1:2233 after 5 s")


def test_docker_errors_are_reported():
    node = Node(plan={"failed": True, "msg": "Error connecting: docker.sock"})
    result = run(node)[0]
    assert result["failed"] is True and "Error connecting: docker.sock" in result["msg"]


def test_package_version_is_read_out_of_check_mode_for_an_unnamed_image():
    node = Node(plan={"changed": False, "container": RUNNING}, version={"rc": 0, "stdout": "1.3.0rc12\n"})
    result = run(node, image=UNNAMED, sshd_port=0)[0]
    assert node.keys() == ["plan", "version"] and node.calls[1][1] is False
    assert node.calls[1][3]["argv"][0:2] == ["python3", "-c"]
    assert result["image_info"]["package_version"] == "1.3.0rc12"


@pytest.mark.parametrize("args, container, calls", [
    ({"image": UNNAMED, "trtllm_version": "1.3.0rc12"}, RUNNING, ["plan"]),
    ({"image": UNNAMED}, None, ["plan"]),  # check mode and no container yet: nothing to exec in
])
def test_package_version_not_read(args, container, calls):
    node = Node(plan={"changed": True, "container": container})
    result = run(node, check=True, sshd_port=0, allow_recreate=True, **args)[0]
    assert node.keys() == calls and result["image_info"]["package_version"] == ""


HELP = ("--spec-draft-n-max N                    number of tokens to draft (default: 3)\n"
        "--spec-type none,draft-simple,draft-eagle3,draft-mtp,ngram-simple\n"
        "                                        comma-separated list of types of speculative decoding\n")


def test_llamacpp_engine_reads_no_tensorrt_llm_version():
    """A llama.cpp image names no TensorRT-LLM version and may have no python3: only llama-server --help is exec'd
    in it (the --spec-type values the plan checks eagle3 and mtp against)."""
    node = Node(plan={"changed": False, "container": RUNNING}, version={"rc": 0, "stdout": HELP})
    result = run(node, image=UNNAMED, sshd_port=0, engine="llamacpp")[0]
    assert node.keys() == ["plan", "version"] and "failed" not in result
    assert node.calls[1][3] == {"container": "trtllm-multinode", "argv": ["llama-server", "--help"]}
    assert result["image_info"]["id"] == "sha256:def" and result["image_info"]["package_version"] == ""
    assert result["image_info"]["spec_types"] == ["none", "draft-simple", "draft-eagle3", "draft-mtp", "ngram-simple"]


def test_llamacpp_help_that_fails_publishes_no_spec_types():
    node = Node(plan={"changed": False, "container": RUNNING}, version={"rc": 127, "stderr": "not found"})
    result = run(node, image=UNNAMED, sshd_port=0, engine="llamacpp")[0]
    assert "failed" not in result and "spec_types" not in result["image_info"]


def test_vllm_engine_reads_the_vllm_package_version():
    """Engine vllm: the vllm package's version, even when the image names a TensorRT-LLM one (the plan checks the
    method against it)."""
    node = Node(plan={"changed": False, "container": RUNNING}, version={"rc": 0, "stdout": "0.32.0+cpu\n"})
    result = run(node, image=RELEASE, sshd_port=0, engine="vllm")[0]
    assert node.calls[1][3] == {"container": "trtllm-multinode",
                                "argv": ["python3", "-c", engine_container.VLLM_PACKAGE_VERSION]}
    assert "'vllm'" in engine_container.VLLM_PACKAGE_VERSION
    assert result["image_info"]["package_version"] == "0.32.0+cpu" and "spec_types" not in result["image_info"]


def test_failed_version_read_is_no_error():
    node = Node(plan={"changed": False, "container": RUNNING}, version={"rc": 1, "stderr": "No module"})
    result = run(node, image=UNNAMED, sshd_port=0)[0]
    assert "failed" not in result and result["image_info"]["package_version"] == ""


def test_spec_needs_name_and_image():
    with pytest.raises(AnsibleActionFail):
        run(Node(), spec={"name": "x"})


def test_module_defaults_are_applied(monkeypatch):
    seen = []

    def defaults(name, task, args, templar):
        seen.append(name)
        return dict(args, docker_host="unix:///run/docker.sock")
    monkeypatch.setattr(_action, "_apply_action_arg_defaults", defaults)
    node = Node(plan={"changed": False, "container": RUNNING})
    run(node, sshd_port=0)
    assert seen == [engine_container.DOCKER_CONTAINER]
    assert node.calls[0][3]["docker_host"] == "unix:///run/docker.sock"


# Bind-mount sources: checked before the container is created, recreated or started (Docker would create a missing
# one as an empty directory: the sshd host key became a directory once).
KEY_SPEC = dict(SPEC, volumes=["/srv/state:/srv/state", "/etc/k/ssh_host_ed25519_key:/run/sparkops/ssh/ssh_host_ed25519_key:ro"])
KEY_MOUNTS = [{"source": "/srv/state", "target": "/srv/state", "type": "directory", "what": "the state directory",
               "fix": "create it"},
              {"source": "/etc/k/ssh_host_ed25519_key", "target": "/run/sparkops/ssh/ssh_host_ed25519_key",
               "type": "file", "what": "the container sshd host key", "fix": "run ssh_mesh"}]


def stats(key_stat):
    return [{"item": KEY_MOUNTS[0], "stat": {"exists": True, "isdir": True}},
            {"item": KEY_MOUNTS[1], "stat": key_stat}]


def test_host_key_that_is_a_directory_stops_before_the_container_is_created():
    node = Node(plan={"changed": True, "container": None})
    result = run(node, spec=KEY_SPEC, mount_stats=stats({"exists": True, "isdir": True}))[0]
    assert node.keys() == ["plan"]  # nothing applied
    assert result["failed"] is True and result["changed"] is False
    assert result["mount_problems"] == [result["msg"]] and "\n" not in result["msg"]
    assert result["msg"].startswith("Bind mount of the container sshd host key, /etc/k/ssh_host_ed25519_key -> "
                                    "/run/sparkops/ssh/ssh_host_ed25519_key: is a directory where a file belongs")
    assert "rmdir /etc/k/ssh_host_ed25519_key" in result["msg"] and "run ssh_mesh" in result["msg"]


def test_missing_host_key_stops_a_start_of_a_stopped_container_too():
    node = Node(plan={"changed": True, "container": {"Id": "c1", "State": {"Running": False}}})
    result = run(node, spec=KEY_SPEC, mount_stats=stats({"exists": False}))[0]
    assert node.keys() == ["plan"] and result["failed"] is True
    assert "does not exist, and Docker would create an empty directory there where a file belongs" in result["msg"]


def test_right_sources_let_the_container_be_created():
    node = Node(plan={"changed": True, "container": None}, apply={"changed": True, "container": {"Id": "c2"}}, wait={})
    result = run(node, spec=KEY_SPEC, mount_stats=stats({"exists": True, "isreg": True}))[0]
    assert node.keys() == ["plan", "apply", "wait"] and "failed" not in result


@pytest.mark.parametrize("check, plan", [
    (True, {"changed": True, "container": None}),  # check mode: the sources' tasks did not run
    (False, {"changed": False, "container": RUNNING}),  # nothing is created or started
])
def test_sources_are_not_judged_when_nothing_is_created(check, plan):
    node = Node(plan=plan, wait={})
    result = run(node, check=check, spec=KEY_SPEC, mount_stats=stats({"exists": False}))[0]
    assert "failed" not in result and "mount_problems" not in result


# files: the container's files are written in the same task, after the decision (issue 22: one call instead of the
# separate decision task, a template loop and a copy).
FILES = [{"path": "/var/lib/sparkops/specdec/entrypoint.sh", "content": "#!/bin/bash\n", "mode": "0755"}]


class FileNode(Node):
    def __call__(self, action):
        inner = Node.__call__(self, action)

        def execute_module(module_name=None, module_args=None, task_vars=None, **kw):
            if module_name == engine_container.MOUNTS:
                self.calls.append(("files", bool(action._task.check_mode), bool(action._task.diff), module_args))
                result = self.results["files"]
                return dict(result(module_args) if callable(result) else result)
            return inner(module_name=module_name, module_args=module_args, task_vars=task_vars, **kw)
        return execute_module


def test_warm_run_writes_the_files_in_one_call_after_the_plan():
    node = FileNode(plan={"changed": False, "container": RUNNING}, wait={"elapsed": 0},
                    files={"changed": False, "files": [{"path": FILES[0]["path"], "changed": False}]})
    result = run(node, files=FILES)[0]
    assert node.keys() == ["plan", "files", "wait"]
    assert node.calls[1][1] is False and node.calls[1][3] == {"files": FILES}
    assert result["changed"] is False and result["files"] == [{"path": FILES[0]["path"], "changed": False}]


def test_a_refused_recreation_writes_no_file():
    node = FileNode(plan={"changed": True, "container": RUNNING, "diff": {"before": {"image": "a"}, "after": {"image": "b"}}},
                    files={"changed": True})
    result = run(node, files=FILES)[0]
    assert result["failed"] is True and "files" not in node.keys()


def test_a_changed_file_alone_is_a_change_and_check_mode_shows_its_diff():
    diff = [{"before_header": FILES[0]["path"], "after_header": FILES[0]["path"], "before": "old\n", "after": "new\n"}]
    node = FileNode(plan={"changed": False, "container": RUNNING}, wait={"elapsed": 0},
                    files={"changed": True, "files": [{"path": FILES[0]["path"], "changed": True}], "diff": diff})
    result = run(node, check=True, diff=True, files=FILES)[0]
    assert node.keys() == ["plan", "files"] and node.calls[1][1] is True and node.calls[1][2] is True
    assert result["changed"] is True and result["diff"] == diff[0] and result["container_changed"] is False


def test_a_failed_write_fails_the_task_before_the_container_changes():
    node = FileNode(plan={"changed": True, "container": {}}, apply={"changed": True, "container": RUNNING},
                    wait={"elapsed": 0}, files={"failed": True, "msg": "/s/entrypoint.sh: Permission denied"})
    result = run(node, files=FILES)[0]
    assert result["failed"] is True and "Permission denied" in result["msg"] and "apply" not in node.keys()


def test_a_container_not_running_yet_is_read_again(monkeypatch):
    """Right after a node restart docker exec meets a restarting container: tried again, then the version is read."""
    monkeypatch.setattr(engine_container.time, "sleep", lambda seconds: None)
    answers = [{"failed": True, "msg": "Error response from daemon: Container c1 is restarting, wait until the "
                "container is running"}, {"rc": 0, "stdout": "0.32.0+cpu\n"}]
    node = Node(plan={"changed": False, "container": RUNNING}, version=lambda args: answers.pop(0))
    result = run(node, image=RELEASE, sshd_port=0, engine="vllm")[0]
    assert node.keys() == ["plan", "version", "version"]
    assert result["image_info"]["package_version"] == "0.32.0+cpu" and "package_version_error" not in result["image_info"]


def test_a_version_read_that_keeps_failing_says_why(monkeypatch):
    slept = []
    monkeypatch.setattr(engine_container.time, "sleep", slept.append)
    node = Node(plan={"changed": False, "container": RUNNING},
                version={"failed": True, "msg": "Error response from daemon: Container c1 is not running"})
    result = run(node, image=RELEASE, sshd_port=0, engine="vllm")[0]
    assert node.keys() == ["plan"] + ["version"] * engine_container.EXEC_TRIES
    assert len(slept) == engine_container.EXEC_TRIES - 1
    assert result["image_info"]["package_version"] == ""
    assert result["image_info"]["package_version_error"] == "Error response from daemon: Container c1 is not running"
    # An image without the package: one read, no retry.
    node = Node(plan={"changed": False, "container": RUNNING},
                version={"rc": 1, "stderr": "Traceback ...\nimportlib.metadata.PackageNotFoundError: vllm"})
    result = run(node, image=RELEASE, sshd_port=0, engine="vllm")[0]
    assert node.keys() == ["plan", "version"]
    assert result["image_info"]["package_version_error"] == "importlib.metadata.PackageNotFoundError: vllm"
