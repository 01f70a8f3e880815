# -*- coding: utf-8 -*-
# Unit tests of the action sparkops.specdec.engine_container with a container change left pending by an interrupted
# run (the record and the kept container are there, the new container runs, no server started): the next run finishes
# it (the same new image), backs it out (the kept container's image: the same container renamed back, not a third one),
# or stops with one line before any change when the record and the containers disagree.

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkops.specdec.plugins.action import engine_container as ec
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

from test_engine_container_previous import PATH, SPEC, Node, old_container, run

NAME, KEPT = "trtllm-multinode", "trtllm-multinode-previous"
OLD_SPEC = dict(SPEC, image="lab/standin:1.4.0rc1")  # the image the kept container runs


@pytest.fixture(autouse=True)
def no_module_defaults(monkeypatch):
    monkeypatch.setattr(_action, "_apply_action_arg_defaults", None)


class Docker(Node):
    """docker_container's check mode compares the image (and, for state started, that the container runs)."""

    def run(self, module, check, args):
        if module == ec.DOCKER_CONTAINER and check and args.get("state") in ("started", "present"):
            current = self.containers.get(args["name"])
            changed = (current is None or (current.get("Config") or {}).get("Image") != args.get("image")
                       or (args["state"] == "started" and not current["State"].get("Running")))
            return {"changed": changed, "container": current, "diff": {"before": {}, "after": {}}}
        return super().run(module, check, args)

    def applied(self):
        """The calls that changed the node (not check mode, not reads)."""
        reads = (ec.SLURP, ec.DOCKER_INFO, ec.WAIT_FOR)
        return [c for c in self.calls if not c[1] and c[0] not in reads]


def pending():
    """A node where a consented change to SPEC's image stopped after the recreation (no server start, no gate)."""
    node = Docker({NAME: old_container()})
    first = run(node)
    assert first["previous_action"]["action"] == "keep" and PATH in node.files
    assert node.containers[NAME]["Id"] == "c-new-1" and node.containers[KEPT]["Id"] == "c-old"
    node.calls = []
    return node


def test_the_same_new_image_again_changes_no_container_and_hands_the_record_to_the_gate():
    node = pending()
    result = run(node)
    assert not result.get("failed"), result
    assert result["changed"] is False and result["previous_action"]["action"] == "none"
    assert KEPT in result["previous_action"]["reason"]
    # the gate (specdec_server's release or restore) reads this fact
    assert result["ansible_facts"]["trtllm_container_previous"] == dict(json.loads(node.files[PATH]), path=PATH)
    assert node.applied() == []
    assert node.containers[NAME]["Id"] == "c-new-1" and node.containers[KEPT]["Id"] == "c-old"
    # then, as an uninterrupted run: the new server serves (release), or fails (restore)
    failing = json.loads(json.dumps(node.containers)), dict(node.files)
    released = run(node, spec={}, previous="release")
    assert released["steps"] == [["remove", KEPT], ["forget"]] and list(node.containers) == [NAME]
    node.containers, node.files = failing
    restored = run(node, spec={}, previous="restore")
    assert restored["restored"] is True and node.containers[NAME]["Id"] == "c-old" and PATH not in node.files


def test_the_previous_image_again_restores_the_kept_container_not_a_third_one():
    node = pending()
    # the new container runs: as any recreation of a running container, this needs the consent
    refused = run(node, spec=OLD_SPEC, allow_recreate=False)
    assert refused["failed"] is True and "trtllm_container_allow_recreate=true" in refused["msg"]
    assert node.applied() == [] and node.containers[KEPT]["Id"] == "c-old" and PATH in node.files
    result = run(node, spec=OLD_SPEC)
    assert not result.get("failed"), result
    assert result["previous_action"]["action"] == "restore" and result["previous_restored"] is True
    assert result["changed"] is True
    assert list(node.containers) == [NAME]
    assert node.containers[NAME]["Id"] == "c-old" and node.containers[NAME]["State"]["Running"] is True
    assert node.serial == 1  # no container was created
    assert PATH not in node.files
    assert result["previous"] == {} and result["ansible_facts"]["trtllm_container_previous"] == {}
    assert result["container"]["Id"] == "c-old"
    done = [c[2].get("argv") or c[2] for c in node.applied()]
    assert done[:3] == [{"name": NAME, "state": "absent", "force_kill": True}, ["docker", "rename", KEPT, NAME],
                        ["docker", "start", NAME]]
    # a second run changes nothing
    again = run(node, spec=OLD_SPEC)
    assert again["changed"] is False and again["previous_action"]["action"] == "none" and again["previous"] == {}


def test_backing_out_when_the_new_container_is_gone_renames_the_kept_one_back():
    node = pending()
    del node.containers[NAME]
    result = run(node, spec=OLD_SPEC, allow_recreate=False)  # nothing runs: no consent needed
    assert result["previous_action"]["action"] == "restore", result
    assert list(node.containers) == [NAME] and node.containers[NAME]["Id"] == "c-old" and node.serial == 1


def test_backing_out_in_check_mode_says_so_and_changes_nothing():
    node = pending()
    result = run(node, spec=OLD_SPEC, check=True)
    assert result["changed"] is True and result["previous_action"]["action"] == "restore"
    assert node.applied() == [] and node.containers[KEPT]["Id"] == "c-old" and PATH in node.files


@pytest.mark.parametrize("check", [False, True])
@pytest.mark.parametrize("case, texts", [
    ("kept_gone", ["there is no container %s" % KEPT, "remove %s and re-run" % PATH]),
    ("kept_other", ["%s is another container (id c-stranger)" % KEPT, "remove %s and re-run" % PATH]),
    ("recorded_runs", ["the recorded container runs as %s" % NAME, "docker start %s" % NAME, "remove %s" % PATH]),
])
@pytest.mark.parametrize("spec", [SPEC, OLD_SPEC])
def test_a_record_that_does_not_match_the_containers_stops_before_any_change(check, case, texts, spec):
    node = pending()
    if case == "kept_gone":
        del node.containers[KEPT]
    elif case == "kept_other":
        node.containers[KEPT] = dict(node.containers[KEPT], Id="c-stranger")
    else:  # a run stopped after writing the record, before the rename
        del node.containers[NAME]
        node.containers[NAME] = node.containers.pop(KEPT)
    before = (json.dumps(node.containers, sort_keys=True), dict(node.files))
    result = run(node, spec=spec, check=check)
    assert result["failed"] is True and result["changed"] is False
    assert "\n" not in result["msg"] and result["msg"].startswith("The pending container change recorded in %s" % PATH)
    for text in texts:
        assert text in result["msg"], (text, result["msg"])
    assert node.applied() == [] and (json.dumps(node.containers, sort_keys=True), dict(node.files)) == before
    assert result["previous"]["path"] == PATH
