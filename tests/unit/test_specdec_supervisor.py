# -*- coding: utf-8 -*-
"""roles/trtllm_container/files/specdec_supervisor.py: the decisions of the supervisor in the engine container
(consent record, backoff, peers) and one look at a node directory with a fake server.sh (no container)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "trtllm_container" / "files" / "specdec_supervisor.py"
_spec = importlib.util.spec_from_file_location("specdec_supervisor", str(SCRIPT))
sup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sup)

POLICY = dict(sup.POLICY, interval=0.0, ssh_timeout=1.0)


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


# ------------------------------------------------------------------------------------------- backoff
def test_backoff_doubles_to_the_cap():
    assert [sup.backoff_delay(n, POLICY) for n in range(0, 9)] == [0, 5, 10, 20, 40, 80, 160, 300, 300]


def test_first_look_after_boot_starts_at_once():
    decision, st = sup.decide("", "k", False, sup.new_status(), 1000.0, POLICY)
    assert decision["action"] == "start" and st["key"] == "k" and st["failures"] == 0


def test_crash_loop_backs_off_and_a_stable_run_resets():
    st = sup.new_status()
    now = 1000.0
    decision, st = sup.decide("", "k", False, st, now, POLICY)
    assert decision["action"] == "start"
    st = sup.started(st, now)
    # It runs for 10 s, then dies: the next start waits 5 s.
    decision, st = sup.decide("", "k", True, st, now + 1, POLICY)
    assert decision["action"] == "running" and st["failures"] == 1
    decision, st = sup.decide("", "k", False, st, now + 3, POLICY)
    assert decision["action"] == "wait" and decision["until"] == now + 5
    decision, st = sup.decide("", "k", False, st, now + 5, POLICY)
    assert decision["action"] == "start"
    st = sup.started(st, now + 5)
    decision, st = sup.decide("", "k", False, st, now + 10, POLICY)
    assert decision["action"] == "wait" and decision["until"] == now + 5 + 10
    decision, st = sup.decide("", "k", False, st, now + 15, POLICY)
    assert decision["action"] == "start"
    st = sup.started(st, now + 15)
    assert st["failures"] == 3 and st["starts"] == 3
    # This one stays up for the stable time: the backoff is reset, a later crash restarts at once.
    decision, st = sup.decide("", "k", True, st, now + 20, POLICY)
    decision, st = sup.decide("", "k", True, st, now + 20 + POLICY["stable"], POLICY)
    assert decision["action"] == "running" and st["failures"] == 0
    decision, st = sup.decide("", "k", False, st, now + 500, POLICY)
    assert decision["action"] == "start"


def test_no_consent_is_idle_and_forgets_the_backoff():
    st = sup.started(sup.started(dict(sup.new_status(), key="k"), 1.0), 2.0)
    decision, st = sup.decide("no autostart record", None, False, st, 3.0, POLICY)
    assert decision == {"action": "idle", "reason": "no autostart record", "until": None}
    assert st == sup.new_status()


def test_a_new_record_starts_a_new_backoff():
    st = sup.started(sup.started(dict(sup.new_status(), key="old"), 1.0), 2.0)
    decision, st = sup.decide("", "new", False, st, 3.0, POLICY)
    assert decision["action"] == "start" and st["key"] == "new" and st["failures"] == 0


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
    rec = record(state_file=str(state_file), server_sh_sha1=sha, config_file=str(config))
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
