# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# Managed by sparkops.specdec (trtllm_container role). Runs INSIDE the engine container, started in the background by
# its entrypoint (entrypoint.sh): after a node reboot, a container restart or an engine crash it starts the server
# again, from what Ansible recorded, never from guesses.
#
# What it obeys (all JSON, all written by the specdec_server role; nothing is parsed out of scripts):
#   <state_dir>/autostart.json                the consent record ("desired"), written on the head once a server serves:
#                                             deployment, state file, fingerprint of the launch spec, sha1 of the
#                                             server.sh that starts exactly that spec, whether the ranks need HF_TOKEN.
#                                             `server.sh stop` removes it first (every stop Ansible makes: a restart,
#                                             the rollback, teardown; and any stop by hand), under the lock below.
#   <state_dir>/deployments/<id>.json         the state file: its `running` launch spec must have that fingerprint.
#   <state_dir>/server.sh                     must have that sha1 (a run that rendered another spec disarms it);
#   the record's config_file                  (trtllm's extra-llm-api-config.yml) must hold the running spec's config.
# It starts only `server.sh start`, holding the lock server.sh itself takes for start and stop, so it never races
# Ansible's own start or stop. Two nodes: only the head has the record; it starts mpirun once every host of the OpenMPI
# hostfile answers on the container sshd port (SSH banner). Restarts back off (5 s doubling to 300 s); a server that
# ran 120 s resets the backoff.
# Hang watchdog: when the record names health_url and hang_timeout (> 0), a server whose process runs but whose /health
# has failed (status != 200, timeout, refused) for hang_timeout s on end, after it answered 200 at least once since it
# was started, is recycled: `server.sh recycle` stops its process group (SIGCONT, SIGTERM, SIGKILL after a grace period)
# and keeps the record, and the normal start path (with its backoff) starts it again. A record without these fields
# (written by an earlier role version) is served as before, without the watchdog.
# Its own status (JSON) is in /run/sparkops-specdec/supervisor.json in the container;
# its decisions are logged as JSON lines on the container's output (`docker logs`).
# The decision functions are pure and unit-tested on the controller (tests/unit/test_specdec_supervisor.py).

from __future__ import annotations

import argparse
import errno
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

SCHEMA_VERSION = 1
RECORD_NAME = "autostart.json"
SCRIPT_NAME = "server.sh"
RUN_DIR = "/run/sparkops-specdec"
LOCK_NAME = "server.lock"
STATUS_NAME = "supervisor.json"
# server.sh skips its own locking when its caller holds the lock (this supervisor does).
LOCK_HELD_ENV = "SPARKOPS_SERVER_LOCK_HELD"

POLICY = {
    "interval": 5.0,         # seconds between looks
    "backoff_initial": 5.0,  # seconds before the second start of a server that did not stay up
    "backoff_max": 300.0,    # longest wait between starts
    "stable": 120.0,         # seconds a server must run before its start counts as a success (backoff reset)
    "ssh_timeout": 3.0,      # seconds per sshd probe of a host
    "health_timeout": 5.0,   # seconds per /health probe of the hang watchdog
}


# ---------------------------------------------------------------------------------------------- pure decisions
def record_problem(record, state, script_sha1, config_sha256=None):
    """Why the consent record does not allow a start ('' when it does).

    record: autostart.json (dict) or None; state: the state file it names (dict) or None; script_sha1: sha1 of
    server.sh now, or None when there is none; config_sha256: sha256 of the record's config_file now (None: none).
    """
    if record is None:
        return "no autostart record: no server to serve (never deployed, stopped, or specdec_server_autostart: false)"
    if not isinstance(record, dict) or record.get("schema_version") != SCHEMA_VERSION:
        return "autostart record of an unknown schema (want schema_version %d): left alone" % SCHEMA_VERSION
    for key in ("deployment", "state_file", "fingerprint", "server_sh_sha1"):
        if not isinstance(record.get(key), str) or not record.get(key):
            return "autostart record without %s: left alone" % key
    if record.get("needs_hf_token"):
        return ("the recorded launch needs HF_TOKEN (specdec_server_hf_hub_offline: false), which is never stored on the "
                "node: only Ansible starts it")
    if not isinstance(state, dict):
        return "state file %s missing or unreadable: nothing recorded to start" % record["state_file"]
    if state.get("deployment") != record["deployment"]:
        return "state file %s is of deployment %r, the record of %r" % (
            record["state_file"], state.get("deployment"), record["deployment"])
    running = state.get("running") or {}
    if running.get("fingerprint") != record["fingerprint"]:
        return "the state file's running launch spec (%s) is not the recorded one (%s)" % (
            running.get("fingerprint"), record["fingerprint"])
    if script_sha1 is None:
        return "no server.sh to start the recorded launch spec"
    if script_sha1 != record["server_sh_sha1"]:
        return "server.sh (sha1 %s) is not the one that started the recorded launch spec (%s): a run is under way or " \
               "was refused; only Ansible starts it" % (script_sha1, record["server_sh_sha1"])
    # The config file (trtllm's extra-llm-api-config.yml) is not in server.sh: it must be the running spec's too.
    if record.get("config_file"):
        want = (running.get("launch") or {}).get("config_sha256")
        if config_sha256 != want:
            return "%s (sha256 %s) is not the running launch spec's config (%s): a run is under way; only Ansible " \
                   "starts it" % (record["config_file"], config_sha256, want)
    return ""


def armed_key(record):
    """What identifies one consent: a new record starts a new backoff."""
    return "%s/%s/%s" % (record.get("deployment"), record.get("fingerprint"), record.get("server_sh_sha1"))


def backoff_delay(failures, policy=None):
    """Seconds to wait before the next start after ``failures`` starts that did not stay up (0 for the first)."""
    p = policy or POLICY
    if failures <= 0:
        return 0.0
    return float(min(p["backoff_initial"] * (2 ** (failures - 1)), p["backoff_max"]))


def new_status():
    return {"key": None, "failures": 0, "last_start": None, "running_since": None, "starts": 0}


def decide(problem, key, running, status, now, policy=None):
    """One look. Returns (decision, status).

    problem: record_problem(...) ('' = consent to serve the recorded spec); key: armed_key(record) or None;
    running: whether `server.sh status` says the server runs; status: from the previous look (new_status() first).
    decision: {'action': 'idle'|'running'|'wait'|'start', 'reason': str, 'until': seconds since epoch or None}.
    'start' means: check the peers (two nodes), then start. Nothing here starts or stops anything.
    """
    p = policy or POLICY
    st = dict(status or new_status())
    if problem:
        # No consent: forget the backoff; a server that runs goes on running (whoever started it).
        st.update(new_status())
        return {"action": "idle", "reason": problem, "until": None}, st
    if st.get("key") != key:
        st.update(new_status())
        st["key"] = key
    if running:
        if st.get("running_since") is None:
            st["running_since"] = now
        if st["failures"] and now - st["running_since"] >= p["stable"]:
            st["failures"] = 0
        return {"action": "running", "reason": "the recorded server runs", "until": None}, st
    st["running_since"] = None
    wait = backoff_delay(st["failures"], p)
    until = (st["last_start"] or 0) + wait
    if st["failures"] and now < until:
        return {"action": "wait", "reason": "the server stopped %d time(s) after a start: next start at %s" % (
            st["failures"], time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(until))), "until": until}, st
    return {"action": "start", "reason": "the recorded server does not run", "until": None}, st


def started(status, now):
    """The status once a start was made (it counts as failed until the server has run for policy['stable'] s)."""
    st = dict(status)
    st["failures"] = st.get("failures", 0) + 1
    st["starts"] = st.get("starts", 0) + 1
    st["last_start"] = now
    st["running_since"] = None
    return st


def hang_settings(record):
    """(health_url, hang_timeout seconds) of the hang watchdog from the record; (None, 0) when it is off.

    Off for a record without the fields (an earlier role version), hang_timeout 0, or values of the wrong shape.
    """
    if not isinstance(record, dict):
        return None, 0
    url, timeout = record.get("health_url"), record.get("hang_timeout")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None, 0
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        return None, 0
    return url, float(timeout)


def new_watch():
    return {"pid": None, "healthy_seen": False, "failing_since": None}


def watch(wd, pid, healthy, now, hang_timeout):
    """The hang watchdog's look at a running server. Returns (decision, wd).

    wd: from the previous look (new_watch() first); pid: the server's pid now (a new pid starts a new watch);
    healthy: whether /health answered 200 now; hang_timeout: seconds (<= 0: off).
    decision: {'action': 'running'|'recycle', 'reason': str, 'until': None}. Only a server that answered 200 since its
    start is ever recycled (a loading server is not), after failing probes lasting hang_timeout s on end; one 200
    ends the run of failures. Nothing here stops anything.
    """
    w = dict(wd or new_watch())
    if w.get("pid") != pid:
        w = new_watch()
        w["pid"] = pid
    if not hang_timeout or hang_timeout <= 0:
        w.update(healthy_seen=False, failing_since=None)
        return {"action": "running", "reason": "the recorded server runs (no hang watchdog)", "until": None}, w
    if healthy:
        w.update(healthy_seen=True, failing_since=None)
        return {"action": "running", "reason": "the recorded server runs and answers /health", "until": None}, w
    if not w.get("healthy_seen"):
        return {"action": "running", "reason": "the recorded server runs; /health has not answered 200 since its "
                                               "start (loading): no hang watchdog yet", "until": None}, w
    if w.get("failing_since") is None:
        w["failing_since"] = now
    until = w["failing_since"] + hang_timeout
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(w["failing_since"]))
    if now >= until:
        reason = "the server process %s runs but /health has failed since %s (%d s, specdec_server_hang_timeout %d s): " \
                 "hung, recycling it" % (pid, since, now - w["failing_since"], hang_timeout)
        return {"action": "recycle", "reason": reason, "until": None}, w
    reason = "the recorded server runs; /health fails since %s: recycled at %s unless it answers 200 before" % (
        since, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(until)))
    return {"action": "running", "reason": reason, "until": until}, w


def hostfile_hosts(text):
    """The hosts of an OpenMPI hostfile (first word of each line; comments and blank lines skipped)."""
    hosts = []
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            hosts.append(line.split()[0])
    return hosts


def peers_decision(answers):
    """answers: {host: bool (the container sshd answered)}. '' when every host answers, else the reason to wait."""
    missing = sorted(h for h, ok in answers.items() if not ok)
    if not answers:
        return ""
    if missing:
        return "waiting for the container sshd of %s (mpirun needs every node of the hostfile)" % ", ".join(missing)
    return ""


# ---------------------------------------------------------------------------------------------- I/O
def read_json(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def file_sha1(path, algorithm="sha1"):
    try:
        with open(path, "rb") as handle:
            return hashlib.new(algorithm, handle.read()).hexdigest()
    except OSError:
        return None


def consent_problem(state_dir):
    """(problem, record, state) of the node now: record_problem over the files of state_dir."""
    record = read_json(os.path.join(state_dir, RECORD_NAME))
    good = isinstance(record, dict)
    state = read_json(record["state_file"]) if good and isinstance(record.get("state_file"), str) else None
    config = record.get("config_file") if good else None
    problem = record_problem(record, state, file_sha1(os.path.join(state_dir, SCRIPT_NAME)),
                             file_sha1(config, "sha256") if isinstance(config, str) and config else None)
    return problem, record, state


def ssh_answers(host, port, timeout):
    """Whether an SSH server answers at host:port (its banner starts with SSH-)."""
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(8).startswith(b"SSH-")
    except (OSError, ValueError):
        return False


def health_ok(url, timeout):
    """Whether url answers HTTP 200 within timeout s (no proxy: the server is on this node)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as answer:
            return answer.status == 200
    except Exception:  # pylint: disable=broad-except  # any failure (refused, timeout, HTTP error) is a failing probe
        return False


def server_pid(state_dir):
    try:
        with open(os.path.join(state_dir, "server.pid")) as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def log(event):
    event = dict(event, time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), supervisor="sparkops.specdec")
    sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
    sys.stdout.flush()


def write_status(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
    os.replace(tmp, path)


class Lock(object):
    """The lock server.sh takes for start and stop (flock on RUN_DIR/server.lock)."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)
        self.fd = None


def look(state_dir, status, now, policy, run=subprocess.run, probe=health_ok):
    """One look at the node, under the lock; may start or recycle the server. Returns (decision, status)."""
    problem, record, state = consent_problem(state_dir)
    script = os.path.join(state_dir, SCRIPT_NAME)
    key = armed_key(record) if isinstance(record, dict) else None
    running = False
    if not problem:
        running = run(["bash", script, "status"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                      check=False).returncode == 0
    decision, status = decide(problem, key, running, status, now, policy)
    if decision["action"] == "running":
        url, hang_timeout = hang_settings(record)
        pid = server_pid(state_dir)
        healthy = probe(url, policy["health_timeout"]) if hang_timeout else False
        decision, status["watch"] = watch(status.get("watch"), pid, healthy, now, hang_timeout)
        if decision["action"] == "recycle":
            env = dict(os.environ)
            env[LOCK_HELD_ENV] = "1"
            out = run(["bash", script, "recycle"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                      check=False)
            decision = dict(decision, rc=out.returncode,
                            output=(out.stdout or b"").decode("utf-8", "replace").strip()[-400:])
            status["recycles"] = status.get("recycles", 0) + 1
            status["watch"] = new_watch()
        return decision, status
    status["watch"] = new_watch()
    if decision["action"] != "start":
        return decision, status
    hostfile = os.environ.get("OMPI_MCA_orte_default_hostfile", "")
    hosts = []
    if len(((state or {}).get("running") or {}).get("launch", {}).get("members") or []) > 1 and hostfile:
        try:
            with open(hostfile) as handle:
                hosts = hostfile_hosts(handle.read())
        except OSError:
            return {"action": "wait", "reason": "no OpenMPI hostfile %s" % hostfile, "until": None}, status
    port = os.environ.get("SSH_PORT", "22")
    waiting = peers_decision({h: ssh_answers(h, port, policy["ssh_timeout"]) for h in hosts})
    if waiting:
        return {"action": "wait", "reason": waiting, "until": None}, status
    env = dict(os.environ)
    env[LOCK_HELD_ENV] = "1"
    out = run(["bash", script, "start"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    decision = dict(decision, rc=out.returncode, output=(out.stdout or b"").decode("utf-8", "replace").strip()[-400:])
    return decision, started(status, now)


def run_loop(state_dir, policy, resume=False):
    me = os.path.abspath(__file__)
    my_sha1 = file_sha1(me)
    try:
        os.makedirs(RUN_DIR)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise
    # A container start begins with a fresh backoff; a re-exec (a newer supervisor) carries it on.
    status = (read_json(os.path.join(RUN_DIR, STATUS_NAME)) if resume else None) or new_status()
    for key in ("decision", "booted_at", "pid"):
        status.pop(key, None)
    last = None
    booted_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    log({"action": "boot", "reason": "watching %s" % os.path.join(state_dir, RECORD_NAME)})
    while True:
        # A newer supervisor shipped by Ansible takes over at once (its status file carries the backoff on).
        if file_sha1(me) not in (my_sha1, None):
            log({"action": "reexec", "reason": "%s changed" % me})
            os.execv(sys.executable, [sys.executable, me, "run", "--state-dir", state_dir, "--resume"])
        try:
            with Lock(os.path.join(RUN_DIR, LOCK_NAME)):
                decision, status = look(state_dir, status, time.time(), policy)
            write_status(os.path.join(RUN_DIR, STATUS_NAME), dict(status, decision=decision, booted_at=booted_at,
                                                                  pid=os.getpid()))
        except Exception as exc:  # pylint: disable=broad-except  # one bad look must not end the supervision
            decision = {"action": "error", "reason": "%s: %s" % (type(exc).__name__, exc), "until": None}
        shown = (decision["action"], decision["reason"])
        if decision["action"] in ("start", "recycle") or shown != last:
            log(decision)
        last = shown
        time.sleep(policy["interval"])


def main(argv=None):
    parser = argparse.ArgumentParser(description="sparkops.specdec: restart the recorded server in this container")
    sub = parser.add_subparsers(dest="command")
    run_p = sub.add_parser("run", help="watch and start (the entrypoint runs this in the background)")
    run_p.add_argument("--state-dir", required=True)
    run_p.add_argument("--resume", action="store_true", help="carry the backoff of the status file on (re-exec)")
    look_p = sub.add_parser("decide", help="print what the supervisor would decide now (JSON; starts nothing)")
    look_p.add_argument("--state-dir", required=True)
    args = parser.parse_args(argv)
    if args.command == "run":
        run_loop(args.state_dir, POLICY, args.resume)
        return 0
    if args.command == "decide":
        problem = consent_problem(args.state_dir)[0]
        print(json.dumps({"consent": not problem, "reason": problem or "the recorded server may be started"}))
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
