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
