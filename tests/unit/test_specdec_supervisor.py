# -*- coding: utf-8 -*-
"""roles/trtllm_container/files/specdec_supervisor.py: the decisions of the supervisor in the engine container
(consent record, backoff, peers) and one look at a node directory with a fake server.sh (no container)."""

from __future__ import annotations

import contextlib
import http.server
import importlib.util
import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "trtllm_container" / "files" / "specdec_supervisor.py"
_spec = importlib.util.spec_from_file_location("specdec_supervisor", str(SCRIPT))
sup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sup)

POLICY = dict(sup.POLICY, interval=0.0, ssh_timeout=1.0)
BIG = "MemAvailable: 99999999999 kB\n"


def record(**over):
    rec = {"schema_version": 1, "deployment": "spark-1", "state_file": "/s/deployments/spark-1.json",
           "fingerprint": "fp1", "server_sh_sha1": "abc", "needs_hf_token": False}
    rec.update(over)
    return rec


def state(fingerprint="fp1", deployment="spark-1", members=("spark-1",), config_sha256="c1"):
    return {"schema_version": 1, "deployment": deployment,
            "running": {"fingerprint": fingerprint, "launch": {"members": list(members), "config_sha256": config_sha256}}}


# ------------------------------------------------------------------------------------------- consent
def test_consent_when_record_state_and_script_agree():
    assert sup.record_problem(record(), state(), "abc") == ""


@pytest.mark.parametrize("rec, st, sha, words", [
    (None, state(), "abc", "no autostart record"),
    (record(schema_version=2), state(), "abc", "unknown schema"),
    (record(fingerprint=""), state(), "abc", "without fingerprint"),
    (record(server_sh_sha1=None), state(), "abc", "without server_sh_sha1"),
    (record(needs_hf_token=True), state(), "abc", "needs HF_TOKEN"),
    (record(), None, "abc", "missing or unreadable"),
    (record(), state(deployment="other"), "abc", "of deployment 'other'"),
    # The state file records another launch spec than the one consented to (e.g. a later run's).
    (record(), state(fingerprint="fp2"), "abc", "is not the recorded one"),
    (record(), state(), None, "no server.sh"),
    # A run rendered another spec's server.sh: never started by the supervisor.
    (record(), state(), "def", "is not the one that started"),
])
def test_no_consent(rec, st, sha, words):
    problem = sup.record_problem(rec, st, sha)
    assert words in problem


def test_config_file_must_hold_the_running_config():
    rec = record(config_file="/s/extra-llm-api-config.yml")
    assert sup.record_problem(rec, state(), "abc", "c1") == ""
    # A run wrote the next spec's config (server.sh may be the same: the path is in argv, not the content).
    assert "is not the running launch spec's config" in sup.record_problem(rec, state(), "abc", "c2")
    assert "is not the running launch spec's config" in sup.record_problem(rec, state(), "abc", None)
    # llamacpp reads no config file: the record names none.
    assert sup.record_problem(record(config_file=""), state(), "abc", None) == ""


# ------------------------------------------------------------------------------------------- bounded recovery
CFG = sup.recovery_settings(None)


def test_backoff_doubles_to_the_cap():
    assert [sup.backoff_delay(n, CFG) for n in range(0, 9)] == [0, 5, 10, 20, 40, 80, 160, 300, 300]
    small = dict(CFG, backoff_initial=2, backoff_max=5)
    assert [sup.backoff_delay(n, small) for n in range(0, 5)] == [0, 2, 4, 5, 5]


def test_recovery_settings_of_an_old_record_are_the_documented_defaults():
    cfg = sup.recovery_settings(record(), state())
    assert {k: cfg[k] for k in sup.RECORD_DEFAULTS} == sup.RECORD_DEFAULTS == {
        "max_failed_starts": 5, "backoff_initial": 5, "backoff_max": 300, "health_timeout": 3600,
        "min_available_memory": 8589934592, "drop_caches": False, "completion_probe_interval": 300,
        # NVIDIA's watchdog (nvidia/playbook-vllm-as-a-service): a 5-min timer, 30 s timeout, 600 s loading, 2 fails,
        # a 2700 s cooldown; the memory wait's bound and the boot-loop guard.
        "liveness_interval": 300, "liveness_timeout": 30, "liveness_grace": 600, "liveness_failures": 2,
        "liveness_cooldown": 2700, "memory_wait_timeout": 900, "boot_loop_starts": 3, "boot_loop_window": 600}
    # No health_url in the record: the state file's local_url, else the loopback and the launch port.
    assert cfg["health_url"] is None
    st = state()
    st["running"]["local_url"] = "http://10.0.0.5:8000/"
    assert sup.recovery_settings(record(), st)["health_url"] == "http://10.0.0.5:8000/health"
    st = state()
    st["running"]["launch"]["port"] = 8355
    assert sup.recovery_settings(record(), st)["health_url"] == "http://127.0.0.1:8355/health"
    assert sup.recovery_settings(record(health_url="http://h:1/health"), st)["health_url"] == "http://h:1/health"


def test_recovery_settings_from_the_record_and_wrong_shapes():
    rec = record(max_failed_starts=2, backoff_initial=1, backoff_max=4, health_timeout=30,
                 min_available_memory=1024, drop_caches=True, completion_probe_interval=90, model="m",
                 api_key_file="/s/api-key")
    cfg = sup.recovery_settings(rec)
    assert (cfg["max_failed_starts"], cfg["backoff_initial"], cfg["backoff_max"], cfg["health_timeout"],
            cfg["min_available_memory"], cfg["drop_caches"], cfg["completion_probe_interval"], cfg["model"],
            cfg["api_key_file"]) == (2, 1, 4, 30, 1024, True, 90, "m", "/s/api-key")
    bad = sup.recovery_settings(record(max_failed_starts=0, backoff_initial="5", health_timeout=True,
                                       drop_caches="yes", completion_probe_interval=10, model=3))
    assert (bad["max_failed_starts"], bad["backoff_initial"], bad["health_timeout"], bad["drop_caches"],
            bad["completion_probe_interval"], bad["model"]) == (5, 5, 3600, False, 300, "")
    # The new fields do not change the consent.
    assert sup.record_problem(rec, state(), "abc") == ""


def test_first_look_after_boot_starts_at_once():
    decision, st = sup.decide("", "k", False, sup.new_status(), 1000.0, CFG)
    assert decision["action"] == "start" and st["key"] == "k" and st["failures"] == 0


def _crash(st, now, cfg):
    """A start at now whose server runs (never healthy) and has exited by the next look."""
    st = sup.started(st, now)
    decision, st = sup.decide("", "k", True, st, now + 1, cfg)
    assert decision["action"] == "running"
    return st


def test_failed_starts_back_off_then_the_cap_holds():
    cfg = dict(CFG, max_failed_starts=3, backoff_initial=2, backoff_max=3)
    now = 1000.0
    decision, st = sup.decide("", "k", False, sup.new_status(), now, cfg)
    assert decision["action"] == "start"
    st = _crash(st, now, cfg)
    decision, st = sup.decide("", "k", False, st, now + 1.5, cfg)
    assert decision["action"] == "wait" and decision["until"] == now + 2 and st["failures"] == 1
    assert "exited before /health answered 200" in st["last_failure"]
    decision, st = sup.decide("", "k", False, st, now + 2, cfg)
    assert decision["action"] == "start"
    st = _crash(st, now + 2, cfg)
    decision, st = sup.decide("", "k", False, st, now + 4.9, cfg)
    assert decision["action"] == "wait" and decision["until"] == now + 2 + 3  # 4 s capped at backoff_max 3 s
    decision, st = sup.decide("", "k", False, st, now + 5, cfg)
    assert decision["action"] == "start"
    st = _crash(st, now + 5, cfg)
    # The third consecutive failed start: it gives up, and stays given up whatever the clock says.
    decision, st = sup.decide("", "k", False, st, now + 100, cfg)
    assert decision["action"] == "give_up" and st["failures"] == 3 and st["starts"] == 3
    assert st["gave_up"] == {"key": "k", "at": "1970-01-01T00:18:20Z", "failed_starts": 3, "max_failed_starts": 3,
                             "last_failure": "exited before /health answered 200 (started at 1970-01-01T00:16:45Z)"}
    assert "after 3 consecutive failed starts" in decision["reason"] and "Ansible" in decision["reason"]
    for t in (200.0, 5000.0, 10 ** 6):
        decision, st = sup.decide("", "k", False, st, now + t, cfg)
        assert decision["action"] == "gave_up" and st["starts"] == 3


def test_a_long_run_without_health_is_still_a_failed_start():
    # Today's defect: 120 s of uptime reset the backoff although the server never answered (a 235B model that dies
    # 15 minutes into loading was restarted at once, forever).
    cfg = dict(CFG, max_failed_starts=2)
    st = sup.started(dict(sup.new_status(), key="k"), 0.0)
    for t in range(1, 900, 5):
        decision, st = sup.decide("", "k", True, st, float(t), cfg)
        assert decision["action"] == "running"
    assert st["failures"] == 1
    decision, st = sup.decide("", "k", False, st, 900.0, cfg)
    assert decision["action"] == "start" and st["failures"] == 1  # its 5 s of backoff are long past
    st = sup.started(st, 901.0)
    decision, st = sup.decide("", "k", True, st, 1800.0, cfg)
    decision, st = sup.decide("", "k", False, st, 1801.0, cfg)
    assert decision["action"] == "give_up"


def test_one_health_200_makes_the_start_a_success():
    cfg = dict(CFG, max_failed_starts=2)
    st = sup.started(sup.started(dict(sup.new_status(), key="k"), 0.0), 10.0)
    assert st["failures"] == 2 and st["pending"]
    decision, st = sup.decide("", "k", True, st, 20.0, cfg, healthy=True)
    assert decision["action"] == "running" and st["failures"] == 0 and not st["pending"]
    # It serves, then crashes: started again at once, the count begins again.
    decision, st = sup.decide("", "k", False, st, 5000.0, cfg)
    assert decision["action"] == "start"


def test_a_start_that_never_answers_within_health_timeout_is_recycled_and_counts():
    cfg = dict(CFG, health_timeout=60, max_failed_starts=2)
    st = sup.started(dict(sup.new_status(), key="k"), 100.0)
    decision, st = sup.decide("", "k", True, st, 159.0, cfg)
    assert decision["action"] == "running"
    decision, st = sup.decide("", "k", True, st, 160.0, cfg)
    assert decision["action"] == "recycle" and "specdec_server_health_timeout (60 s)" in decision["reason"]
    assert st["failures"] == 1 and not st["pending"]
    decision, st = sup.decide("", "k", False, st, 165.0, cfg)
    assert decision["action"] == "start"
    st = sup.started(st, 165.0)
    decision, st = sup.decide("", "k", True, st, 225.0, cfg)
    assert decision["action"] == "recycle"
    decision, st = sup.decide("", "k", False, st, 230.0, cfg)
    assert decision["action"] == "give_up" and "within 60 s" in st["gave_up"]["last_failure"]


def test_a_server_ansible_started_is_never_recycled_for_loading():
    # Not started by the supervisor (no pending start): a long load is the role's health wait's business.
    decision, st = sup.decide("", "k", True, dict(sup.new_status(), key="k"), 10 ** 6, dict(CFG, health_timeout=60))
    assert decision["action"] == "running"


def test_gave_up_holds_until_ansible_starts_the_server():
    gave = {"key": "k", "at": "t", "failed_starts": 5, "max_failed_starts": 5, "last_failure": "x"}
    # A container restart: the state file still records the give-up, nothing is started.
    decision, st = sup.decide("", "k", False, sup.new_status(), 10.0, CFG, recorded=gave)
    assert decision["action"] == "gave_up" and st["gave_up"] == gave
    # Another consent's give-up (another key) is not this one's.
    assert sup.gave_up_of({sup.GAVE_UP_KEY: gave}, "k2") is None
    assert sup.gave_up_of({sup.GAVE_UP_KEY: gave}, "k") == gave
    # The state file lost it but nothing runs: still given up.
    decision, st = sup.decide("", "k", False, st, 20.0, CFG)
    assert decision["action"] == "gave_up"
    # Ansible started the server (it runs) and rewrote the state file without the give-up: served again.
    decision, st = sup.decide("", "k", True, st, 30.0, CFG)
    assert decision["action"] == "running" and st["gave_up"] is None and st["failures"] == 0
    decision, st = sup.decide("", "k", False, st, 40.0, CFG)
    assert decision["action"] == "start"


def test_no_consent_is_idle_and_forgets_the_backoff():
    st = sup.started(sup.started(dict(sup.new_status(), key="k"), 1.0), 2.0)
    decision, st = sup.decide("no autostart record", None, False, st, 3.0, CFG)
    assert decision == {"action": "idle", "reason": "no autostart record", "until": None}
    assert st == sup.new_status()


def test_a_new_record_starts_a_new_backoff():
    st = sup.started(sup.started(dict(sup.new_status(), key="old"), 1.0), 2.0)
    decision, st = sup.decide("", "new", False, st, 3.0, CFG)
    assert decision["action"] == "start" and st["key"] == "new" and st["failures"] == 0


def test_memory_wait():
    gib = 1024 ** 3
    assert sup.memory_wait(None, 8 * gib) == ""
    assert sup.memory_wait(9 * gib, 8 * gib) == ""
    assert sup.memory_wait(9 * gib, 0) == ""
    why = sup.memory_wait(3 * gib, 8 * gib)
    assert "8.0 GiB" in why and "3.0 GiB" in why and "specdec_server_min_available_memory" in why
    text = "MemTotal:       24684084 kB\nMemFree:  1 kB\nMemAvailable:   23587572 kB\n"
    assert sup.meminfo_available(text) == 23587572 * 1024
    assert sup.meminfo_available("MemTotal: 1 kB\n") is None and sup.meminfo_available(None) is None


def test_boot_status_keeps_the_count_of_failed_starts():
    saved = dict(sup.started(dict(sup.new_status(), key="k"), 5.0), recycles=2, decision={}, pid=7,
                 gave_up={"key": "k"}, watch={"pid": "1"})
    st = sup.boot_status(saved, resume=False)
    assert st == dict(sup.new_status(), key="k", failures=1, last_start=5.0, gave_up={"key": "k"})
    assert sup.boot_status(saved, resume=True)["recycles"] == 2 and "pid" not in sup.boot_status(saved, True)
    assert sup.boot_status(None, False) == sup.new_status()


# ------------------------------------------------------------------------------------------- peers
def test_hostfile_hosts():
    text = "# Managed by sparkops.specdec\n192.168.100.11\n\n192.168.100.12 slots=1  # worker\n"
    assert sup.hostfile_hosts(text) == ["192.168.100.11", "192.168.100.12"]


def test_peers_decision():
    assert sup.peers_decision({}) == ""
    assert sup.peers_decision({"a": True, "b": True}) == ""
    assert "b, c" in sup.peers_decision({"a": True, "c": False, "b": False})


def _banner_server(banner):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        conn = srv.accept()[0]
        conn.sendall(banner)
        conn.close()
        srv.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def test_ssh_answers(closed_port):
    assert sup.ssh_answers("127.0.0.1", _banner_server(b"SSH-2.0-OpenSSH_9.2\r\n"), 2.0) is True
    assert sup.ssh_answers("127.0.0.1", _banner_server(b"HTTP/1.1 400\r\n"), 2.0) is False
    assert sup.ssh_answers("127.0.0.1", closed_port, 2.0) is False


# ------------------------------------------------------------------------------------------- one look at a node
FAKE_SERVER_SH = """# fake server.sh: status from a file, start appends to a log
case "$1" in
  status) [ -f running ] ;;
  start) echo "start lock_held=${SPARKOPS_SERVER_LOCK_HELD:-}" >> calls; touch running; echo started ;;
esac
"""


@pytest.fixture
def node(tmp_path, monkeypatch):
    (tmp_path / "deployments").mkdir()
    script = tmp_path / "server.sh"
    script.write_text(FAKE_SERVER_SH)
    sha = sup.file_sha1(str(script))
    config = tmp_path / "extra-llm-api-config.yml"
    config.write_text("speculative_config:\n  max_draft_len: 5\n")
    state_file = tmp_path / "deployments" / "spark-1.json"
    state_file.write_text(json.dumps(state(config_sha256=sup.file_sha1(str(config), "sha256"))))
    # No memory wait (the machine running the tests may have less than the default 8 GiB available).
    rec = record(state_file=str(state_file), server_sh_sha1=sha, config_file=str(config), min_available_memory=0)
    (tmp_path / "autostart.json").write_text(json.dumps(rec))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OMPI_MCA_orte_default_hostfile", raising=False)
    return tmp_path


def test_look_starts_the_recorded_server_with_the_lock_held(node):
    decision, st = sup.look(str(node), sup.new_status(), 100.0, POLICY)
    assert decision["action"] == "start" and decision["rc"] == 0 and decision["output"] == "started"
    assert (node / "calls").read_text() == "start lock_held=1\n"
    assert st["failures"] == 1 and st["last_start"] == 100.0
    decision, st = sup.look(str(node), st, 101.0, POLICY)
    assert decision["action"] == "running"
    assert (node / "calls").read_text().count("start") == 1


def test_look_leaves_a_stopped_server_stopped(node):
    # server.sh stop removed the record: nothing is started.
    (node / "autostart.json").unlink()
    decision = sup.look(str(node), sup.new_status(), 100.0, POLICY)[0]
    assert decision["action"] == "idle"
    assert not (node / "calls").exists()


def test_look_never_starts_another_spec(node):
    # A run rendered the next launch spec's server.sh (it records its own server once it serves).
    (node / "server.sh").write_text(FAKE_SERVER_SH + "# new spec\n")
    decision = sup.look(str(node), sup.new_status(), 100.0, POLICY)[0]
    assert decision["action"] == "idle" and "is not the one that started" in decision["reason"]
    assert not (node / "calls").exists()


def test_look_never_starts_with_another_config(node):
    (node / "extra-llm-api-config.yml").write_text("speculative_config:\n  max_draft_len: 2\n")
    decision = sup.look(str(node), sup.new_status(), 100.0, POLICY)[0]
    assert decision["action"] == "idle" and "config" in decision["reason"]
    assert not (node / "calls").exists()


def test_look_two_nodes_waits_for_every_sshd(node, monkeypatch, closed_port):
    st_file = node / "deployments" / "spark-1.json"
    two = json.loads(st_file.read_text())
    two["running"]["launch"]["members"] = ["spark-1", "spark-2"]
    st_file.write_text(json.dumps(two))
    hostfile = node / "openmpi-hostfile"
    hostfile.write_text("# hosts\n127.0.0.1\n")
    monkeypatch.setenv("OMPI_MCA_orte_default_hostfile", str(hostfile))
    monkeypatch.setenv("SSH_PORT", str(closed_port))
    decision, st = sup.look(str(node), sup.new_status(), 100.0, POLICY)
    assert decision["action"] == "wait" and "127.0.0.1" in decision["reason"]
    assert not (node / "calls").exists() and st["failures"] == 0
    monkeypatch.setenv("SSH_PORT", str(_banner_server(b"SSH-2.0-OpenSSH_9.2\r\n")))
    decision, st = sup.look(str(node), st, 105.0, POLICY)
    assert decision["action"] == "start" and (node / "calls").read_text() == "start lock_held=1\n"


def test_decide_command_prints_the_consent(node):
    out = subprocess.run(["python3", str(SCRIPT), "decide", "--state-dir", str(node)], check=True,
                         stdout=subprocess.PIPE).stdout
    assert json.loads(out) == {"consent": True, "reason": "the recorded server may be started"}
    os.remove(str(node / "autostart.json"))
    out = subprocess.run(["python3", str(SCRIPT), "decide", "--state-dir", str(node)], check=True,
                         stdout=subprocess.PIPE).stdout
    assert json.loads(out)["consent"] is False


# ------------------------------------------------------------------------------------------- hang watchdog
def test_hang_settings_from_the_record():
    rec = record(health_url="http://127.0.0.1:8000/health", hang_timeout=600)
    assert sup.hang_settings(rec) == ("http://127.0.0.1:8000/health", 600.0)
    # A record of an earlier role version (no fields), 0, or values of the wrong shape: no watchdog.
    assert sup.hang_settings(record()) == (None, 0)
    assert sup.hang_settings(dict(rec, hang_timeout=0)) == (None, 0)
    assert sup.hang_settings(dict(rec, hang_timeout="600")) == (None, 0)
    assert sup.hang_settings(dict(rec, hang_timeout=True)) == (None, 0)
    assert sup.hang_settings(dict(rec, health_url="127.0.0.1:8000/health")) == (None, 0)
    assert sup.hang_settings(None) == (None, 0)
    # The new fields do not change the consent.
    assert sup.record_problem(rec, state(), "abc") == ""


def test_watch_never_recycles_a_server_that_never_answered():
    wd = sup.new_watch()
    for t in range(0, 4000, 5):  # weights loading for over an hour: /health fails all along
        decision, wd = sup.watch(wd, "42", False, 1000.0 + t, 15)
        assert decision["action"] == "running" and "loading" in decision["reason"]
    assert wd["healthy_seen"] is False and wd["failing_since"] is None


def test_watch_recycles_after_failures_lasting_the_timeout():
    decision, wd = sup.watch(sup.new_watch(), "42", True, 1000.0, 15)
    assert decision["action"] == "running"
    assert wd == {"pid": "42", "healthy_seen": True, "failing_since": None, "completion_at": None}
    decision, wd = sup.watch(wd, "42", False, 1005.0, 15)
    assert decision["action"] == "running" and decision["until"] == 1020.0 and wd["failing_since"] == 1005.0
    decision, wd = sup.watch(wd, "42", False, 1019.9, 15)
    assert decision["action"] == "running"
    decision, wd = sup.watch(wd, "42", False, 1020.0, 15)
    assert decision["action"] == "recycle" and "process 42 runs" in decision["reason"] and "15 s" in decision["reason"]


def test_watch_one_200_ends_the_run_of_failures():
    decision, wd = sup.watch(sup.new_watch(), "42", True, 1000.0, 15)
    decision, wd = sup.watch(wd, "42", False, 1005.0, 15)
    decision, wd = sup.watch(wd, "42", True, 1015.0, 15)
    assert decision["action"] == "running" and wd["failing_since"] is None
    decision, wd = sup.watch(wd, "42", False, 1025.0, 15)
    decision, wd = sup.watch(wd, "42", False, 1035.0, 15)
    assert decision["action"] == "running" and decision["until"] == 1040.0
    decision, wd = sup.watch(wd, "42", False, 1040.0, 15)
    assert decision["action"] == "recycle"


def test_watch_a_new_server_process_starts_a_new_watch():
    decision, wd = sup.watch(sup.new_watch(), "42", True, 1000.0, 15)
    decision, wd = sup.watch(wd, "42", False, 1005.0, 15)
    # Another pid (restarted by Ansible or the supervisor) loading its weights: not healthy yet, never recycled.
    decision, wd = sup.watch(wd, "43", False, 1100.0, 15)
    assert decision["action"] == "running"
    assert wd == {"pid": "43", "healthy_seen": False, "failing_since": None, "completion_at": None}


def test_watch_off_with_timeout_0():
    decision, wd = sup.watch(sup.new_watch(), "42", True, 1000.0, 0)
    for t in (1005.0, 5000.0, 90000.0):
        decision, wd = sup.watch(wd, "42", False, t, 0)
        assert decision == {"action": "running", "reason": "the recorded server runs (no hang watchdog)", "until": None}


FAKE_SERVER_SH_RECYCLE = FAKE_SERVER_SH.replace("esac", """  recycle) echo "recycle lock_held=${SPARKOPS_SERVER_LOCK_HELD:-}" >> calls
    rm -f running; echo "recycled (pid 42)" ;;
esac""")


def _arm_watchdog(node, hang_timeout=15):
    (node / "server.sh").write_text(FAKE_SERVER_SH_RECYCLE)
    (node / "server.pid").write_text("42\n")
    rec = json.loads((node / "autostart.json").read_text())
    rec.update(server_sh_sha1=sup.file_sha1(str(node / "server.sh")), health_url="http://127.0.0.1:1/health",
               hang_timeout=hang_timeout)
    (node / "autostart.json").write_text(json.dumps(rec))
    (node / "running").write_text("")
    return rec


def test_look_recycles_a_hung_server_keeping_the_record_then_starts_it(node):
    rec = _arm_watchdog(node)
    answers = iter([True, False, False, False])

    def probe(url, timeout):
        assert timeout == POLICY["health_timeout"]
        return url == rec["health_url"] and next(answers)
    st = sup.new_status()
    for now in (100.0, 105.0, 110.0):
        decision, st = sup.look(str(node), st, now, POLICY, probe=probe)
        assert decision["action"] == "running"
    decision, st = sup.look(str(node), st, 120.0, POLICY, probe=probe)
    assert decision["action"] == "recycle" and decision["rc"] == 0 and decision["output"] == "recycled (pid 42)"
    assert (node / "calls").read_text() == "recycle lock_held=1\n"
    assert json.loads((node / "autostart.json").read_text()) == rec and st["recycles"] == 1
    assert st["watch"] == sup.new_watch()
    # The next look starts it again by the normal path.
    decision, st = sup.look(str(node), st, 125.0, POLICY, probe=probe)
    assert decision["action"] == "start" and (node / "calls").read_text().endswith("start lock_held=1\n")


def test_look_without_the_watchdog_never_probes(node):
    # A record of an earlier role version (no health_url/hang_timeout) and one with hang_timeout 0.
    (node / "running").write_text("")

    def probe(url, timeout):
        pytest.fail("probed %s (%s s) without a watchdog" % (url, timeout))
    decision, st = sup.look(str(node), sup.new_status(), 100.0, POLICY, probe=probe)
    assert decision["action"] == "running" and "no hang watchdog" in decision["reason"]
    _arm_watchdog(node, hang_timeout=0)
    for now in (100.0, 1000.0, 100000.0):
        decision, st = sup.look(str(node), st, now, POLICY, probe=probe)
        assert decision["action"] == "running"
    assert not (node / "calls").exists()


class _QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _serving(handler):
    """The handler (a _QuietHandler) served on a free port of 127.0.0.1 while in the block; yields its base URL."""
    httpd = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield "http://127.0.0.1:%d" % httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_health_ok(closed_port):
    class Handler(_QuietHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200 if self.path == "/health" else 503)
            self.end_headers()

    with _serving(Handler) as base:
        assert sup.health_ok(base + "/health", 2.0) is True
        assert sup.health_ok(base + "/other", 2.0) is False
    assert sup.health_ok("http://127.0.0.1:%d/health" % closed_port, 1.0) is False


# ------------------------------------------------------------------------------------------- server.sh recycle
def _render_server_sh(tmp_path):
    from ansible_collections.sparkops.specdec.plugins.module_utils import _server
    out = _server.render_script({"env": {}, "members": ["spark-1"],
                                 "argv": ["python3", "-c", "import time; time.sleep(300)"]},
                                str(tmp_path), "trtllm-multinode", str(tmp_path / "deployments" / "spark-1.json"))
    (tmp_path / "server.sh").write_text(out)
    return tmp_path / "server.sh"


def test_server_sh_recycle_kills_a_stopped_server_and_keeps_the_record(tmp_path):
    script = _render_server_sh(tmp_path)
    env = dict(os.environ, SPARKOPS_SERVER_LOCK_HELD="1")
    (tmp_path / "autostart.json").write_text("{}")
    subprocess.run(["bash", str(script), "start"], env=env, check=True, stdout=subprocess.PIPE)
    pid = int((tmp_path / "server.pid").read_text())
    assert subprocess.run(["bash", str(script), "status"], env=env, check=False).returncode == 0
    os.kill(pid, signal.SIGSTOP)  # alive, answers nothing
    t0 = time.time()
    out = subprocess.run(["bash", str(script), "recycle"], env=env, check=True, stdout=subprocess.PIPE).stdout
    assert time.time() - t0 < 10  # SIGCONT let SIGTERM act at once (no wait for the SIGKILL after 60 s)
    assert out.decode().strip() == "recycled (pid %d)" % pid
    assert (tmp_path / "autostart.json").exists() and not (tmp_path / "server.pid").exists()
    assert subprocess.run(["bash", str(script), "status"], env=env, check=False).returncode == 3
    # stop (every stop Ansible or a person makes) removes the record.
    subprocess.run(["bash", str(script), "start"], env=env, check=True, stdout=subprocess.PIPE)
    subprocess.run(["bash", str(script), "stop"], env=env, check=True, stdout=subprocess.PIPE)
    assert not (tmp_path / "autostart.json").exists() and not (tmp_path / "server.pid").exists()


# ------------------------------------------------------------------------------------------- bounded recovery on a node
def _set_record(node, **over):
    rec = json.loads((node / "autostart.json").read_text())
    rec.update(over)
    (node / "autostart.json").write_text(json.dumps(rec))
    return rec


def test_look_gives_up_at_the_cap_and_writes_why_into_the_state_file(node):
    _set_record(node, max_failed_starts=2, backoff_initial=1, backoff_max=1, health_url="http://127.0.0.1:1/health")
    st, now = sup.new_status(), 100.0
    starts = 0
    for dummy in range(8):
        decision, st = sup.look(str(node), st, now, POLICY, probe=lambda url, timeout: False)
        if decision["action"] == "start":
            starts += 1
        if (node / "running").exists():
            (node / "running").unlink()  # the server dies before /health answers
        now += 5.0
    assert starts == 2 and (node / "calls").read_text().count("start") == 2
    assert decision["action"] == "gave_up" and st["failures"] == 2
    state_now = json.loads((node / "deployments" / "spark-1.json").read_text())
    assert state_now[sup.GAVE_UP_KEY]["failed_starts"] == 2 and state_now[sup.GAVE_UP_KEY]["key"] == st["key"]
    assert state_now["running"]["fingerprint"] == "fp1"
    # A new supervisor (container restart, no status carried) reads the give-up from the state file.
    decision, st2 = sup.look(str(node), sup.new_status(), now + 1000, POLICY)
    assert decision["action"] == "gave_up" and (node / "calls").read_text().count("start") == 2
    # Ansible starts the server and writes the state file anew (without the give-up): served again.
    del state_now[sup.GAVE_UP_KEY]
    (node / "deployments" / "spark-1.json").write_text(json.dumps(state_now))
    (node / "running").write_text("")
    decision, st2 = sup.look(str(node), st2, now + 2000, POLICY, probe=lambda url, timeout: True)
    assert decision["action"] == "running" and st2["gave_up"] is None
    (node / "running").unlink()
    decision, st2 = sup.look(str(node), st2, now + 2005, POLICY, probe=lambda url, timeout: True)
    assert decision["action"] == "start"


def test_look_waits_for_memory_and_drops_caches_once_where_proc_sys_is_read_only(node, capsys):
    _set_record(node, min_available_memory=8 * 1024 ** 3, drop_caches=True)
    meminfo = node / "meminfo"
    meminfo.write_text("MemAvailable:    2097152 kB\n")
    drops = []

    def drop():
        drops.append(1)
        return "cannot drop the page cache (/proc/sys/vm/drop_caches: Read-only file system): going on to the wait"
    st = sup.new_status()
    for now in (100.0, 105.0, 110.0):
        decision, st = sup.look(str(node), st, now, POLICY, meminfo=str(meminfo), drop=drop)
        assert decision["action"] == "wait" and "8.0 GiB" in decision["reason"] and "2.0 GiB" in decision["reason"]
    assert not (node / "calls").exists() and len(drops) == 1
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["action"] for e in logged] == ["drop_caches"] and "Read-only" in logged[0]["reason"]
    meminfo.write_text(BIG)
    decision, st = sup.look(str(node), st, 115.0, POLICY, meminfo=str(meminfo), drop=drop)
    assert decision["action"] == "start" and len(drops) == 1
    # The next start tries again, without logging again.
    (node / "running").unlink()
    decision, st = sup.look(str(node), st, 200.0, POLICY, meminfo=str(meminfo), drop=drop)
    assert decision["action"] == "start" and len(drops) == 2 and capsys.readouterr().out == ""


def test_drop_caches_reports_why_not(tmp_path):
    assert "cannot drop the page cache" in sup.drop_caches(str(tmp_path / "no" / "drop_caches"))
    target = tmp_path / "drop_caches"
    assert sup.drop_caches(str(target)) == "" and target.read_text() == "3\n"


def test_completion_due_and_the_benchmark_pause():
    wd = dict(sup.new_watch(), pid="42", healthy_seen=True, failing_since=100.0)
    assert sup.completion_due(wd, 105.0, 60, benchmark=False)
    assert not sup.completion_due(wd, 105.0, 60, benchmark=True)
    assert not sup.completion_due(dict(wd, completion_at=100.0), 159.0, 60, benchmark=False)
    assert sup.completion_due(dict(wd, completion_at=100.0), 160.0, 60, benchmark=False)
    assert not sup.completion_due(dict(wd, failing_since=None), 105.0, 60, benchmark=False)
    assert not sup.completion_due(dict(wd, healthy_seen=False), 105.0, 60, benchmark=False)
    # The marker holds for ttl_seconds after its mtime.
    assert sup.benchmark_running({"ttl_seconds": 600}, 1000.0, 1599.0)
    assert not sup.benchmark_running({"ttl_seconds": 600}, 1000.0, 1600.0)
    assert not sup.benchmark_running({"ttl_seconds": "600"}, 1000.0, 1001.0)
    assert not sup.benchmark_running(None, 1000.0, 1001.0)


def test_watch_a_working_completion_restarts_the_hang_clock():
    decision, wd = sup.watch(sup.new_watch(), "42", True, 1000.0, 15)
    decision, wd = sup.watch(wd, "42", False, 1005.0, 15, completion=True)
    assert decision["action"] == "running" and "not hung" in decision["reason"]
    assert wd["failing_since"] is None and wd["completion_at"] == 1005.0
    decision, wd = sup.watch(wd, "42", False, 1010.0, 15)
    decision, wd = sup.watch(wd, "42", False, 1025.0, 15)
    assert decision["action"] == "recycle"
    decision, wd = sup.watch(sup.watch(sup.new_watch(), "42", True, 1000.0, 15)[1], "42", False, 1005.0, 15,
                             completion=False)
    assert wd["failing_since"] == 1005.0 and wd["completion_at"] == 1005.0


def test_look_sends_a_completion_with_the_api_key_at_most_every_interval_and_not_during_a_benchmark(node):
    _arm_watchdog(node, hang_timeout=600)
    (node / "api-key").write_text("sekret\n")
    _set_record(node, model="openai/gpt-oss-120b", api_key_file=str(node / "api-key"), completion_probe_interval=60)
    sent = []

    def complete(url, model, key, timeout):
        sent.append((url, model, key, timeout))
        return False
    health = iter([True] + [False] * 100)

    def probe(url, timeout):
        return next(health)
    st = sup.new_status()
    for now in range(100, 300, 5):
        decision, st = sup.look(str(node), st, float(now), POLICY, probe=probe, complete=complete)
        assert decision["action"] == "running"
    # /health fails from 105 s (the stall is seen at the next look): completions at 110, 170, 230, 290.
    assert len(sent) == 4 and st["watch"]["completion_at"] == 290.0
    assert sent[0] == ("http://127.0.0.1:1/health", "openai/gpt-oss-120b", "sekret", 2 * POLICY["health_timeout"])
    (node / sup.BENCHMARK_MARKER).write_text(json.dumps({"ttl_seconds": 3600}))
    for now in range(300, 400, 5):
        decision, st = sup.look(str(node), st, float(now), POLICY, probe=probe, complete=complete)
    assert len(sent) == 4


def test_completion_ok(closed_port):
    seen = []

    class Handler(_QuietHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body, self.headers.get("Authorization")))
            self.send_response(200 if self.headers.get("Authorization") == "Bearer k" else 401)
            self.end_headers()

    with _serving(Handler) as base:
        assert sup.completion_ok(base + "/health", "m", "k", 2.0) is True
        assert sup.completion_ok(base + "/health", "m", "", 2.0) is False
    assert seen[0] == ("/v1/completions", {"model": "m", "prompt": "ping", "max_tokens": 1}, "Bearer k")
    assert sup.completion_ok("http://127.0.0.1:%d/health" % closed_port, "m", "", 1.0) is False


# ------------------------------------------------------------------------------------------- vLLM headless worker
def test_health_ok_tcp_is_the_heads_rendezvous(closed_port):
    # A vLLM headless worker's record names its head's torch.distributed rendezvous (tcp://MASTER_ADDR:MASTER_PORT):
    # it answers while the head's rank 0 listens there (vLLM 0.32.0 CPU, --nnodes 2: tests/unit/fixtures/
    # vllm_nnodes2_cpu/README.txt, run3).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        assert sup.health_ok("tcp://127.0.0.1:%d" % listener.getsockname()[1], 1.0) is True
    finally:
        listener.close()
    assert sup.health_ok("tcp://127.0.0.1:%d" % closed_port, 1.0) is False
    assert sup.health_ok("tcp://127.0.0.1:notaport", 1.0) is False
    assert sup.hang_settings(record(health_url="tcp://192.168.100.10:29501", hang_timeout=600)) == (
        "tcp://192.168.100.10:29501", 600.0)
    assert sup.recovery_settings(record(health_url="tcp://192.168.100.10:29501"))["health_url"] == \
        "tcp://192.168.100.10:29501"


def test_look_recycles_a_worker_whose_head_went_and_sends_it_no_completion(node):
    # A worker joined its head (the rendezvous answered); the head went (refused since): recycled after hang_timeout,
    # record kept, started again (it waits for the next head at the rendezvous). No completion probe: it serves none.
    rec = _arm_watchdog(node)
    rec = _set_record(node, health_url="tcp://192.168.100.10:29501", model="m")
    answers = iter([True, False, False, False])

    def probe(url, timeout):
        assert url == "tcp://192.168.100.10:29501"
        return next(answers)

    def complete(url, model, key, timeout):
        pytest.fail("a completion sent to a headless worker's %s" % url)
    st = sup.new_status()
    for now in (100.0, 105.0, 110.0):
        decision, st = sup.look(str(node), st, now, POLICY, probe=probe, complete=complete)
        assert decision["action"] == "running"
    decision, st = sup.look(str(node), st, 120.0, POLICY, probe=probe, complete=complete)
    assert decision["action"] == "recycle" and json.loads((node / "autostart.json").read_text()) == rec
    decision, st = sup.look(str(node), st, 125.0, POLICY, probe=probe, complete=complete)
    assert decision["action"] == "start"


# ------------------------------------------------------------------------------------------- liveness probe
LIVE = dict(CFG, liveness_interval=10, liveness_grace=30, liveness_failures=2, liveness_cooldown=100)


def test_liveness_waits_for_the_grace_health_and_the_interval():
    lv = sup.new_liveness()
    assert not sup.liveness_due(lv, "42", 1020.0, LIVE, True, 1000.0, False)  # loading: within the grace
    assert sup.liveness_due(lv, "42", 1030.0, LIVE, True, 1000.0, False)
    assert not sup.liveness_due(lv, "42", 1030.0, LIVE, False, 1000.0, False)  # /health fails: the hang watchdog's
    assert not sup.liveness_due(lv, "42", 1030.0, LIVE, True, 1000.0, True)  # a benchmark runs
    assert not sup.liveness_due(lv, "42", 1030.0, dict(LIVE, liveness_interval=0), True, 1000.0, False)  # off
    dummy, lv = sup.liveness(lv, "42", "ok", 1030.0, LIVE)
    assert not sup.liveness_due(lv, "42", 1039.0, LIVE, True, 1000.0, False)
    assert sup.liveness_due(lv, "42", 1040.0, LIVE, True, 1000.0, False)
    assert sup.liveness_due(lv, "43", 1031.0, LIVE, True, 1000.0, False)  # another process: no probe of it yet


def test_liveness_restarts_after_k_failures_never_on_401_and_gives_up_within_the_cooldown():
    lv = sup.new_liveness()
    for now in (100.0, 110.0, 120.0):
        decision, lv = sup.liveness(lv, "42", "unauthorized", now, LIVE)
        assert decision["action"] == "running" and "401/403" in decision["reason"] and lv["unauthorized"]
    assert lv["failures"] == 0
    decision, lv = sup.liveness(lv, "42", "failed: no answer within 30 s", 130.0, LIVE)
    assert decision["action"] == "running" and lv["failures"] == 1 and not lv["unauthorized"]
    decision, lv = sup.liveness(lv, "42", "ok", 140.0, LIVE)  # one answer ends the run of failures
    assert lv["failures"] == 0
    decision, lv = sup.liveness(lv, "42", "failed: HTTP 503", 150.0, LIVE)
    decision, lv = sup.liveness(lv, "42", "failed: HTTP 503", 160.0, LIVE)
    assert decision["action"] == "recycle" and lv["restart_at"] == 160.0 and lv["restarts"] == 1
    # The new process wedges too, within the cooldown: give up, leave it as it is.
    decision, lv = sup.liveness(lv, "43", "failed: HTTP 503", 200.0, LIVE, key="k")
    decision, lv = sup.liveness(lv, "43", "failed: HTTP 503", 210.0, LIVE, key="k")
    assert decision["action"] == "give_up" and lv["restarts"] == 1
    assert decision["entry"]["kind"] == "liveness" and decision["entry"]["key"] == "k"
    assert "50 s after the liveness probe restarted it" in decision["entry"]["reason"]
    # After the cooldown a wedge restarts again.
    decision, lv = sup.liveness(lv, "43", "failed: HTTP 503", 300.0, LIVE)
    assert decision["action"] == "recycle" and lv["restarts"] == 2


def test_ask_model_verdicts(closed_port):
    seen = []

    class Handler(_QuietHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body, self.headers.get("Authorization")))
            auth = self.headers.get("Authorization")
            if auth == "Bearer slow":
                time.sleep(2)
            code = {"Bearer k": 200, "Bearer empty": 200, "Bearer boom": 500}.get(auth, 401)
            out = b'{"choices": [{"index": 0}]}' if auth == "Bearer k" else b'{"choices": []}'
            self.send_response(code)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    with _serving(Handler) as base:
        assert sup.ask_model(base + "/health", "m", "k", 5)[0] == "ok"
        assert sup.ask_model(base + "/health", "m", "", 5)[0] == "unauthorized"
        assert sup.ask_model(base + "/health", "m", "boom", 5)[0] == "failed: HTTP 500"
        assert sup.ask_model(base + "/health", "m", "empty", 5)[0] == "failed: HTTP 200 without choices"
        assert sup.ask_model(base + "/health", "m", "slow", 1)[0] == "failed: no answer within 1 s"
    assert seen[0] == ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "ping"}],
                                                "max_tokens": 8, "temperature": 0}, "Bearer k")
    assert sup.ask_model("http://127.0.0.1:%d/health" % closed_port, "m", "", 1)[0].startswith("failed: ")


def _arm_liveness(node, **over):
    _arm_watchdog(node, hang_timeout=600)
    return _set_record(node, **dict(dict(model="m", liveness_interval=10, liveness_grace=0, liveness_failures=2,
                                         liveness_cooldown=1000), **over))


def test_look_restarts_a_wedged_server_once_and_leaves_a_401_alone(node):
    _arm_liveness(node)
    verdicts = []

    def ask(url, model, key, timeout):
        verdicts.append((url, model, timeout))
        return answers.pop(0), 0.5
    answers = ["unauthorized"] * 5
    st = sup.new_status()
    for now in range(100, 150, 10):
        decision, st = sup.look(str(node), st, float(now), POLICY, probe=lambda u, t: True, ask=ask)
        assert decision["action"] == "running" and "401/403" in decision["reason"]
    assert len(verdicts) == 5 and not (node / "calls").exists()
    assert verdicts[0] == ("http://127.0.0.1:1/health", "m", 30)
    # /health 200, but the completions hang: two probes, one restart.
    answers = ["failed: no answer within 30 s"] * 2
    decision, st = sup.look(str(node), st, 150.0, POLICY, probe=lambda u, t: True, ask=ask)
    assert decision["action"] == "running" and "probe 1 of 2 failed" in decision["reason"]
    decision, st = sup.look(str(node), st, 160.0, POLICY, probe=lambda u, t: True, ask=ask)
    assert decision["action"] == "recycle" and (node / "calls").read_text() == "recycle lock_held=1\n"
    assert st["liveness_restarts"] == 1 and st["recycles"] == 1
    decision, st = sup.look(str(node), st, 165.0, POLICY, probe=lambda u, t: True, ask=ask)
    assert decision["action"] == "start"
    (node / "server.pid").write_text("43\n")
    answers = ["ok"] * 10
    for now in range(170, 260, 10):
        decision, st = sup.look(str(node), st, float(now), POLICY, probe=lambda u, t: True, ask=ask)
        assert decision["action"] == "running"
    assert (node / "calls").read_text().count("recycle") == 1 and st["liveness"]["restarts"] == 1
    text = sup.publish(str(node), st, "k", "spark-1", None)
    assert 'specdec_supervisor_liveness_restarts_total{deployment="spark-1"} 1\n' in text
    assert (node / sup.METRICS_NAME).read_text() == text
    assert json.loads((node / sup.GUARD_NAME).read_text())["liveness"]["result"] == "ok"


def test_look_gives_up_a_second_wedge_within_the_cooldown_and_writes_why(node):
    _arm_liveness(node)
    st = sup.new_status()

    def fail(url, model, key, timeout):
        return "failed: HTTP 503", 0.1
    for now in (100.0, 110.0):
        decision, st = sup.look(str(node), st, now, POLICY, probe=lambda u, t: True, ask=fail)
    assert decision["action"] == "recycle"
    decision, st = sup.look(str(node), st, 115.0, POLICY, probe=lambda u, t: True, ask=fail)
    (node / "server.pid").write_text("43\n")
    for now in (120.0, 130.0):
        decision, st = sup.look(str(node), st, now, POLICY, probe=lambda u, t: True, ask=fail)
    assert decision["action"] == "give_up"
    entry = json.loads((node / "deployments" / "spark-1.json").read_text())[sup.GAVE_UP_KEY]
    assert entry["kind"] == "liveness" and entry["key"] == st["key"]
    decision, st = sup.look(str(node), st, 200.0, POLICY, probe=lambda u, t: True, ask=fail)
    assert decision["action"] == "gave_up" and "wedged, left as it is" in decision["reason"]
    assert (node / "calls").read_text().count("recycle") == 1


def test_look_memory_wait_is_bounded(node, tmp_path):
    _set_record(node, min_available_memory=2 * 1024 ** 3, memory_wait_timeout=60)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemAvailable: 1048576 kB\n")
    st = sup.new_status()
    for now in (100.0, 130.0):
        decision, st = sup.look(str(node), st, now, POLICY, meminfo=str(meminfo))
        assert decision["action"] == "wait"
    decision, st = sup.look(str(node), st, 160.0, POLICY, meminfo=str(meminfo))
    assert decision["action"] == "give_up" and "for 60 s" in decision["reason"]
    entry = json.loads((node / "deployments" / "spark-1.json").read_text())[sup.GAVE_UP_KEY]
    assert entry["kind"] == "memory" and "1073741824 bytes" in entry["reason"]
    assert not (node / "calls").exists()


def test_boot_loop_guard_disarms_after_n_unstable_boots_and_settles(node):
    _set_record(node, boot_loop_starts=2, boot_loop_window=60, backoff_initial=1, max_failed_starts=10)
    # Each boot: a new supervisor (a container start keeps only CARRIED), whose first start is counted on disk.
    saved = None
    for boot, now in enumerate((100.0, 200.0)):
        st = sup.boot_status(saved, False)
        decision, st = sup.look(str(node), st, now, POLICY)
        assert decision["action"] == "start"
        assert len(json.loads((node / sup.GUARD_NAME).read_text())["unstable_boots"]) == boot + 1
        (node / "running").unlink()  # it dies with the node
        saved = st
    st = sup.boot_status(saved, False)
    decision, st = sup.look(str(node), st, 300.0, POLICY)
    assert decision["action"] == "give_up" and "a boot loop (specdec_server_boot_loop_starts 2)" in decision["reason"]
    entry = json.loads((node / "deployments" / "spark-1.json").read_text())[sup.GAVE_UP_KEY]
    assert entry["kind"] == "boot_loop" and len(entry["unstable_boots"]) == 2
    assert (node / "calls").read_text().count("start") == 2
    # A boot whose start serves the window clears the count.
    guard = {"schema_version": 1, "key": st["key"], "unstable_boots": ["x"]}
    assert sup.guard_settled(guard, 100.0, 159.0, dict(CFG, boot_loop_window=60)) is guard
    assert sup.guard_settled(guard, 100.0, 160.0, dict(CFG, boot_loop_window=60))["unstable_boots"] == []


def test_metrics_text_is_the_exposition_format():
    text = sup.metrics_text('a"b', {"starts": 2, "gave_up": True})
    assert 'specdec_supervisor_starts_total{deployment="a\\"b"} 2\n' in text
    assert 'specdec_supervisor_gave_up{deployment="a\\"b"} 1\n' in text
    assert "# TYPE specdec_supervisor_starts_total counter\n" in text
    assert text.count("# HELP ") == len(sup.METRICS)
