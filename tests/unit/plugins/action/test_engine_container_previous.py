# -*- coding: utf-8 -*-
# Unit tests of the action sparkops.specdec.engine_container with previous_record: a consented recreation of a running
# container keeps it (server stopped, record written, container stopped and renamed) before the new one is created;
# previous: restore gives it back, previous: release removes it. A fake node holds the containers and the files.

from __future__ import annotations

import base64
import json
import types

import pytest

from ansible_collections.sparkops.specdec.plugins.action import engine_container as ec
from ansible_collections.sparkops.specdec.plugins.module_utils import _container_change as cc
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

PATH = "/var/lib/sparkops/specdec/container-previous.json"
STOP = ["sh", "-c", '[ ! -f "$0" ] || bash "$0" stop', "/var/lib/sparkops/specdec/server.sh"]
ENV = {"A": "1", "SSHD_LISTEN_ADDRESSES": "192.168.100.11 192.168.101.11"}
SPEC = {"name": "trtllm-multinode", "image": "lab/standin:1.3.0rc12", "state": "started", "env": ENV,
        "command": ["bash", "/var/lib/sparkops/specdec/entrypoint.sh"]}
OLD_IMAGE = "sha256:" + "4" * 64


def old_container(running=True):
    return {"Id": "c-old", "Image": OLD_IMAGE, "State": {"Running": running},
            "Config": {"Image": "lab/standin:1.4.0rc1", "Env": ["A=1"], "Labels": {}},
            "HostConfig": {"Binds": ["/s:/s"], "NetworkMode": "host"}}


class Node:
    """A node with Docker containers (name -> inspect) and files (path -> text); records each module call."""

    def __init__(self, containers=None, files=None, plan_changed=True, fail=()):
        self.containers = dict(containers or {})
        self.files = dict(files or {})
        self.plan_changed = plan_changed
        self.fail = set(fail)
        self.calls = []
        self.serial = 0

    def __call__(self, action):
        def execute_module(module_name=None, module_args=None, task_vars=None, **_):
            args = dict(module_args or {})
            check = bool(action._task.check_mode)
            self.calls.append((module_name, check, args))
            return self.run(module_name, check, args)
        return execute_module

    def run(self, module, check, args):
        if module in self.fail:
            return {"failed": True, "msg": "%s broke" % module}
        if module == ec.SLURP:
            if args["src"] not in self.files:
                return {"failed": True, "msg": "file not found: %s" % args["src"]}
            return {"content": base64.b64encode(self.files[args["src"]].encode()).decode()}
        if module == ec.FILE:
            existed = self.files.pop(args["path"], None) is not None
            return {"changed": existed}
        if module == ec.DOCKER_INFO:
            found = self.containers.get(args["name"])
            return {"exists": found is not None, "container": found}
        if module == ec.DOCKER_EXEC:
            return {"rc": 0, "stdout": ""}
        if module == ec.WAIT_FOR:
            return {"elapsed": 0}
        if module == ec.COMMAND:
            argv = args["argv"]
            if argv[0] == "sh":  # the record write
                self.files[argv[-1]] = args["stdin"]
                return {"rc": 0}
            if argv[:2] == ["docker", "rename"]:
                self.containers[argv[3]] = self.containers.pop(argv[2])
                return {"rc": 0}
            if argv[:2] == ["docker", "start"]:
                self.containers[argv[2]]["State"] = {"Running": True}
                return {"rc": 0}
        if module == ec.DOCKER_CONTAINER:
            name = args["name"]
            current = self.containers.get(name)
            if args.get("state") == "absent":
                self.containers.pop(name, None)
                return {"changed": current is not None}
            if args.get("state") == "stopped":
                current["State"] = {"Running": False}
                return {"changed": True}
            if check:
                return {"changed": self.plan_changed or current is None, "container": current,
                        "diff": {"before": {"image": "a"}, "after": {"image": "b"}}}
            self.serial += 1
            self.containers[name] = {"Id": "c-new-%d" % self.serial, "Image": "sha256:" + "3" * 64,
                                     "State": {"Running": True}, "Config": {"Image": args["image"]}}
            return {"changed": True, "container": self.containers[name]}
        raise AssertionError("unexpected module %s %s" % (module, args))

    def modules(self):
        return [c[0] for c in self.calls]


def run(node, check=False, delegate_to=None, **args):
    base = {"spec": SPEC, "sshd_port": 2233, "allow_recreate": True, "previous_record": PATH, "stop_command": STOP,
            "reference": "lab/standin:1.3.0rc12", "start_timeout": 60}
    task = types.SimpleNamespace(args=dict(base, **args), check_mode=check, diff=False, async_val=0,
                                 action="sparkops.specdec.engine_container", delegate_to=delegate_to)
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    action = ec.ActionModule(task, connection, None, None, None, None)
    action._execute_module = node(action)
    action._remove_tmp_path = lambda *a, **k: None
    return action.run(task_vars={"inventory_hostname": "spark-1"})


@pytest.fixture(autouse=True)
def no_module_defaults(monkeypatch):
    monkeypatch.setattr(_action, "_apply_action_arg_defaults", None)


def test_consented_recreation_keeps_the_running_container_until_the_new_server_serves():
    node = Node({"trtllm-multinode": old_container()})
    result = run(node)
    assert not result.get("failed"), result
    # the server was stopped the way its owner stops it, before the record, the stop and the rename
    execs = [c for c in node.calls if c[0] == ec.DOCKER_EXEC]
    assert execs[0][2] == {"container": "trtllm-multinode", "argv": STOP}
    order = [c[0] for c in node.calls if c[0] in (ec.DOCKER_EXEC, ec.COMMAND)][:3]
    assert order == [ec.DOCKER_EXEC, ec.COMMAND, ec.COMMAND]
    assert node.containers["trtllm-multinode-previous"]["Id"] == "c-old"
    assert node.containers["trtllm-multinode-previous"]["State"] == {"Running": False}
    assert node.containers["trtllm-multinode"]["Id"] == "c-new-1"
    rec = json.loads(node.files[PATH])
    assert rec["container"]["id"] == "c-old" and rec["container"]["settings"]["image_id"] == OLD_IMAGE
    assert rec["change"]["image"] == "lab/standin:1.3.0rc12" and rec["change"]["differences"] == ["image"]
    assert rec["sshd"] == {"host": "192.168.100.11", "port": 2233, "timeout": 60}
    assert result["previous_action"]["action"] == "keep"
    assert result["ansible_facts"]["trtllm_container_previous"] == dict(rec, path=PATH)


def test_a_second_change_replaces_the_unproven_container_and_keeps_the_proven_one():
    node = Node({"trtllm-multinode": old_container()})
    run(node)
    result = run(node, spec=dict(SPEC, image="lab/standin:9"))
    assert result["previous_action"]["action"] == "replace"
    assert node.containers["trtllm-multinode-previous"]["Id"] == "c-old"  # still the proven one
    assert node.containers["trtllm-multinode"]["Id"] == "c-new-2"
    assert json.loads(node.files[PATH])["change"]["image"] == "lab/standin:9"


def test_restore_gives_the_node_its_previous_container_with_its_settings():
    node = Node({"trtllm-multinode": old_container()})
    run(node)
    result = run(node, spec={}, previous="restore")
    assert result["restored"] is True and result["changed"] is True and result["same_settings"] is True
    assert result["steps"] == [["remove", "trtllm-multinode"],
                               ["rename", "trtllm-multinode-previous", "trtllm-multinode"],
                               ["start", "trtllm-multinode"]]
    assert list(node.containers) == ["trtllm-multinode"]
    assert node.containers["trtllm-multinode"]["Id"] == "c-old" and node.containers["trtllm-multinode"]["State"]["Running"]
    assert PATH not in node.files
    assert result["summary"].startswith("spark-1: trtllm-multinode runs its previous image lab/standin:1.4.0rc1")
    assert result["ansible_facts"]["trtllm_container_previous"] == {}
    waits = [c[2] for c in node.calls if c[0] == ec.WAIT_FOR]
    assert waits[-1] == {"host": "192.168.100.11", "port": 2233, "timeout": 60}
    # once more: nothing left to do
    again = run(node, spec={}, previous="restore")
    assert again["changed"] is False and again["restored"] is False


def test_release_removes_the_kept_container_and_the_record():
    node = Node({"trtllm-multinode": old_container()})
    run(node)
    result = run(node, spec={}, previous="release")
    assert result["changed"] is True and result["steps"] == [["remove", "trtllm-multinode-previous"], ["forget"]]
    assert list(node.containers) == ["trtllm-multinode"] and node.containers["trtllm-multinode"]["Id"] == "c-new-1"
    assert PATH not in node.files
    assert run(node, spec={}, previous="release")["changed"] is False


def test_warm_run_changes_nothing_and_publishes_no_record():
    node = Node({"trtllm-multinode": old_container()}, plan_changed=False)
    result = run(node)
    assert result["changed"] is False and result["previous"] == {}
    assert result["previous_action"]["action"] == "none"
    assert ec.DOCKER_EXEC not in node.modules() and ec.COMMAND not in node.modules()


def test_check_mode_keeps_nothing_and_restores_nothing():
    node = Node({"trtllm-multinode": old_container()})
    result = run(node, check=True)
    assert result["changed"] is True and result["previous_action"]["action"] == "keep"
    assert list(node.containers) == ["trtllm-multinode"] and PATH not in node.files
    node.files[PATH] = json.dumps(cc.new_record(SPEC, old_container(), ["image"], "x", "t"))
    result = run(node, check=True, spec={}, previous="restore")
    assert result["changed"] is True and result["restored"] is False and "runs its previous image" in result["summary"]
    assert node.containers["trtllm-multinode"]["Id"] == "c-old" and PATH in node.files


def test_no_consent_refuses_before_anything_changes():
    node = Node({"trtllm-multinode": old_container()})
    result = run(node, allow_recreate=False)
    assert result["failed"] is True and "trtllm_container_allow_recreate=true" in result["msg"]
    # read only: the check-mode plan and the record (none here)
    assert node.modules() == [ec.DOCKER_CONTAINER, ec.SLURP] and node.calls[0][1] is True


def test_a_failed_create_puts_the_kept_container_back_at_once():
    node = Node({"trtllm-multinode": old_container()})

    def run_module(module, check, args, orig=node.run):
        if module == ec.DOCKER_CONTAINER and not check and args.get("image"):
            return {"failed": True, "msg": "No such image"}
        return orig(module, check, args)
    node.run = run_module
    result = run(node)
    assert result["failed"] is True and "No such image" in result["msg"] and result["previous_restored"] is True
    assert node.containers["trtllm-multinode"]["Id"] == "c-old" and node.containers["trtllm-multinode"]["State"]["Running"]
    assert "trtllm-multinode-previous" not in node.containers and PATH not in node.files


def test_a_failed_server_stop_leaves_the_container_as_it_is():
    node = Node({"trtllm-multinode": old_container()}, fail={ec.DOCKER_EXEC})
    result = run(node)
    assert result["failed"] is True
    assert result["msg"].startswith("Stopping the server in trtllm-multinode before keeping it failed")
    assert node.containers["trtllm-multinode"]["Id"] == "c-old" and PATH not in node.files


def test_restore_of_a_vanished_kept_container_fails_with_one_line():
    node = Node({"trtllm-multinode": {"Id": "c-new", "State": {"Running": True}}},
                files={PATH: json.dumps(cc.new_record(SPEC, old_container(), ["image"], "x", "t"))})
    result = run(node, spec={}, previous="restore")
    assert result["failed"] is True and "\n" not in result["msg"] and "is gone from this node" in result["msg"]
    assert node.containers["trtllm-multinode"]["Id"] == "c-new"


def test_restore_and_release_need_the_record_path():
    node = Node()
    with pytest.raises(Exception, match="needs previous_record"):
        run(node, spec={}, previous="release", previous_record="")


def test_the_summary_names_the_node_the_head_restores_for():
    # the head runs the restore for every member (delegate_to): the summary names the member, not the head
    node = Node({"trtllm-multinode": old_container()})
    run(node)
    result = run(node, spec={}, previous="restore", delegate_to="spark-2")
    assert result["summary"].startswith("spark-2: trtllm-multinode runs its previous image lab/standin:1.4.0rc1 "
                                        "(sha256:444444444444) again")
