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
# hostfile answers on the container sshd port (SSH banner).
# Bounded recovery: a start by the supervisor fails when the server exits, or is recycled, before /health answered 200
# since that start (record field health_timeout, specdec_server_health_timeout: a server that never answers 200 within
# it is recycled). Consecutive failed starts back off (backoff_initial s doubling to backoff_max s); after
# max_failed_starts of them it gives up: no further start until Ansible starts the server, and why is written into the
# deployment's state file (key supervisor_gave_up; `specdec_status` and the support bundle show it; a start by Ansible
# rewrites the state file without it). One answer 200 makes the start a success (the count starts again at 0).
# Before each start it waits until /proc/meminfo's MemAvailable reaches min_available_memory bytes; with drop_caches it
# first writes 3 to /proc/sys/vm/drop_caches (read-only /proc/sys, as in an unprivileged container: logged once, then
# the wait). The count and the backoff outlive a container restart (the status file below); not a new record's key.
# Hang watchdog: when the record names health_url and hang_timeout (> 0), a server whose process runs but whose /health
# has failed (status != 200, timeout, refused) for hang_timeout s on end, after it answered 200 at least once since it
# was started, is recycled: `server.sh recycle` stops its process group (SIGCONT, SIGTERM, SIGKILL after a grace period)
# and keeps the record, and the normal start path (with its backoff) starts it again. While /health fails the watchdog
# also sends a one-token completion (record fields model, api_key_file), at most every completion_probe_interval s: an
# answer 200 means the server works (only /health stalls) and restarts the hang clock. It sends none while a benchmark
# runs (<state_dir>/benchmark-running.json, written by the specdec_benchmark role, honoured until its mtime + its
# ttl_seconds): those tokens would count in the server's counters the status, the benchmark and the tuner read.
# A vLLM headless worker (engine vllm across Sparks) has its own record on its node; its health_url is its head's
# rendezvous, tcp://MASTER_ADDR:MASTER_PORT (open while the head's rank 0 lives): a worker whose head went is recycled
# after hang_timeout and started again for the next head (no completion probe: a worker serves no HTTP).
# A record without these fields (written by an earlier role version) is served with the defaults in RECORD_DEFAULTS,
# without the hang watchdog; its /health is the state file's running local_url (else 127.0.0.1 and the launch port).
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
import urllib.error
import urllib.request

SCHEMA_VERSION = 1
RECORD_NAME = "autostart.json"
SCRIPT_NAME = "server.sh"
RUN_DIR = "/run/sparkops-specdec"
# What a record's health_url may be: the server's /health (http, https), or a vLLM headless worker's head rendezvous
# (tcp://MASTER_ADDR:MASTER_PORT; the worker serves no HTTP).
PROBE_SCHEMES = ("http://", "https://", "tcp://")
LOCK_NAME = "server.lock"
STATUS_NAME = "supervisor.json"
# server.sh skips its own locking when its caller holds the lock (this supervisor does).
LOCK_HELD_ENV = "SPARKOPS_SERVER_LOCK_HELD"

POLICY = {
    "interval": 5.0,         # seconds between looks
    "ssh_timeout": 3.0,      # seconds per sshd probe of a host
    "health_timeout": 5.0,   # seconds per /health probe (and per completion probe: twice this)
}
# What a record without the bounded-recovery fields (an earlier role version) is served with: the role's defaults
# (roles/specdec_server/meta/argument_specs.yml, specdec_server_<name>).
RECORD_DEFAULTS = {
    "max_failed_starts": 5,                 # consecutive failed starts before the supervisor gives up
    "backoff_initial": 5,                   # seconds before the start after the first failed one
    "backoff_max": 300,                     # longest wait between two starts
    "health_timeout": 3600,                 # seconds a start has to answer /health 200 (else recycled: a failed start)
    "min_available_memory": 8 * 1024 ** 3,  # bytes of MemAvailable before a start
    "drop_caches": False,                   # write 3 to /proc/sys/vm/drop_caches before the memory wait
    "completion_probe_interval": 300,       # seconds between two completion probes of the hang watchdog (>= 60)
    # The liveness probe (a chat completion while /health answers 200), with the rails of NVIDIA's "Keeping vLLM Up"
    # DGX Spark playbook (nvidia/playbook-vllm-as-a-service/assets/vllm-watchdog.sh in NVIDIA/dgx-spark-playbooks):
    # a 5-minute timer, PROBE_TIMEOUT 30, MIN_UPTIME 600, FAILS_BEFORE_RESTART 2, RESTART_COOLDOWN 2700, never a
    # restart on an authentication failure.
    "liveness_interval": 300,               # seconds between two liveness probes (0: no liveness probe)
    "liveness_timeout": 30,                 # seconds one liveness probe may take
    "liveness_grace": 600,                  # seconds after a start without a liveness probe (a loading server)
    "liveness_failures": 2,                 # consecutive failed liveness probes before a restart
    "liveness_cooldown": 2700,              # seconds after a probe restart in which a new wedge gives up instead
    "memory_wait_timeout": 900,             # seconds the memory wait before a start may last (0: no bound)
    "boot_loop_starts": 3,                  # boots in a row whose start was not stable before autostart disarms
    "boot_loop_window": 600,                # seconds a started server must serve to count as stable
}
LIVENESS_MAX_TOKENS = 8                     # NVIDIA's probe: max_tokens 8, temperature 0, "ping"
GUARD_NAME = "supervisor-state.json"        # <state_dir>: what outlives a reboot (the boot-loop count) and status reads
METRICS_NAME = "supervisor.prom"            # <state_dir>: node_exporter textfile format (see write_metrics)
GAVE_UP_KEY = "supervisor_gave_up"
BENCHMARK_MARKER = "benchmark-running.json"


def _iso(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


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


def _count(value, default, minimum):
    """An int >= minimum from the record, else the default (absent, bool, wrong type or out of range)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        return default
    return value


def recovery_settings(record, state=None):
    """The bounded-recovery settings of a record: RECORD_DEFAULTS for fields it lacks or that have the wrong shape.

    Also ``health_url`` (the record's, else the state file's running local_url + /health, else 127.0.0.1 and the
    launch port; None when none is known), ``model`` and ``api_key_file`` of the completion probe ('' when none).
    """
    rec = record if isinstance(record, dict) else {}
    d = RECORD_DEFAULTS
    out = {
        "max_failed_starts": _count(rec.get("max_failed_starts"), d["max_failed_starts"], 1),
        "backoff_initial": _count(rec.get("backoff_initial"), d["backoff_initial"], 0),
        "backoff_max": _count(rec.get("backoff_max"), d["backoff_max"], 0),
        "health_timeout": _count(rec.get("health_timeout"), d["health_timeout"], 1),
        "min_available_memory": _count(rec.get("min_available_memory"), d["min_available_memory"], 0),
        "drop_caches": rec["drop_caches"] if isinstance(rec.get("drop_caches"), bool) else d["drop_caches"],
        "completion_probe_interval": _count(rec.get("completion_probe_interval"), d["completion_probe_interval"], 60),
        "liveness_interval": _count(rec.get("liveness_interval"), d["liveness_interval"], 0),
        "liveness_timeout": _count(rec.get("liveness_timeout"), d["liveness_timeout"], 1),
        "liveness_grace": _count(rec.get("liveness_grace"), d["liveness_grace"], 0),
        "liveness_failures": _count(rec.get("liveness_failures"), d["liveness_failures"], 1),
        "liveness_cooldown": _count(rec.get("liveness_cooldown"), d["liveness_cooldown"], 0),
        "memory_wait_timeout": _count(rec.get("memory_wait_timeout"), d["memory_wait_timeout"], 0),
        "boot_loop_starts": _count(rec.get("boot_loop_starts"), d["boot_loop_starts"], 0),
        "boot_loop_window": _count(rec.get("boot_loop_window"), d["boot_loop_window"], 1),
        "model": rec.get("model") if isinstance(rec.get("model"), str) else "",
        "api_key_file": rec.get("api_key_file") if isinstance(rec.get("api_key_file"), str) else "",
    }
    url = rec.get("health_url")
    if not isinstance(url, str) or not url.startswith(PROBE_SCHEMES):
        running = (state or {}).get("running") if isinstance(state, dict) else None
        running = running if isinstance(running, dict) else {}
        local = running.get("local_url")
        port = (running.get("launch") or {}).get("port") if isinstance(running.get("launch"), dict) else None
        if isinstance(local, str) and local.startswith(("http://", "https://")):
            url = local.rstrip("/") + "/health"
        elif isinstance(port, int) and not isinstance(port, bool):
            url = "http://127.0.0.1:%d/health" % port
        else:
            url = None
    out["health_url"] = url
    return out


def backoff_delay(failures, settings=None):
    """Seconds to wait before the next start after ``failures`` consecutive failed starts (0 for the first)."""
    s = settings or RECORD_DEFAULTS
    if failures <= 0:
        return 0.0
    return float(min(s["backoff_initial"] * (2 ** (failures - 1)), s["backoff_max"]))


def new_status():
    """key: the consent served; failures: consecutive failed starts; pending: a start by the supervisor that has not
    answered /health 200 yet; gave_up: why it gave up (None while it serves)."""
    return {"key": None, "failures": 0, "last_start": None, "running_since": None, "starts": 0, "pending": False,
            "gave_up": None, "liveness": None, "memory_wait_since": None}


def gave_up_of(state, key):
    """The give-up the state file records for this consent (its key), or None (none, another consent's)."""
    entry = state.get(GAVE_UP_KEY) if isinstance(state, dict) else None
    if isinstance(entry, dict) and entry.get("key") == key:
        return entry
    return None


def gave_up_reason(entry):
    if entry.get("kind") in GIVE_UP_KINDS:
        return "gave up at %s: %s: not started again until Ansible starts it (run the deploy playbook)" % (
            entry.get("at"), entry.get("reason"))
    return ("gave up at %s after %s consecutive failed starts (%s): not started again until Ansible starts it "
            "(run the deploy playbook)" % (entry.get("at"), entry.get("failed_starts"), entry.get("last_failure")))


# Give-ups beside the cap of failed starts (whose entry has no kind): each entry carries its reason.
GIVE_UP_KINDS = ("liveness", "memory", "boot_loop")


def give_up_entry(kind, key, now, reason, **extra):
    """A give-up for the state file (GAVE_UP_KEY) of another kind than the cap of failed starts."""
    return dict(extra, kind=kind, key=key, at=_iso(now), reason=reason)


def decide(problem, key, running, status, now, settings=None, healthy=False, recorded=None):
    """One look. Returns (decision, status).

    problem: record_problem(...) ('' = consent to serve the recorded spec); key: armed_key(record) or None;
    running: whether `server.sh status` says the server runs; status: from the previous look (new_status() first);
    settings: recovery_settings(record); healthy: whether /health answered 200 now (only asked while it runs);
    recorded: the give-up the state file records for this key (gave_up_of), or None.
    decision: {'action': 'idle'|'running'|'recycle'|'wait'|'start'|'give_up'|'gave_up', 'reason': str,
    'until': seconds since epoch or None}. 'start' means: wait for memory, check the peers (two nodes), then start;
    'give_up' means: write status['gave_up'] into the state file. Nothing here starts or stops anything.
    """
    s = settings or recovery_settings(None)
    st = dict(new_status(), **(status or {}))
    if problem:
        # No consent: forget the backoff; a server that runs goes on running (whoever started it).
        st.update(new_status())
        return {"action": "idle", "reason": problem, "until": None}, st
    if st.get("key") != key:
        st.update(new_status())
        st["key"] = key
    if recorded is None and st.get("gave_up") and running:
        # The state file no longer records the give-up and a server runs: Ansible started it again.
        st.update(new_status())
        st["key"] = key
    if recorded is not None or st.get("gave_up"):
        st["gave_up"] = recorded or st["gave_up"]
        st["pending"] = False
        return {"action": "gave_up", "reason": gave_up_reason(st["gave_up"]), "until": None}, st
    if running:
        if st.get("running_since") is None:
            st["running_since"] = now
        if healthy:
            # /health answered 200 since the start: the start succeeded, the count starts again.
            st.update(failures=0, pending=False, last_failure=None)
        elif st.get("pending") and st.get("last_start") is not None and \
                now - st["last_start"] >= s["health_timeout"]:
            st["pending"] = False
            st["last_failure"] = "no /health 200 within %d s of the start at %s (specdec_server_health_timeout): " \
                                 "recycled" % (s["health_timeout"], _iso(st["last_start"]))
            return {"action": "recycle", "reason": "the server started at %s has not answered /health 200 within "
                                                   "specdec_server_health_timeout (%d s): recycling it, a failed start"
                                                   % (_iso(st["last_start"]), s["health_timeout"]), "until": None}, st
        return {"action": "running", "reason": "the recorded server runs", "until": None}, st
    if st.get("pending"):
        st["last_failure"] = "exited before /health answered 200 (started at %s)" % _iso(st["last_start"])
    st.update(running_since=None, pending=False)
    if st["failures"] >= s["max_failed_starts"]:
        st["gave_up"] = {"key": key, "at": _iso(now), "failed_starts": st["failures"],
                         "max_failed_starts": s["max_failed_starts"],
                         "last_failure": st.get("last_failure") or "the server stopped"}
        return {"action": "give_up", "reason": gave_up_reason(st["gave_up"]), "until": None}, st
    wait = backoff_delay(st["failures"], s)
    until = (st["last_start"] or 0) + wait
    if st["failures"] and now < until:
        return {"action": "wait", "reason": "%d consecutive failed start(s) of %d allowed: next start at %s" % (
            st["failures"], s["max_failed_starts"], _iso(until)), "until": until}, st
    return {"action": "start", "reason": "the recorded server does not run", "until": None}, st


def started(status, now):
    """The status once a start was made: a failed start until /health answers 200 (decide resets the count then)."""
    st = dict(status)
    st["failures"] = st.get("failures", 0) + 1
    st["starts"] = st.get("starts", 0) + 1
    st["last_start"] = now
    st["running_since"] = None
    st["pending"] = True
    return st


def memory_wait(available, minimum):
    """'' when a start may go on, else why it waits. available: MemAvailable bytes (None: unknown, no wait)."""
    if available is None or not minimum or available >= minimum:
        return ""
    gib = 1024.0 ** 3
    return "waiting for %.1f GiB of available memory before the start (MemAvailable %.1f GiB; " \
           "specdec_server_min_available_memory)" % (minimum / gib, available / gib)


def meminfo_available(text):
    """MemAvailable of /proc/meminfo's text in bytes, or None."""
    for line in (text or "").splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            try:
                return int(parts[1]) * (1024 if len(parts) > 2 and parts[2].lower() == "kb" else 1)
            except (IndexError, ValueError):
                return None
    return None


def benchmark_running(marker, mtime, now):
    """Whether a benchmark marker (its JSON, its mtime) holds now: mtime + ttl_seconds (a positive number) > now."""
    if not isinstance(marker, dict) or mtime is None:
        return False
    ttl = marker.get("ttl_seconds")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0:
        return False
    return now < mtime + ttl


def completion_due(wd, now, interval, benchmark):
    """Whether the hang watchdog sends a completion probe now: /health fails since wd['failing_since'] on a server
    that answered 200, no benchmark runs, and the last probe is interval s old (or none was sent)."""
    if benchmark or not wd or not wd.get("healthy_seen") or wd.get("failing_since") is None:
        return False
    last = wd.get("completion_at")
    return last is None or now - last >= interval


def hang_settings(record):
    """(health_url, hang_timeout seconds) of the hang watchdog from the record; (None, 0) when it is off.

    Off for a record without the fields (an earlier role version), hang_timeout 0, or values of the wrong shape.
    """
    if not isinstance(record, dict):
        return None, 0
    url, timeout = record.get("health_url"), record.get("hang_timeout")
    if not isinstance(url, str) or not url.startswith(PROBE_SCHEMES):
        return None, 0
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        return None, 0
    return url, float(timeout)


def new_watch():
    return {"pid": None, "healthy_seen": False, "failing_since": None, "completion_at": None}


def watch(wd, pid, healthy, now, hang_timeout, completion=None):
    """The hang watchdog's look at a running server. Returns (decision, wd).

    wd: from the previous look (new_watch() first); pid: the server's pid now (a new pid starts a new watch);
    healthy: whether /health answered 200 now; hang_timeout: seconds (<= 0: off); completion: None when no completion
    probe was sent now (completion_due), else whether it answered 200.
    decision: {'action': 'running'|'recycle', 'reason': str, 'until': None}. Only a server that answered 200 since its
    start is ever recycled (a loading server is not), after failing probes lasting hang_timeout s on end; one 200
    (of /health or of a completion) ends the run of failures. Nothing here stops anything.
    """
    w = dict(new_watch(), **(wd or {}))
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
    if completion is not None:
        w["completion_at"] = now
        if completion:
            w["failing_since"] = None
            return {"action": "running", "reason": "the recorded server answers a completion although /health fails: "
                                                   "working, not hung", "until": None}, w
    if w.get("failing_since") is None:
        w["failing_since"] = now
    until = w["failing_since"] + hang_timeout
    since = _iso(w["failing_since"])
    if now >= until:
        reason = "the server process %s runs but /health has failed since %s (%d s, specdec_server_hang_timeout %d s): " \
                 "hung, recycling it" % (pid, since, now - w["failing_since"], hang_timeout)
        return {"action": "recycle", "reason": reason, "until": None}, w
    reason = "the recorded server runs; /health fails since %s: recycled at %s unless it answers 200 before" % (
        since, _iso(until))
    return {"action": "running", "reason": reason, "until": until}, w


def new_liveness():
    """The liveness probe's memory: of the server process now (pid, failures, probe_at, result) and of the restarts it
    made (restart_at, restarts: they outlive the pid they replaced, for the cooldown)."""
    return {"pid": None, "failures": 0, "probe_at": None, "result": None, "seconds": None, "restart_at": None,
            "restarts": 0, "unauthorized": False}


def liveness_due(lv, pid, now, cfg, healthy, running_since, benchmark):
    """Whether the liveness probe asks the model now: it is on (liveness_interval > 0), the server answers /health 200
    (a failing /health is the hang watchdog's), its grace after the start is over (loading), no benchmark runs (its
    tokens would count in the counters the benchmark reads), and the last probe of this process is an interval old."""
    if not cfg.get("liveness_interval") or not healthy or benchmark or running_since is None:
        return False
    if now - running_since < cfg["liveness_grace"]:
        return False
    last = lv.get("probe_at") if lv.get("pid") == pid else None
    return last is None or now - last >= cfg["liveness_interval"]


def liveness(lv, pid, verdict, now, cfg, key=None):
    """One liveness probe's outcome. Returns (decision, lv).

    verdict: 'ok', 'unauthorized' (HTTP 401/403: the probe cannot ask; never a reason to restart, reported) or
    'failed: WHY'. liveness_failures failed probes in a row restart the server ('recycle'), unless the last probe
    restart is less than liveness_cooldown s old: then it gives up ('give_up', decision['entry'] for the state file).
    """
    w = dict(new_liveness(), **(lv or {}))
    if w.get("pid") != pid:
        w.update(pid=pid, failures=0, probe_at=None, result=None, seconds=None, unauthorized=False)
    w["probe_at"] = now
    w["result"] = verdict
    if verdict == "ok":
        w.update(failures=0, unauthorized=False)
        return {"action": "running", "reason": "the recorded server answers a chat completion", "until": None}, w
    if verdict == "unauthorized":
        w["unauthorized"] = True
        return {"action": "running", "reason": "liveness probe refused (HTTP 401/403): the probe cannot ask the model, "
                                               "which no restart repairs; not restarting (check specdec_api_key and "
                                               "the key file the record names)", "until": None}, w
    w["unauthorized"] = False
    w["failures"] += 1
    if w["failures"] < cfg["liveness_failures"]:
        return {"action": "running", "reason": "liveness probe %d of %d failed (%s)" % (
            w["failures"], cfg["liveness_failures"], verdict), "until": None}, w
    since = now - w["restart_at"] if w.get("restart_at") is not None else None
    if since is not None and since < cfg["liveness_cooldown"]:
        reason = ("the server answers /health but no chat completion (%d probes: %s), again %d s after the liveness "
                  "probe restarted it (specdec_server_liveness_restart_cooldown %d s): wedged, left as it is" % (
                      w["failures"], verdict, since, cfg["liveness_cooldown"]))
        return {"action": "give_up", "reason": reason, "until": None,
                "entry": give_up_entry("liveness", key, now, reason, probe_failures=w["failures"])}, w
    reason = "the server answers /health but no chat completion (%d probes in a row: %s): wedged, restarting it" % (
        w["failures"], verdict)
    w.update(restart_at=now, restarts=w["restarts"] + 1, failures=0)
    return {"action": "recycle", "reason": reason, "until": None}, w


def memory_timed_out(since, now, timeout):
    """Whether the memory wait that began at since has lasted its bound (timeout s; 0: no bound)."""
    return bool(timeout) and since is not None and now - since >= timeout


def new_guard(key=None):
    """What outlives a reboot (GUARD_NAME): the boots of this consent whose start did not serve boot_loop_window s."""
    return {"schema_version": SCHEMA_VERSION, "key": key, "unstable_boots": []}


def boot_guard(guard, key, now, cfg):
    """At the first start of a boot (container start). Returns (problem, guard): '' and the guard with this boot
    counted, or why autostart disarms (boot_loop_starts boots in a row whose start never served boot_loop_window s:
    a node that reboots straight back into what kills it) and the guard unchanged."""
    g = dict(new_guard(key), **(guard if isinstance(guard, dict) else {}))
    if g.get("key") != key or not isinstance(g.get("unstable_boots"), list):
        g = new_guard(key)
    limit = cfg.get("boot_loop_starts") or 0
    if limit and len(g["unstable_boots"]) >= limit:
        return ("the last %d boots each started the server and it did not serve %d s (boots at %s): a boot loop "
                "(specdec_server_boot_loop_starts %d); autostart disarmed" % (
                    len(g["unstable_boots"]), cfg["boot_loop_window"], ", ".join(g["unstable_boots"]), limit)), g
    g = dict(g, unstable_boots=(g["unstable_boots"] + [_iso(now)]) if limit else [])
    return "", g


def guard_settled(guard, running_since, now, cfg):
    """The guard once the server ran boot_loop_window s on end: the count starts again; else unchanged (the same
    object). A server that never answers /health is the health timeout's (health_timeout: a failed start)."""
    if not isinstance(guard, dict) or not guard.get("unstable_boots") or running_since is None:
        return guard
    if now - running_since < cfg["boot_loop_window"]:
        return guard
    return dict(guard, unstable_boots=[])


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
    """Whether url answers HTTP 200 within timeout s (no proxy: the server is on this node). A ``tcp://HOST:PORT`` url
    (a vLLM headless worker's record: its head's torch.distributed rendezvous, --master-addr:--master-port) answers
    when a TCP connection to it opens."""
    if url.startswith("tcp://"):
        host, _sep, port = url[len("tcp://"):].rstrip("/").rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            return False
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as answer:
            return answer.status == 200
    except Exception:  # pylint: disable=broad-except  # any failure (refused, timeout, HTTP error) is a failing probe
        return False


def completion_ok(url, model, api_key, timeout):
    """Whether a one-token completion (POST <base of url>/v1/completions, max_tokens 1) answers 200 within timeout s;
    url is the /health URL, api_key '' for none (else Authorization: Bearer)."""
    base = url[:-len("/health")] if url.endswith("/health") else url.rstrip("/")
    body = json.dumps({"model": model or "default", "prompt": "ping", "max_tokens": 1}).encode("utf-8")
    request = urllib.request.Request(base + "/v1/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    if api_key:
        request.add_header("Authorization", "Bearer " + api_key)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as answer:
            return answer.status == 200
    except Exception:  # pylint: disable=broad-except  # any failure is a failing probe
        return False


def ask_model(url, model, api_key, timeout):
    """The liveness probe: one chat completion ("ping", max_tokens 8, temperature 0, as NVIDIA's watchdog asks) at the
    base of url (the /health URL). Returns (verdict, seconds): 'ok' for HTTP 200 with choices, 'unauthorized' for
    401/403 (the probe cannot ask: never a wedge), else 'failed: WHY'."""
    base = url[:-len("/health")] if url.endswith("/health") else url.rstrip("/")
    body = json.dumps({"model": model or "default", "messages": [{"role": "user", "content": "ping"}],
                       "max_tokens": LIVENESS_MAX_TOKENS, "temperature": 0}).encode("utf-8")
    request = urllib.request.Request(base + "/v1/chat/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    if api_key:
        request.add_header("Authorization", "Bearer " + api_key)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    begun = time.monotonic()
    try:
        with opener.open(request, timeout=timeout) as answer:
            data = json.loads(answer.read().decode("utf-8", "replace") or "null")
        seconds = round(time.monotonic() - begun, 3)
        if isinstance(data, dict) and isinstance(data.get("choices"), list) and data["choices"]:
            return "ok", seconds
        return "failed: HTTP 200 without choices", seconds
    except urllib.error.HTTPError as exc:
        seconds = round(time.monotonic() - begun, 3)
        if exc.code in (401, 403):
            return "unauthorized", seconds
        return "failed: HTTP %d" % exc.code, seconds
    except (socket.timeout, TimeoutError):
        return "failed: no answer within %d s" % timeout, round(time.monotonic() - begun, 3)
    except Exception as exc:  # pylint: disable=broad-except  # refused, reset, a bad body: a failed probe
        reason = getattr(exc, "reason", None)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return "failed: no answer within %d s" % timeout, round(time.monotonic() - begun, 3)
        return "failed: %s" % (reason or exc), round(time.monotonic() - begun, 3)


def write_durable(path, text):
    """Write text to path atomically and to disk (fsync of the file and its directory): it must outlive a hard reset
    of the node (the boot-loop count). '' when done, else why not."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        return "cannot write %s: %s" % (path, exc)
    return ""


# The supervisor's metrics in the node_exporter textfile collector's format (the Prometheus text exposition format,
# https://prometheus.io/docs/instrumenting/exposition_formats/): node_exporter --collector.textfile.directory reads
# <state_dir>/*.prom. Written here because the engine images carry no prometheus_client (stdlib only in the container).
METRICS = (
    ("specdec_supervisor_starts_total", "counter", "Starts of the server by the supervisor since its container started.",
     "starts"),
    ("specdec_supervisor_recycles_total", "counter", "Restarts (recycles) of the server by the supervisor since its "
     "container started: hang watchdog, health timeout and liveness probe.", "recycles"),
    ("specdec_supervisor_liveness_restarts_total", "counter", "Restarts of a wedged server by the liveness probe "
     "(answers /health but no chat completion) since the container started.", "liveness_restarts"),
    ("specdec_supervisor_liveness_probe_failures", "gauge", "Failed liveness probes in a row now.", "probe_failures"),
    ("specdec_supervisor_liveness_probe_unauthorized", "gauge", "1 when the last liveness probe was refused (HTTP 401 "
     "or 403): the probe cannot ask the model.", "unauthorized"),
    ("specdec_supervisor_liveness_probe_seconds", "gauge", "Seconds the last liveness probe took.", "probe_seconds"),
    ("specdec_supervisor_gave_up", "gauge", "1 when the supervisor gave up (it starts nothing until Ansible does).",
     "gave_up"),
    ("specdec_supervisor_boot_loop_unstable_boots", "gauge", "Boots in a row whose start has not served "
     "specdec_server_boot_loop_window seconds.", "unstable_boots"),
)


def metrics_text(deployment, values):
    """The textfile of the METRICS for one deployment (values: their keys as in METRICS; absent = 0)."""
    label = '{deployment="%s"}' % str(deployment or "").replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    out = []
    for name, kind, text, key in METRICS:
        value = values.get(key)
        value = 0 if value is None or value is False else (1 if value is True else value)
        out.append("# HELP %s %s\n# TYPE %s %s\n%s%s %s\n" % (name, text, name, kind, name, label, value))
    return "".join(out)


def read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def benchmark_now(state_dir, now):
    """Whether the benchmark marker of state_dir holds now (benchmark_running over the file and its mtime)."""
    path = os.path.join(state_dir, BENCHMARK_MARKER)
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return False
    return benchmark_running(read_json(path), mtime, now)


def drop_caches(path="/proc/sys/vm/drop_caches"):
    """Write 3 to drop_caches: '' when done, else why not (read-only /proc/sys in an unprivileged container)."""
    try:
        os.sync()
        with open(path, "w") as handle:
            handle.write("3\n")
        return ""
    except OSError as exc:
        return "cannot drop the page cache (%s: %s): going on to the memory wait" % (path, exc.strerror or exc)


def write_gave_up(state_file, entry):
    """Write the give-up into the state file (key GAVE_UP_KEY; atomic, same mode): '' when done, else why not."""
    state = read_json(state_file)
    if not isinstance(state, dict):
        return "state file %s unreadable" % state_file
    state[GAVE_UP_KEY] = entry
    tmp = state_file + ".supervisor.tmp"
    try:
        mode = os.stat(state_file).st_mode & 0o7777
        with open(tmp, "w") as handle:
            handle.write(json.dumps(state, indent=2, sort_keys=True, separators=(",", ": ")) + "\n")
        os.chmod(tmp, mode)
        os.replace(tmp, state_file)
    except OSError as exc:
        return "cannot write %s: %s" % (state_file, exc)
    return ""


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


def _script_call(run, script, verb, decision):
    env = dict(os.environ)
    env[LOCK_HELD_ENV] = "1"
    out = run(["bash", script, verb], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    return dict(decision, rc=out.returncode, output=(out.stdout or b"").decode("utf-8", "replace").strip()[-400:])


def _give_up(status, record, entry, reason):
    """Record a give-up of another kind (liveness, memory, boot_loop): in the status and the state file."""
    status["gave_up"] = entry
    decision = {"action": "give_up", "reason": reason, "until": None}
    error = write_gave_up(record["state_file"], entry)
    return (dict(decision, error=error) if error else decision), status


def _liveness_look(state_dir, status, now, cfg, pid, healthy, ask, key):
    """The liveness probe's part of a look at a running server that answers /health: None when no probe was due,
    else the liveness decision (running, recycle or give_up, with 'entry')."""
    lv = status.get("liveness") or new_liveness()
    if not liveness_due(lv, pid, now, cfg, healthy, status.get("running_since"), benchmark_now(state_dir, now)):
        return None
    key_text = read_text(cfg["api_key_file"]) if cfg["api_key_file"] else ""
    verdict, seconds = ask(cfg["health_url"], cfg["model"], (key_text or "").strip(), cfg["liveness_timeout"])
    decision, lv = liveness(lv, pid, verdict, now, cfg, key)
    lv["seconds"] = seconds
    status["liveness"] = lv
    return decision


def look(state_dir, status, now, policy, run=subprocess.run, probe=health_ok, complete=completion_ok,
         meminfo="/proc/meminfo", drop=drop_caches, ask=ask_model):
    """One look at the node, under the lock; may start, recycle or give up. Returns (decision, status)."""
    problem, record, state = consent_problem(state_dir)
    script = os.path.join(state_dir, SCRIPT_NAME)
    key = armed_key(record) if isinstance(record, dict) else None
    cfg = recovery_settings(record, state)
    running = False
    if not problem:
        running = run(["bash", script, "status"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                      check=False).returncode == 0
    url, hang_timeout = hang_settings(record)
    pending = (status or {}).get("pending") and (status or {}).get("key") == key
    # The liveness probe asks a server that serves HTTP (not a headless worker's tcp:// rendezvous) for its model.
    asks = bool(cfg["liveness_interval"] and cfg["model"] and cfg["health_url"] and
                cfg["health_url"].startswith(("http://", "https://")))
    healthy = False
    if running and cfg["health_url"] and (hang_timeout or pending or asks):
        healthy = probe(cfg["health_url"], policy["health_timeout"])
    decision, status = decide(problem, key, running, status, now, cfg, healthy,
                              gave_up_of(state, key) if not problem else None)
    if decision["action"] == "recycle":
        # A supervisor start that never answered /health 200 within health_timeout: a failed start.
        status["recycles"] = status.get("recycles", 0) + 1
        status["watch"] = new_watch()
        return _script_call(run, script, "recycle", decision), status
    if decision["action"] == "running":
        pid = server_pid(state_dir)
        wd = status.get("watch") or new_watch()
        completion = None
        # A headless worker's probe is its head's rendezvous (tcp://): it serves no completion.
        if hang_timeout and not healthy and wd.get("pid") == pid and not url.startswith("tcp://") and \
                completion_due(wd, now, cfg["completion_probe_interval"], benchmark_now(state_dir, now)):
            key_text = read_text(cfg["api_key_file"]) if cfg["api_key_file"] else ""
            completion = complete(url, cfg["model"], (key_text or "").strip(), 2 * policy["health_timeout"])
        decision, status["watch"] = watch(wd, pid, healthy, now, hang_timeout, completion)
        if decision["action"] == "recycle":
            status["recycles"] = status.get("recycles", 0) + 1
            status["watch"] = new_watch()
            return _script_call(run, script, "recycle", decision), status
        # The boot-loop count starts again once the server served boot_loop_window s.
        guard_path = os.path.join(state_dir, GUARD_NAME)
        guard = read_json(guard_path)
        settled = guard_settled(guard, status.get("running_since"), now, cfg)
        if settled is not guard:
            write_durable(guard_path, json.dumps(settled, indent=2, sort_keys=True) + "\n")
        if asks:
            asked = _liveness_look(state_dir, status, now, cfg, pid, healthy, ask, key)
            if asked is not None and asked["action"] == "recycle":
                status["recycles"] = status.get("recycles", 0) + 1
                status["liveness_restarts"] = status.get("liveness_restarts", 0) + 1
                status["watch"] = new_watch()
                return _script_call(run, script, "recycle", asked), status
            if asked is not None and asked["action"] == "give_up":
                return _give_up(status, record, asked.pop("entry"), asked["reason"])
            if asked is not None and (status["liveness"]["failures"] or status["liveness"]["unauthorized"]):
                decision = asked
        return decision, status
    status["watch"] = new_watch()
    if decision["action"] == "give_up":
        error = write_gave_up(record["state_file"], status["gave_up"])
        return (dict(decision, error=error) if error else decision), status
    if decision["action"] != "start":
        status["memory_wait_since"] = None
        return decision, status
    if cfg["drop_caches"] and status.get("dropped_for") != status.get("starts"):
        status["dropped_for"] = status.get("starts")
        why = drop()
        if why and not status.get("drop_caches_note"):
            status["drop_caches_note"] = why
            log({"action": "drop_caches", "reason": why})
    available = meminfo_available(read_text(meminfo))
    waiting = memory_wait(available, cfg["min_available_memory"])
    if waiting:
        # The start guard: the memory a dead engine held must come back first, within memory_wait_timeout s.
        since = status.get("memory_wait_since") or now
        status["memory_wait_since"] = since
        if memory_timed_out(since, now, cfg["memory_wait_timeout"]):
            reason = ("MemAvailable stayed below %d bytes (specdec_server_min_available_memory) for %d s "
                      "(specdec_server_memory_wait_timeout), last %s bytes: memory is still held (a dead engine, "
                      "another process); nothing started" % (cfg["min_available_memory"], now - since, available))
            status["memory_wait_since"] = None
            return _give_up(status, record, give_up_entry("memory", key, now, reason), reason)
        return {"action": "wait", "reason": waiting, "until": None}, status
    status["memory_wait_since"] = None
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
    if not status.get("boot_counted"):
        # The boot-loop guard: the first start of each boot is counted on disk before it is made.
        guard_path = os.path.join(state_dir, GUARD_NAME)
        looping, guard = boot_guard(read_json(guard_path), key, now, cfg)
        if looping:
            return _give_up(status, record, give_up_entry("boot_loop", key, now, looping,
                                                          unstable_boots=guard["unstable_boots"]), looping)
        error = write_durable(guard_path, json.dumps(guard, indent=2, sort_keys=True) + "\n")
        if error:
            log({"action": "boot_guard", "reason": error})
        status["boot_counted"] = True
    decision = _script_call(run, script, "start", decision)
    return decision, started(status, now)


# What a container start keeps of the status file: the count of failed starts and the give-up of the same consent.
CARRIED = ("key", "failures", "last_start", "last_failure", "gave_up", "liveness", "memory_wait_since")


def boot_status(saved, resume):
    """The status a supervisor starts with: a re-exec (resume) carries everything on, a container start CARRIED."""
    if not isinstance(saved, dict):
        return new_status()
    if resume:
        status = dict(new_status(), **saved)
    else:
        status = dict(new_status(), **{k: saved[k] for k in CARRIED if k in saved})
    for key in ("decision", "booted_at", "pid"):
        status.pop(key, None)
    return status


def liveness_summary(status):
    """What status.yml shows of the liveness probe (kept in GUARD_NAME on the node): the last verdict, its time."""
    lv = status.get("liveness") or {}
    if lv.get("probe_at") is None:
        return None
    return {"at": _iso(lv["probe_at"]), "result": lv.get("result"), "seconds": lv.get("seconds"),
            "failures": lv.get("failures", 0), "unauthorized": bool(lv.get("unauthorized")),
            "restarts": lv.get("restarts", 0), "last_restart": _iso(lv["restart_at"]) if lv.get("restart_at") else None}


def publish(state_dir, status, key, deployment, shown):
    """Write what changed since the last look (shown: what was written then): the liveness summary into GUARD_NAME
    and the METRICS textfile. Returns what is shown now."""
    summary = liveness_summary(status)
    guard_path = os.path.join(state_dir, GUARD_NAME)
    guard = read_json(guard_path)
    if summary is not None and (not isinstance(guard, dict) or guard.get("liveness") != summary):
        guard = dict(new_guard(key), **(guard if isinstance(guard, dict) and guard.get("key") == key else {}))
        guard["liveness"] = summary
        write_durable(guard_path, json.dumps(guard, indent=2, sort_keys=True) + "\n")
    lv = status.get("liveness") or {}
    values = {"starts": status.get("starts", 0), "recycles": status.get("recycles", 0),
              "liveness_restarts": status.get("liveness_restarts", 0), "probe_failures": lv.get("failures", 0),
              "unauthorized": bool(lv.get("unauthorized")), "probe_seconds": lv.get("seconds"),
              "gave_up": bool(status.get("gave_up")),
              "unstable_boots": len((guard or {}).get("unstable_boots") or []) if isinstance(guard, dict) else 0}
    text = metrics_text(deployment, values)
    if text != shown:
        write_durable(os.path.join(state_dir, METRICS_NAME), text)
    return text


def run_loop(state_dir, policy, resume=False):
    me = os.path.abspath(__file__)
    my_sha1 = file_sha1(me)
    try:
        os.makedirs(RUN_DIR)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise
    # A container start keeps the count of failed starts (a crash that takes the container down stays bounded);
    # a re-exec (a newer supervisor) carries everything on.
    status = boot_status(read_json(os.path.join(RUN_DIR, STATUS_NAME)), resume)
    last = shown = None
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
            record = read_json(os.path.join(state_dir, RECORD_NAME))
            if isinstance(record, dict):
                shown = publish(state_dir, status, armed_key(record), record.get("deployment"), shown)
        except Exception as exc:  # pylint: disable=broad-except  # one bad look must not end the supervision
            decision = {"action": "error", "reason": "%s: %s" % (type(exc).__name__, exc), "until": None}
        shown = (decision["action"], decision["reason"])
        if decision["action"] in ("start", "recycle", "give_up") or shown != last:
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
