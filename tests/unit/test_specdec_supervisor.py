# -*- coding: utf-8 -*-
"""roles/trtllm_container/files/specdec_supervisor.py: the decisions of the supervisor in the engine container
(consent record, backoff, peers) and one look at a node directory with a fake server.sh (no container)."""

from __future__ import annotations

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
    assert decision["action"] == "running" and wd == {"pid": "42", "healthy_seen": True, "failing_since": None}
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
    assert decision["action"] == "running" and wd == {"pid": "43", "healthy_seen": False, "failing_since": None}


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


def test_health_ok(closed_port):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200 if self.path == "/health" else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        base = "http://127.0.0.1:%d" % httpd.server_address[1]
        assert sup.health_ok(base + "/health", 2.0) is True
        assert sup.health_ok(base + "/other", 2.0) is False
    finally:
        httpd.shutdown()
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
