# -*- coding: utf-8 -*-
# Unit tests of the container change state machine (plugins/module_utils/_container_change.py): keep the running
# container on a consented recreation, restore it when the new server fails, release it when it serves.

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _container_change as cc

OLD = {"Id": "c-old", "Created": "2026-11-24T01:00:00Z", "Image": "sha256:" + "4" * 64, "State": {"Running": True},
       "Config": {"Image": "lab/standin:1.4.0rc1", "Env": ["B=2", "A=1"], "Labels": {"io.sparkops.specdec.role": "x"},
                  "Cmd": ["bash", "/s/entrypoint.sh"], "Entrypoint": None},
       "HostConfig": {"Binds": ["/s:/s", "/h:/root/.cache/huggingface"], "NetworkMode": "host", "IpcMode": "host",
                      "RestartPolicy": {"Name": "unless-stopped"}, "Devices": [], "Ulimits": [], "Init": True,
                      "ShmSize": 67108864}}
NEW = {"Id": "c-new", "State": {"Running": True}}
SPEC = {"name": "trtllm-multinode", "image": "lab/standin:1.3.0rc12"}


def record(**over):
    rec = cc.new_record(SPEC, OLD, ["image"], "lab/standin:1.3.0rc12", "2026-11-24T02:00:00+00:00",
                        "192.168.100.11", 2233, 60)
    rec.update(over)
    return rec


def test_record_names_the_kept_container_its_settings_and_the_change():
    rec = record()
    assert rec["schema_version"] == 1 and rec["name"] == "trtllm-multinode"
    assert rec["kept_name"] == "trtllm-multinode-previous"
    assert rec["container"]["id"] == "c-old"
    settings = rec["container"]["settings"]
    assert settings["image_id"] == "sha256:" + "4" * 64 and settings["image"] == "lab/standin:1.4.0rc1"
    assert settings["env"] == ["A=1", "B=2"]  # sorted: Docker does not promise an order
    assert settings["binds"] == ["/h:/root/.cache/huggingface", "/s:/s"]
    assert settings["restart_policy"] == "unless-stopped" and settings["init"] is True
    assert rec["change"] == {"image": "lab/standin:1.3.0rc12", "reference": "lab/standin:1.3.0rc12",
                             "differences": ["image"]}
    assert rec["sshd"] == {"host": "192.168.100.11", "port": 2233, "timeout": 60}
    # JSON through and through: what is written is what is read back
    assert cc.parse_record(json.dumps(rec)) == rec


@pytest.mark.parametrize("text", ["", "null", "not json", "[]", json.dumps({"schema_version": 2}),
                                  json.dumps({"schema_version": 1, "name": "x", "kept_name": "x-previous",
                                              "container": {}})])
def test_unreadable_or_foreign_records_are_no_record(text):
    assert cc.parse_record(text) == {}


@pytest.mark.parametrize("plan, consent, rec, action", [
    ({"changed": False, "container": OLD}, True, {}, "none"),
    ({"changed": True, "container": None}, False, {}, "create"),
    ({"changed": True, "container": OLD}, False, {}, "refuse"),
    ({"changed": True, "container": OLD}, True, {}, "keep"),
    # a further change while one is pending: the unproven container is replaced, the recorded one stays kept
    ({"changed": True, "container": NEW}, True, "rec", "replace"),
    ({"changed": True, "container": NEW}, False, "rec", "refuse"),
    # a stopped container serves nothing: it is replaced as before
    ({"changed": True, "container": {"Id": "c", "State": {"Running": False}}}, False, {}, "replace"),
    # nor does one in a crash loop (Docker reports Running and Restarting; docker exec is refused with 409, so its
    # server cannot be stopped to keep it): replaced, with or without consent
    ({"changed": True, "container": {"Id": "c", "State": {"Running": True, "Restarting": True}}}, False, {}, "replace"),
    ({"changed": True, "container": {"Id": "c", "State": {"Running": True, "Restarting": True}}}, True, {}, "replace"),
])
def test_apply_decision(plan, consent, rec, action):
    assert cc.apply_decision(plan, consent, record() if rec == "rec" else rec)["action"] == action


def test_updated_record_keeps_the_kept_container_and_names_the_newest_change():
    rec = record()
    out = cc.updated_record(rec, {"name": "trtllm-multinode", "image": "lab/standin:9"}, ["image", "env"], "lab/standin:9")
    assert out["container"] == rec["container"] and out["kept_name"] == rec["kept_name"]
    assert out["change"]["image"] == "lab/standin:9" and out["change"]["differences"] == ["image", "env"]
    assert rec["change"]["image"] == "lab/standin:1.3.0rc12"  # the input is not changed


def test_restore_removes_the_new_container_and_renames_the_kept_one_back():
    kept = dict(OLD, State={"Running": False})
    assert cc.restore_steps(record(), NEW, kept) == [
        ("remove", "trtllm-multinode"), ("rename", "trtllm-multinode-previous", "trtllm-multinode"),
        ("start", "trtllm-multinode")]
    # the new container never got created
    assert cc.restore_steps(record(), None, kept) == [
        ("rename", "trtllm-multinode-previous", "trtllm-multinode"), ("start", "trtllm-multinode")]


def test_restore_is_safe_to_repeat():
    # already renamed back (an interrupted restore): only started, or nothing when it runs
    assert cc.restore_steps(record(), dict(OLD, State={"Running": False}), None) == [("start", "trtllm-multinode")]
    assert cc.restore_steps(record(), OLD, None) == []
    assert cc.restore_steps({}, NEW, None) == []


def test_restore_refuses_when_the_kept_container_is_gone():
    with pytest.raises(cc.ChangeError) as err:
        cc.restore_steps(record(), NEW, {"Id": "someone-else"}, "/s/container-previous.json")
    msg = str(err.value)
    assert "\n" not in msg and "trtllm-multinode-previous" in msg and "c-old" in msg
    assert "trtllm_container_allow_recreate=true" in msg and "/s/container-previous.json" in msg


def test_release_removes_only_our_kept_container_then_forgets():
    assert cc.release_steps(record(), OLD) == [("remove", "trtllm-multinode-previous"), ("forget",)]
    assert cc.release_steps(record(), {"Id": "not-ours"}) == [("forget",)]
    assert cc.release_steps(record(), None) == [("forget",)]
    assert cc.release_steps({}, OLD) == []


def test_settings_compare_equal_for_the_same_container_in_any_env_order():
    other = json.loads(json.dumps(OLD))
    other["Config"]["Env"] = ["A=1", "B=2"]
    other["State"] = {"Running": False}
    assert cc.container_settings(other) == cc.container_settings(OLD)
    other["Image"] = "sha256:" + "5" * 64
    assert cc.container_settings(other) != cc.container_settings(OLD)


def test_change_report_names_the_image_and_each_node():
    rec = record()
    results = [{"item": "spark-1", "restored": True, "previous": rec,
                "summary": cc.restored_summary(rec, "spark-1", True)},
               {"item": "spark-2", "restored": True, "previous": rec,
                "summary": cc.restored_summary(rec, "spark-2", True)}]
    text = cc.change_report({}, ["spark-1", "spark-2"], results)
    assert text.startswith("The container change to lab/standin:1.3.0rc12 was undone: spark-1: trtllm-multinode runs "
                           "its previous image lab/standin:1.4.0rc1 (sha256:444444444444) again, with its previous "
                           "settings, instead of lab/standin:1.3.0rc12; spark-2: ")
    assert "NOT" not in text and "\n" not in text


def test_change_report_names_nodes_not_restored():
    rec = record()
    results = [{"item": "spark-1", "restored": True, "previous": rec, "summary": "spark-1: back"},
               {"item": "spark-2", "failed": True, "msg": "The container trtllm-multinode-previous ... is gone"}]
    text = cc.change_report({}, ["spark-1", "spark-2"], results)
    assert "was undone: spark-1: back." in text
    assert "was NOT undone on spark-2: The container trtllm-multinode-previous ... is gone" in text
    # no restore ran (e.g. no previous server to return to): the record still stands, and the report says so
    text = cc.change_report({"spark-1": rec}, ["spark-1"], [])
    assert "NOT undone on spark-1: its previous container is still kept as trtllm-multinode-previous" in text
    assert cc.change_report({}, ["spark-1"], [{"item": "spark-1", "skipped": True}]) == ""


# ----------------------------------------------------------------- a change left pending by an interrupted run
PATH = "/var/lib/sparkops/specdec/container-previous.json"
KEPT_OLD = dict(OLD, State={"Running": False})


@pytest.mark.parametrize("plan, consent, kept_matches, action", [
    # the same new image again: no container changes, the server start and its gate finish the change
    ({"changed": False, "container": NEW}, False, False, "none"),
    # the previous image again (backed out): the kept container gets its name back, not a third container
    ({"changed": True, "container": NEW}, True, True, "restore"),
    ({"changed": True, "container": NEW}, False, True, "refuse"),  # the new container runs: consent needed
    ({"changed": True, "container": dict(NEW, State={"Running": False})}, False, True, "restore"),
    ({"changed": True, "container": None}, False, True, "restore"),  # the new container is gone: rename back only
    # another image: the unproven container is replaced, the recorded one stays kept
    ({"changed": True, "container": NEW}, True, False, "replace"),
])
def test_apply_decision_on_a_pending_change(plan, consent, kept_matches, action):
    decision = cc.apply_decision(plan, consent, record(), kept_matches)
    assert decision["action"] == action
    if action in ("none", "restore"):
        assert "trtllm-multinode-previous" in decision["reason"]


def test_kept_matches_means_nothing_without_a_record():
    assert cc.apply_decision({"changed": True, "container": None}, False, {}, True)["action"] == "create"
    assert cc.apply_decision({"changed": True, "container": OLD}, True, {}, True)["action"] == "keep"


def test_restore_steps_of_a_backed_out_change_without_the_new_container():
    assert cc.restore_steps(record(), None, KEPT_OLD) == [
        ("rename", "trtllm-multinode-previous", "trtllm-multinode"), ("start", "trtllm-multinode")]


def test_pending_problem_none_when_the_kept_container_is_the_recorded_one():
    assert cc.pending_problem(record(), NEW, KEPT_OLD, PATH) == ""
    assert cc.pending_problem(record(), None, KEPT_OLD, PATH) == ""
    assert cc.pending_problem({}, NEW, None, PATH) == ""


@pytest.mark.parametrize("current, kept, texts", [
    (NEW, None, ["there is no container trtllm-multinode-previous (it cannot be restored)",
                 "to keep the container trtllm-multinode as it is, remove %s and re-run." % PATH]),
    (NEW, {"Id": "c-stranger"}, ["trtllm-multinode-previous is another container (id c-stranger)",
                                 "docker inspect trtllm-multinode-previous", "remove %s and re-run." % PATH]),
    # the run stopped between the record and the rename (or a restore after the rename): the recorded one runs as name
    (KEPT_OLD, None, ["the recorded container runs as trtllm-multinode", "docker start trtllm-multinode",
                      "remove %s and re-run." % PATH]),
])
def test_pending_problem_names_the_record_and_the_fix(current, kept, texts):
    line = cc.pending_problem(record(), current, kept, PATH)
    assert line.startswith("The pending container change recorded in %s (the change to lab/standin:1.3.0rc12; the "
                           "previous container kept as trtllm-multinode-previous, id c-old)" % PATH)
    assert "\n" not in line and "nothing was changed" in line
    for text in texts:
        assert text in line, (text, line)


@pytest.mark.parametrize("state, requested, texts", [
    ("present", "lab/standin:1.3.0rc12", ["with lab/standin:1.3.0rc12 finishes it", "removes trtllm-multinode-previous"]),
    # the multi-node container runs the derived image with sshd of the reference
    ("present", "lab/standin:1.4.0rc1", ["(the previous image) backs it out", "gives trtllm-multinode-previous its name"]),
    ("present", "lab/standin:9", ["with lab/standin:9 replaces the new container", "keeps trtllm-multinode-previous"]),
    ("absent", "lab/standin:1.3.0rc12", ["stops before any change", "remove the record"]),
    ("other", "lab/standin:1.3.0rc12", ["stops before any change"]),
    ("current", "lab/standin:1.4.0rc1", ["stops before any change"]),
    ("unknown", "lab/standin:1.3.0rc12", ["Docker could not be read"]),
])
def test_pending_outlook(state, requested, texts):
    line = cc.pending_outlook(record(), state, requested)
    for text in texts:
        assert text in line, (text, line)
    assert cc.pending_outlook({}, state, requested) == ""


def test_pending_outlook_is_the_deployments_decision(monkeypatch):
    """The forecast is apply_decision's action (the function the deployment decides with), given what the images say."""
    seen = []

    def decide(plan, allow_recreate, rec, kept_matches=False):
        seen.append((plan["changed"], bool(plan["container"]), allow_recreate, kept_matches))
        return {"action": "create", "reason": ""}

    monkeypatch.setattr(cc, "apply_decision", decide)
    assert cc.pending_outlook(record(), "present", "lab/standin:1.3.0rc12").startswith(
        "the next deployment with lab/standin:1.3.0rc12 creates trtllm-multinode (there is none)")
    cc.pending_outlook(record(), "present", "lab/standin:1.4.0rc1", current=None)
    assert seen == [(False, True, True, False), (True, False, True, True)]


@pytest.mark.parametrize("requested, current, action", [
    ("lab/standin:1.3.0rc12", True, "none"),
    ("lab/standin:1.4.0rc1", True, "restore"),
    ("lab/standin:1.4.0rc1", None, "restore"),
    ("lab/standin:9", True, "replace"),
    ("lab/standin:9", None, "create"),
])
def test_pending_outlook_says_what_it_compared(requested, current, action):
    line = cc.pending_outlook(record(), "present", requested, current=current)
    assert line.endswith(" (told from the image names alone, an image and its derived image with sshd counting as "
                         "one: %s against the change's lab/standin:1.3.0rc12 and the kept container's "
                         "lab/standin:1.4.0rc1; the deployment compares every container setting%s)"
                         % (requested, ", so another changed setting makes it replace the new container instead"
                            if action in ("none", "restore") else "")), line
    words = {"none": "finishes it", "restore": "backs it out", "replace": "replaces the new container",
             "create": "creates trtllm-multinode (there is none)"}
    assert words[action] in line


def test_pending_outlook_knows_the_derived_sshd_images():
    rec = record()
    rec["container"]["settings"]["image"] = "lab/standin:1.4.0rc1-sparkops-sshd"
    rec["change"]["image"] = "lab/standin:1.3.0rc12-sparkops-sshd"
    assert "backs it out" in cc.pending_outlook(rec, "present", "lab/standin:1.4.0rc1")
    rec["change"]["reference"] = ""
    assert "finishes it" in cc.pending_outlook(rec, "present", "lab/standin:1.3.0rc12")
