# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE module_util sparkops.specdec.plugins.plugin_utils._teardown: what teardown.yml
# removes per node (container always; models and our netplan file with its present fabric addresses only on
# request; never the management address) and the confirmation message.

from __future__ import annotations

import base64
import copy
import json

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _preflight, _teardown

CACHE = "/home/spark/.cache/huggingface"
NETPLAN = "/etc/netplan/40-cx7.yaml"
OURS = """# Managed by sparkops.specdec (netplan_qsfp role): QSFP fabric addresses.
network:
  version: 2
  ethernets:
    enp1s0f1np1:
      addresses: [192.168.100.10/24]
    enP2p1s0f1np1:
      addresses:
        - 192.168.101.10/24: {label: fabric}
    enP7s7:
      addresses: [10.0.0.5/24]
"""
IP_NOW = """1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: enP7s7    inet 10.0.0.5/24 brd 10.0.0.255 scope global enP7s7\\       valid_lft forever preferred_lft forever
5: enp1s0f1np1    inet 192.168.100.10/24 brd 192.168.100.255 scope global enp1s0f1np1\\       valid_lft forever
7: enP2p1s0f1np1    inet 192.168.101.10/24 brd 192.168.101.255 scope global enP2p1s0f1np1\\       valid_lft forever
"""
RECORD_PATH = "/var/lib/sparkops/specdec/container-previous.json"
KEPT_ID = "f" * 64
OLD_IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12"
NEW_IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.4.0rc1"
NO_KEPT = (1, "", "Error: No such object: trtllm-multinode-previous")
NO_RECORD = (1, "", "cat: %s: No such file or directory" % RECORD_PATH)
RUNNING = '[{"Id":"c0ffee","State":{"Status":"running","Running":true,"Paused":false,"Restarting":false,"Pid":42}}]'


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def line(name, rc=0, out="", err=""):
    return "%s\t%d\t%s\t%s" % (name, rc, _b64(out), _b64(err))


def probe(state=(0, RUNNING, ""), netplan=(0, OURS, ""), addrs=(0, IP_NOW, ""), dirs=None, kept=None, record=None,
          backups=None):
    lines = [line("state", *state), line("netplan", *netplan), line("addrs", *addrs)]
    if backups is not None:
        lines.append(line("netplan_backups", 0, "\n".join(backups)))
    if kept is not None:
        lines += [line("kept", *kept), line("record", *record), line("record_path", 0, RECORD_PATH)]
    root = {"item": "root", "rc": 0, "stdout": "\n".join(lines)}
    results = [root]
    if dirs is not None:
        results.append({"item": "user", "rc": 0, "stdout": "\n".join(
            [line("cache", 0, CACHE), line("dirs", 1, "\n".join(dirs), "find: '%s/hub': No such file" % CACHE)])})
    return _preflight.merge_probe({"results": results})


def options(**over):
    base = {"container": "trtllm-multinode", "netplan_file": NETPLAN, "remove_models": False, "remove_netplan": False,
            "check_mode": False, "management": "192.168.250.11", "netplan_apply": False}
    base.update(over)
    return base


def test_default_teardown_removes_the_container_only():
    node = _teardown.plan_node("spark-1", probe(), options())
    assert node["removals"] == ["container trtllm-multinode (running) and the server in it"]
    assert node["stop_server"] is True
    assert node["models"] == [] and node["addresses"] == [] and node["netplan_ours"] is False
    assert node["netplan_note"] is None and node["notes"] == []


@pytest.mark.parametrize("state,items,stop", [
    ((1, "", "Error: No such object: trtllm-multinode"), [], False),
    ((0, '[{"State":{"Status":"exited","Running":false,"Restarting":false}}]', ""),
     ["container trtllm-multinode (exited) and the server in it"], False),
    ((0, '[{"State":{"Status":"restarting","Running":true,"Restarting":true}}]', ""),
     ["container trtllm-multinode (restarting) and the server in it"], False),
])
def test_container_states(state, items, stop):
    node = _teardown.plan_node("spark-1", probe(state=state), options())
    assert node["removals"] == items and node["stop_server"] is stop


def test_docker_not_answering_is_noted():
    node = _teardown.plan_node("spark-1", probe(state=(1, "", "Cannot connect to the Docker daemon")), options())
    assert node["removals"] == []
    assert node["notes"] == ["spark-1: cannot inspect container trtllm-multinode (Cannot connect to the Docker daemon); "
                             "it is removed if it exists."]


def test_check_mode_plans_no_server_stop():
    node = _teardown.plan_node("spark-1", probe(), options(check_mode=True))
    assert node["stop_server"] is False and node["removals"][0].startswith("container trtllm-multinode (running)")


def test_models_only_ours_and_only_on_request():
    dirs = [CACHE + "/sparkops-drafts", CACHE + "/xet", CACHE + "/hub/models--nvidia--Qwen3-235B-A22B-FP4",
            CACHE + "/hub/models--someone--else", CACHE + "/sparkops-tiktoken/"]
    assert _teardown.plan_node("spark-1", probe(dirs=dirs), options())["models"] == []
    node = _teardown.plan_node("spark-1", probe(dirs=dirs), options(remove_models=True))
    assert node["models"] == [CACHE + "/sparkops-drafts", CACHE + "/sparkops-tiktoken",
                              CACHE + "/hub/models--nvidia--Qwen3-235B-A22B-FP4"]
    assert node["removals"][1:] == ["model directory " + p for p in node["models"]]


def test_model_dirs_are_the_presets_targets_and_our_subdirs():
    assert _teardown.MODEL_DIRS == (
        "sparkops-drafts", "sparkops-tiktoken", "hub/models--openai--gpt-oss-120b",
        "hub/models--nvidia--Llama-3.3-70B-Instruct-FP4", "hub/models--nvidia--Qwen3-235B-A22B-FP4",
        "hub/models--sparkops-lab--Qwen2.5-Coder-1.5B-Instruct-GGUF",
        "hub/models--sparkops-lab--Qwen2.5-Coder-0.5B-Instruct-GGUF", "hub/models--nvidia--Qwen3.6-35B-A3B-NVFP4",
        "hub/models--nvidia--Qwen3.8-27B-NVFP4", "hub/models--z-lab--Qwen3.8-27B-DFlash2")


def test_our_netplan_file_and_its_present_cx7_addresses():
    node = _teardown.plan_node("spark-1", probe(), options(remove_netplan=True, netplan_apply=True))
    assert node["netplan_ours"] is True and node["netplan_apply"] is True
    assert node["addresses"] == [{"cidr": "192.168.100.10/24", "dev": "enp1s0f1np1"},
                                 {"cidr": "192.168.101.10/24", "dev": "enP2p1s0f1np1"}]
    assert node["removals"][1:] == ["netplan file " + NETPLAN, "fabric address 192.168.100.10/24 dev enp1s0f1np1",
                                    "fabric address 192.168.101.10/24 dev enP2p1s0f1np1"]


def test_our_marked_backups_of_the_netplan_file_go_with_it():
    # The probe lists only the backups that carry our mark (playbooks/teardown.yml); one of the wrong name is ignored.
    backups = [NETPLAN + ".1234.2026-11-28@10:00:00~", NETPLAN + ".99.2026-11-28@11:00:00~", "/etc/netplan/other.yaml~"]
    node = _teardown.plan_node("spark-1", probe(backups=backups), options(remove_netplan=True))
    assert node["netplan_backups"] == backups[:2]
    assert node["removals"][-2:] == ["netplan backup " + b for b in backups[:2]]
    # Not requested: none.
    assert _teardown.plan_node("spark-1", probe(backups=backups), options())["netplan_backups"] == []


def test_absent_addresses_are_not_planned():
    ip_now = "\n".join(line for line in IP_NOW.splitlines() if "192.168.101" not in line)
    node = _teardown.plan_node("spark-1", probe(addrs=(0, ip_now, "")), options(remove_netplan=True))
    assert node["addresses"] == [{"cidr": "192.168.100.10/24", "dev": "enp1s0f1np1"}]


def test_management_address_is_never_removed():
    node = _teardown.plan_node("spark-1", probe(), options(remove_netplan=True, management="192.168.100.10"))
    assert node["addresses"] == [{"cidr": "192.168.101.10/24", "dev": "enP2p1s0f1np1"}]
    assert node["notes"] == ["spark-1: 192.168.100.10/24 on enp1s0f1np1 is the management address: it stays."]


def test_foreign_netplan_file_stays():
    text = OURS.replace("Managed by sparkops.specdec", "written by hand")
    node = _teardown.plan_node("spark-2", probe(netplan=(0, text, "")), options(remove_netplan=True))
    assert node["netplan_ours"] is False and node["addresses"] == []
    assert node["netplan_note"] == ('%s on spark-2 was not written by sparkops.specdec (no "Managed by sparkops.specdec" '
                                    'mark): it stays, and so do its addresses.' % NETPLAN)


def test_missing_netplan_file_is_no_note():
    node = _teardown.plan_node("spark-1", probe(netplan=(1, "", "cat: no such file")), options(remove_netplan=True))
    assert node["netplan_ours"] is False and node["netplan_note"] is None


def test_unreadable_yaml_removes_the_file_but_no_address():
    node = _teardown.plan_node("spark-1", probe(netplan=(0, "# Managed by sparkops.specdec\nnetwork: [", "")),
                               options(remove_netplan=True))
    assert node["netplan_ours"] is True and node["addresses"] == []
    assert node["netplan_note"].startswith(NETPLAN + " on spark-1: cannot read its addresses")


def test_not_requested_netplan_is_not_looked_at():
    node = _teardown.plan_node("spark-1", probe(), options())
    assert node["netplan_ours"] is False and node["netplan_apply"] is False


@pytest.mark.parametrize("value,expected", [("yes", True), ("YES", True), ("true", True), (True, True), ("", False),
                                            (None, False), ("no", False), (False, False), ("y", False)])
def test_confirmed(value, expected):
    assert _teardown.confirmed(value) is expected


def _nodes(**opts):
    return {"spark-1": _teardown.plan_node("spark-1", probe(), options(**opts)),
            "spark-2": _teardown.plan_node("spark-2", probe(state=(1, "", "No such object")), options(**opts))}


def test_message_without_confirmation():
    proceed, msg = _teardown.plan_message(["spark-1", "spark-2"], _nodes(), "", False, False, False)
    assert proceed is False
    assert msg == ("Nothing was removed. teardown.yml would remove: spark-1: container trtllm-multinode (running) and the "
                   "server in it; spark-2: nothing. Models stay (add -e teardown_remove_models=true to remove them); "
                   "the netplan file and fabric addresses stay (add -e teardown_remove_netplan=true to remove them); "
                   "the SSH mesh stays: the nodes still trust each other's mesh keys (add -e teardown_remove_mesh=true "
                   "to remove our marked blocks in ~/.ssh and the container mesh files). "
                   "Re-run with -e confirm=yes to proceed, or with --check to only show this plan.")


def test_message_check_mode_and_confirmed():
    nodes = _nodes(remove_netplan=True)
    proceed, msg = _teardown.plan_message(["spark-1", "spark-2"], nodes, "", True, False, True)
    assert proceed is True and msg.startswith("Would remove (check mode): spark-1: container trtllm-multinode (running)")
    assert "fabric address 192.168.100.10/24 dev enp1s0f1np1" in msg and "Models stay" in msg and "netplan file" in msg
    proceed, msg = _teardown.plan_message(["spark-1", "spark-2"], nodes, "yes", False, True, True, False, True)
    assert proceed is True and msg.startswith("Removing: spark-1: ")
    # Only the mesh keys stay (nothing else was asked to stay).
    assert msg.endswith(". " + _teardown.MESH_KEYS_STAY[0].upper() + _teardown.MESH_KEYS_STAY[1:] + ".")


def test_message_carries_the_notes():
    nodes = {"spark-1": _teardown.plan_node("spark-1", probe(netplan=(0, "network: {}", "")),
                                            options(remove_netplan=True))}
    _proceed, msg = _teardown.plan_message(["spark-1"], nodes, "", False, True, True)
    assert msg.endswith("it stays, and so do its addresses. Re-run with -e confirm=yes to proceed, or with --check to "
                        "only show this plan.")


@pytest.mark.parametrize("text,expected", [
    ("5: enp1s0f1np1    inet 192.168.100.10/24 brd x scope global enp1s0f1np1", {("192.168.100.10/24", "enp1s0f1np1")}),
    ("9: vlan5@eth0    inet 10.1.1.1/24 scope global vlan5", {("10.1.1.1/24", "vlan5")}),
    ("garbage\n", set()),
])
def test_present_addresses(text, expected):
    assert _teardown.present_addresses(text) == expected


# ---------------------------------------------------------------- a pending container change (kept container)
def kept_inspect(container_id=KEPT_ID, status="exited"):
    return json.dumps([{"Id": container_id, "Name": "/trtllm-multinode-previous",
                        "State": {"Status": status, "Running": status == "running", "Restarting": False}}])


def record_text(name="trtllm-multinode", container_id=KEPT_ID):
    return json.dumps({"schema_version": 1, "name": name, "kept_name": name + "-previous", "kept_at": "2026-11-24T04:00:00Z",
                       "container": {"id": container_id, "created": "", "settings": {"image": OLD_IMAGE}},
                       "change": {"image": NEW_IMAGE, "reference": NEW_IMAGE, "differences": ["image"]}, "sshd": {}})


CHANGE = "kept for the change from %s to %s" % (OLD_IMAGE, NEW_IMAGE)


def test_kept_container_of_our_record_goes_by_its_id_with_its_record():
    node = _teardown.plan_node("spark-1", probe(kept=(0, kept_inspect(), ""), record=(0, record_text(), "")), options())
    assert node["previous"] == {"name": "trtllm-multinode-previous", "id": KEPT_ID, "status": "exited",
                                "image": OLD_IMAGE, "requested": NEW_IMAGE, "remove": True, "record": RECORD_PATH,
                                "remove_record": True}
    assert node["removals"] == ["container trtllm-multinode (running) and the server in it",
                                "previous container trtllm-multinode-previous (exited, %s)" % CHANGE,
                                "container change record %s (%s)" % (RECORD_PATH, CHANGE)]
    assert node["notes"] == []


def test_kept_container_of_another_id_stays_and_the_record_goes():
    node = _teardown.plan_node("spark-1", probe(kept=(0, kept_inspect("a" * 64), ""), record=(0, record_text(), "")),
                               options())
    assert node["previous"]["remove"] is False and node["previous"]["id"] == ""
    assert node["previous"]["remove_record"] is True
    assert node["removals"][1:] == ["container change record %s (%s)" % (RECORD_PATH, CHANGE)]
    assert node["notes"] == ["spark-1: container trtllm-multinode-previous stays: it is not the container %s names "
                             "(id aaaaaaaaaaaa, not ffffffffffff)." % RECORD_PATH]


def test_container_of_that_name_without_our_record_stays():
    node = _teardown.plan_node("spark-1", probe(kept=(0, kept_inspect(), ""), record=NO_RECORD), options())
    assert node["previous"]["remove"] is False and node["previous"]["remove_record"] is False
    assert node["removals"] == ["container trtllm-multinode (running) and the server in it"]
    assert node["notes"] == ["spark-1: container trtllm-multinode-previous stays: no record of sparkops.specdec names it "
                             "(%s is absent); remove it with docker rm if it is not needed." % RECORD_PATH]


def test_no_pending_change_plans_nothing_more():
    for pr in (probe(kept=NO_KEPT, record=NO_RECORD), probe()):
        node = _teardown.plan_node("spark-1", pr, options())
        assert node["previous"]["remove"] is False and node["previous"]["remove_record"] is False
        assert node["removals"] == ["container trtllm-multinode (running) and the server in it"] and node["notes"] == []


def test_record_whose_container_is_gone_is_forgotten():
    node = _teardown.plan_node("spark-1", probe(kept=NO_KEPT, record=(0, record_text(), "")), options())
    assert node["previous"]["remove"] is False and node["previous"]["remove_record"] is True
    assert node["removals"][1:] == ["container change record %s (%s)" % (RECORD_PATH, CHANGE)]


def test_unreadable_record_goes_but_not_the_container():
    node = _teardown.plan_node("spark-1", probe(kept=(0, kept_inspect(), ""), record=(0, "{not json", "")), options())
    assert node["previous"]["remove"] is False and node["previous"]["remove_record"] is True
    assert node["removals"][1:] == ["unreadable container change record " + RECORD_PATH]
    assert node["notes"] == ["spark-1: container trtllm-multinode-previous stays: %s cannot be read, so nothing says "
                             "sparkops.specdec kept it; remove it with docker rm if it is not needed." % RECORD_PATH]


def test_record_of_another_container_name_stays_with_its_container():
    node = _teardown.plan_node("spark-1", probe(kept=(0, kept_inspect(), ""), record=(0, record_text("other"), "")),
                               options())
    assert node["previous"]["remove"] is False and node["previous"]["remove_record"] is False
    assert node["notes"] == ["spark-1: %s records a change of container other, not trtllm-multinode: it stays (run "
                             "teardown.yml with -e specdec_container_name=other to remove that one)." % RECORD_PATH]


def test_docker_not_answering_removes_the_recorded_id_only():
    node = _teardown.plan_node("spark-1", probe(state=(1, "", "Cannot connect"), kept=(1, "", "Cannot connect"),
                                                record=(0, record_text(), "")), options())
    assert node["previous"]["remove"] is True and node["previous"]["id"] == KEPT_ID
    assert node["notes"][-1] == ("spark-1: cannot inspect container trtllm-multinode-previous (Cannot connect); the "
                                 "container %s recorded (id ffffffffffff) is removed if it exists." % RECORD_PATH)


def test_pending_change_is_in_the_confirmation_and_check_mode():
    nodes = {"spark-1": _teardown.plan_node("spark-1", probe(kept=(0, kept_inspect(), ""), record=(0, record_text(), "")),
                                            options(check_mode=True))}
    proceed, msg = _teardown.plan_message(["spark-1"], nodes, "", True, False, False)
    assert proceed is True
    assert msg.startswith("Would remove (check mode): spark-1: container trtllm-multinode (running) and the server in "
                          "it, previous container trtllm-multinode-previous (exited, %s), container change record %s"
                          % (CHANGE, RECORD_PATH))
    proceed, msg = _teardown.plan_message(["spark-1"], nodes, "", False, False, False)
    assert proceed is False and "previous container trtllm-multinode-previous" in msg


# ---------------------------------------------------------------------------- deployment state files
STATE_DIR = "/var/lib/sparkops/specdec/deployments"
NOW = "2026-11-24T08:00:00+00:00"
LAUNCH = {"fingerprint": "fp1", "launch": {"port": 8080, "members": ["spark-1"]}, "target_model": "t/m",
          "method": "draft_target", "max_draft_len": 4, "started_at": "2026-11-23T18:00:00+00:00"}


def state_file(dep="spark-1", running=True, tuned=True):
    return {"schema_version": 1, "deployment": dep, "engine": "llamacpp",
            "desired": {"members": ["spark-1"], "head": "spark-1", "port": 8080},
            "running": copy.deepcopy(LAUNCH) if running else None, "previous": {"fingerprint": "older"},
            "tuned": {"method": "draft_target", "max_draft_len": 2} if tuned else None,
            "created_at": "2026-11-20T10:00:00+00:00", "updated_at": "2026-11-23T18:00:00+00:00"}


def listing(*files):
    """The records probe's stdout: (name, content text or state dict[, mode, owner])."""
    lines = []
    for name, content, *rest in files:
        text = content if isinstance(content, str) else json.dumps(content)
        mode, owner = (rest + ["644", "spark"])[:2] if rest else ("644", "spark")
        lines.append("%s/%s\t%s\t%s\tspark\t%s" % (STATE_DIR, name, mode, owner, _b64(text)))
    return "\n".join(lines)


def with_records(text, rc=0):
    node = probe()
    node["records"] = {"rc": rc, "stdout": text, "stderr": ""}
    return node


def test_running_state_files_are_marked_torn_down_keeping_desired_and_tuned():
    old = state_file("spark-1")
    node = _teardown.plan_node("spark-1", with_records(listing(("spark-1.json", old, "600", "root"),
                                                               ("pair-a.json", state_file("pair-a")))),
                               options(now=NOW))
    marked = node["state_files"]
    assert [(f["path"], f["deployment"], f["action"]) for f in marked] == [
        (STATE_DIR + "/spark-1.json", "spark-1", "mark"), (STATE_DIR + "/pair-a.json", "pair-a", "mark")]
    assert (marked[0]["mode"], marked[0]["owner"], marked[0]["group"]) == ("0600", "root", "spark")
    new = marked[0]["state"]
    assert new["running"] is None and new["previous"] == LAUNCH
    assert new["torn_down_at"] == NOW and new["updated_at"] == NOW
    assert new["desired"] == old["desired"] and new["tuned"] == old["tuned"] and new["created_at"] == old["created_at"]
    assert "running server of deployment spark-1 in %s/spark-1.json (marked torn down" % STATE_DIR in node["removals"][1]
    # The plan does not change what it was given.
    assert old["running"] == LAUNCH


def test_already_torn_down_and_unreadable_state_files_stay():
    done = _teardown.torn_down_state(state_file(), NOW)
    node = _teardown.plan_node("spark-1", with_records(listing(("spark-1.json", done), ("junk.json", "{not json"),
                                                               ("v2.json", dict(state_file(), schema_version=2)))),
                               options(now="2026-11-24T09:00:00+00:00"))
    # A second teardown changes nothing.
    assert node["state_files"] == []
    assert node["removals"] == ["container trtllm-multinode (running) and the server in it"]
    assert [n.split(" is ")[0] for n in node["notes"]] == ["spark-1: %s/junk.json" % STATE_DIR,
                                                           "spark-1: %s/v2.json" % STATE_DIR]
    # A probe without the records (an older play) or a failed one plans nothing for the state files.
    assert _teardown.plan_node("spark-1", probe(), options(now=NOW))["state_files"] == []
    assert _teardown.plan_node("spark-1", with_records("x", rc=1), options(now=NOW))["state_files"] == []


def test_remove_state_removes_every_state_file():
    done = _teardown.torn_down_state(state_file("old"), NOW)
    node = _teardown.plan_node("spark-1", with_records(listing(("spark-1.json", state_file()), ("old.json", done),
                                                               ("junk.json", "{"))),
                               options(now=NOW, remove_state=True))
    assert [(f["path"].rsplit("/", 1)[1], f["action"], f["state"]) for f in node["state_files"]] == [
        ("spark-1.json", "remove", None), ("old.json", "remove", None), ("junk.json", "remove", None)]
    assert node["removals"][1:] == ["state file %s/spark-1.json (deployment spark-1)" % STATE_DIR,
                                    "state file %s/old.json (deployment old)" % STATE_DIR,
                                    "state file %s/junk.json (unreadable)" % STATE_DIR]
    assert node["notes"] == []


def test_parse_state_listing():
    text = listing(("a.json", "{}")) + "\nmalformed line\n%s/b.json\t4755\tspark\tspark\t!!!" % STATE_DIR
    assert _teardown.parse_state_listing(text) == [
        {"path": STATE_DIR + "/a.json", "mode": "0644", "owner": "spark", "group": "spark", "text": "{}"},
        {"path": STATE_DIR + "/b.json", "mode": "4755", "owner": "spark", "group": "spark", "text": None}]


def test_message_names_the_state_files_and_what_removing_them_loses():
    nodes = {"spark-1": _teardown.plan_node("spark-1", with_records(listing(("spark-1.json", state_file()))),
                                            options(now=NOW))}
    proceed, msg = _teardown.plan_message(["spark-1"], nodes, "", True, True, True)
    assert proceed is True and "running server of deployment spark-1" in msg
    assert (". " + _teardown.KEEP_STATE[0].upper() + _teardown.KEEP_STATE[1:] + "; ") in msg
    nodes = {"spark-1": _teardown.plan_node("spark-1", with_records(listing(("spark-1.json", state_file()))),
                                            options(now=NOW, remove_state=True))}
    dummy, msg = _teardown.plan_message(["spark-1"], nodes, "yes", False, True, True, True)
    assert (". " + _teardown.REMOVE_STATE[0].upper() + _teardown.REMOVE_STATE[1:] + "; ") in msg
    assert "tuned" in _teardown.REMOVE_STATE


# ---------------------------------------------------------------- the SSH mesh (teardown_remove_mesh)
MESH_CHANGES = ["remove our block from /home/spark/.ssh/authorized_keys",
                "remove our block from /home/spark/.ssh/known_hosts_sparkops",
                "remove our block from /home/spark/.ssh/config",
                "remove /etc/sparkops/trtllm-ssh/mesh/authorized_keys",
                "remove /etc/sparkops/trtllm-ssh/mesh/known_hosts",
                "remove /etc/sparkops/trtllm-ssh/mesh/id_ed25519",
                "remove /etc/sparkops/trtllm-ssh/mesh"]


def mesh_read(changes=None):
    """The registered check-mode result of ssh_mesh_keys state=absent (as teardown.yml registers it)."""
    return {"changed": False, "changes": list(MESH_CHANGES if changes is None else changes)}


def test_mesh_stays_without_the_request_and_the_message_says_how_to_remove_it():
    node = _teardown.plan_node("spark-1", probe(), options(mesh=mesh_read()))
    assert node["mesh"] == {"remove": False, "changes": []}
    assert not any("mesh" in item for item in node["removals"])
    _proceed, msg = _teardown.plan_message(["spark-1"], {"spark-1": node}, "", False, True, True)
    assert "the nodes still trust each other's mesh keys (add -e teardown_remove_mesh=true" in msg
    assert "pinned container host key" not in msg


def test_mesh_goes_on_request_with_what_the_read_found():
    node = _teardown.plan_node("spark-1", probe(), options(remove_mesh=True, mesh=mesh_read()))
    assert node["mesh"] == {"remove": True, "changes": MESH_CHANGES}
    assert node["removals"][-1] == "the SSH mesh (%s)" % ", ".join(MESH_CHANGES)
    assert node["notes"] == []
    proceed, msg = _teardown.plan_message(["spark-1"], {"spark-1": node}, "yes", False, True, True, False, True)
    assert proceed is True and "the SSH mesh (remove our block from /home/spark/.ssh/authorized_keys" in msg
    assert "teardown_remove_mesh" not in msg and msg.endswith(_teardown.MESH_KEYS_STAY[1:] + ".")


def test_mesh_already_gone_plans_nothing_so_a_second_teardown_changes_nothing():
    node = _teardown.plan_node("spark-1", probe(), options(remove_mesh=True, mesh=mesh_read([])))
    assert node["mesh"] == {"remove": False, "changes": []}
    assert node["removals"] == ["container trtllm-multinode (running) and the server in it"] and node["notes"] == []


@pytest.mark.parametrize("read,why", [
    (None, "no result"),
    ({"skipped": True, "changed": False}, "skipped"),
    ({"failed": True, "msg": "ssh_mesh_user: bob has no entry in the passwd database of spark-1; create it"},
     "ssh_mesh_user: bob has no entry in the passwd database of spark-1; create it"),
])
def test_mesh_without_a_readable_result_stays_with_a_note(read, why):
    node = _teardown.plan_node("spark-1", probe(), options(remove_mesh=True, mesh=read))
    assert node["mesh"] == {"remove": False, "changes": []}
    assert node["notes"] == ["spark-1: the SSH mesh could not be read (%s): it stays." % why]
