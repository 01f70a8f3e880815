# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: used by playbooks/status.yml (the specdec_status_info
# module on each node and the specdec_status_report action on the controller). Not a public API.
"""Fleet status as pure functions (no Ansible, no I/O).

Node side (``sparkops.specdec.specdec_status_info``): what a node's raw reads mean -- the container's
``docker inspect``, the server process found from ``server.pid`` through ``/proc`` (the same "alive and not a
zombie" test as ``server.sh status``), the deployment state files, the URL the node probes and the engine's
speculative-decoding counters (read by ``_bench.spec_counters``, the benchmark's own adapters).

Controller side (``sparkops.specdec.specdec_status_report``): one row per deployment, built from every reachable
node's state files (the newest record of a deployment names its members and head), with per-node reachability,
the verdict (``serving``, ``degraded``, ``down``; ``torn_down`` for a record teardown.yml marked; ``retired`` for a
deployment id the inventory no longer gives its members that does not answer either; nodes in no live deployment
``not_deployed`` or ``unreachable``), whether the inventory still assigns the id (``in_inventory``), the problems
and the fields that could not be read (each with its reason), the text table, the JSON document and the
``set_stats`` summary.

Acceptance is accepted draft tokens / drafted tokens from the server's cumulative counters, i.e. since the
server process started (not over a window): llama.cpp ``llamacpp:spec_decode_num_*_tokens_total`` at ``/metrics``,
TensorRT-LLM ``trtllm_spec_decode_num_*_tokens_total`` at ``/prometheus/metrics``.
"""

from __future__ import annotations

import datetime
import json

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench, _container_change

SCHEMA_VERSION = 1
STATUSES = ("serving", "degraded", "down", "torn_down", "retired", "not_deployed", "unreachable", "unknown")
# Rows of deployments that are over: not serving, but neither in not_serving nor against all_serving.
ENDED = ("torn_down", "retired")
METRICS_PATHS = {"llamacpp": "/metrics", "trtllm": "/prometheus/metrics", "vllm": "/metrics"}
# Addresses a server bound to is reached from its own node on the loopback.
_LOCAL_BINDS = ("", "localhost", "127.0.0.1", "::1", "0.0.0.0", "::", "*")
METRICS_FIX = {
    "llamacpp": "llama-server serves /metrics only with --metrics (the plan sets it: redeploy with single_spark.yml)",
    "vllm": "vllm serve always serves /metrics; the vllm:spec_decode_* counters need --speculative-config (a method "
            "other than none)",
    "trtllm": "trtllm-serve serves /prometheus/metrics only with return_perf_metrics: true: set "
              "specdec_server_return_perf_metrics: true and redeploy with specdec_server_allow_restart: true",
}


# ---------------------------------------------------------------------------- node side
def parse_time(text):
    """An ISO 8601 / RFC 3339 time (Docker's nanoseconds and a trailing Z accepted) -> aware datetime, or None."""
    if not text or not isinstance(text, str) or text.startswith("0001-01-01"):
        return None
    value = text.strip().replace("Z", "+00:00")
    if "." in value:
        head, rest = value.split(".", 1)
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits):]
        value = "%s.%s%s" % (head, digits[:6].ljust(6, "0"), zone)
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def container_facts(rc, stdout, stderr, name):
    """``docker container inspect NAME`` -> exists, running, status, image (name), image_id, started_at, error."""
    out = {"name": name, "exists": False, "running": False, "status": "absent", "image": None, "image_id": None,
           "started_at": None, "restart_count": None, "error": None}
    if rc != 0:
        text = (stderr or stdout or "").strip()
        if "no such" in text.lower():
            return out
        out.update(status="unknown", error=(text.splitlines() or ["docker container inspect failed (rc %s)" % rc])[-1])
        return out
    try:
        data = json.loads(stdout or "[]")
    except ValueError:
        out.update(status="unknown", error="docker container inspect printed no JSON")
        return out
    first = data[0] if isinstance(data, list) and data else (data if isinstance(data, dict) else {})
    state = first.get("State") or {}
    out.update(exists=bool(first), running=bool(state.get("Running")), status=state.get("Status") or "unknown",
               image=(first.get("Config") or {}).get("Image"), image_id=first.get("Image"),
               started_at=state.get("StartedAt") if parse_time(state.get("StartedAt")) else None,
               restart_count=first.get("RestartCount"))
    return out


def kept_facts(rc, stdout, stderr, name):
    """container_facts() of the container a change kept, with its ``id`` (None when absent or unreadable)."""
    out = container_facts(rc, stdout, stderr, name)
    out["id"] = None
    if out["exists"]:
        data = json.loads(stdout or "[]")
        first = data[0] if isinstance(data, list) and data else (data if isinstance(data, dict) else {})
        out["id"] = first.get("Id")
    return out


def pending_change(record_text, kept, path):
    """A pending container change on the node (module_utils/_container_change.py), or None when there is none.

    record_text: the content of the record ``<state_dir>/container-previous.json`` (None when the file is absent);
    kept: kept_facts() of ``<container>-previous``; path: the record's path. Returns kept_name,
    kept_image and kept_image_id (the image the previous container runs), requested_image (the change's image),
    differences, kept_at, kept_container (``present``: the recorded container is there; ``absent``; ``other``: a
    container of that name with another id; ``unknown``: Docker could not be read), record and error (an unreadable
    record)."""
    if record_text is None:
        return None
    record = _container_change.parse_record(record_text)
    out = {"record": path, "error": None, "kept_name": None, "kept_image": None, "kept_image_id": None,
           "requested_image": None, "differences": [], "kept_at": None, "kept_container": None}
    if not record:
        out["error"] = "not a container change record of schema %d" % _container_change.SCHEMA_VERSION
        return out
    settings = record["container"].get("settings") or {}
    kept = kept or {}
    state = ("unknown" if kept.get("error") else "absent" if not kept.get("exists") else
             "present" if kept.get("id") == record["container"]["id"] else "other")
    out.update(kept_name=record["kept_name"], kept_image=settings.get("image"), kept_image_id=settings.get("image_id"),
               requested_image=record["change"].get("image"), differences=list(record["change"].get("differences") or []),
               kept_at=record.get("kept_at"), kept_container=state)
    return out


def pending_problem(host, change):
    """The problem line of a pending container change (None when there is none), with the ways out the deployment
    offers (module_utils/_container_change.py): while the kept container is there, a run with the change's settings
    finishes it and a run with the kept container's settings (its image) and trtllm_container_allow_recreate backs it
    out; once it is gone or another container holds its name, the deployment stops before any change until the record
    is removed."""
    if not change:
        return None
    if change.get("error"):
        return "%s: the container change record %s cannot be read (%s): remove it, or run teardown.yml" % (
            host, change.get("record"), change["error"])
    kept_as = change["kept_name"]
    name = kept_as[:-len(_container_change.KEPT_SUFFIX)] if kept_as.endswith(_container_change.KEPT_SUFFIX) else "?"
    where = {"present": "kept, stopped, as %s" % kept_as,
             "absent": "recorded, but %s is gone (it cannot be restored)" % kept_as,
             "other": "recorded, but %s is another container (it cannot be restored)" % kept_as,
             "unknown": "kept as %s (Docker could not be read)" % kept_as}[change["kept_container"]]
    line = ("%s: a container change to %s is pending since %s: the previous container (image %s) is %s; "
            % (host, change.get("requested_image") or "?", change.get("kept_at") or "?", change.get("kept_image") or "?",
               where))
    if change["kept_container"] in ("absent", "other"):
        return line + ("the next deployment stops before any change (the record does not match the containers): look "
                       "at them (docker ps -a) and, once %s is the container to keep, remove %s and re-run"
                       % (name, change.get("record")))
    return line + ("re-run the deployment with the change's settings to finish it (%s goes once the new server serves, "
                   "or comes back if it fails), or with the previous image (%s) and settings and -e "
                   "trtllm_container_allow_recreate=true to back it out (the new container goes and %s gets its name "
                   "back)" % (kept_as, change.get("kept_image") or "?", kept_as))


def parse_nspid(status_text):
    """The innermost PID namespace's pid of a process, from /proc/PID/status (``NSpid:`` line), else None."""
    for line in (status_text or "").splitlines():
        if line.startswith("NSpid:"):
            parts = line.split()[1:]
            return int(parts[-1]) if parts and parts[-1].isdigit() else None
    return None


def parse_proc_stat(stat_text):
    """(state letter, start time in clock ticks after boot) from /proc/PID/stat, or (None, None)."""
    text = (stat_text or "").strip()
    close = text.rfind(")")
    if close < 0:
        return None, None
    fields = text[close + 1:].split()
    # After the command: state is field 3, starttime field 22 of proc(5); fields[0] is field 3.
    if len(fields) < 20 or not fields[19].isdigit():
        return (fields[0] if fields else None), None
    return fields[0], int(fields[19])


def server_process(pidfile_text, procs, uptime_text, clock_ticks):
    """The server process of the container from its pidfile and the container's processes.

    ``pidfile_text``: ``<state_dir>/server.pid`` (a pid in the container's namespace, written by server.sh);
    ``procs``: [{host_pid, status (text of /proc/PID/status), stat (/proc/PID/stat), cmdline (list)}] of the
    container's processes (``docker top``); ``uptime_text``: /proc/uptime. Running means the pid is alive and
    not a zombie (server.sh's own test). Returns running, pid, host_pid, command, elapsed_seconds, reason.
    """
    out = {"running": False, "pid": None, "host_pid": None, "command": None, "elapsed_seconds": None, "reason": None}
    text = (pidfile_text or "").strip()
    if not text:
        out["reason"] = "no server.pid (the server was never started, or server.sh stopped it)"
        return out
    if not text.isdigit():
        out["reason"] = "server.pid holds %r, not a pid" % text[:20]
        return out
    out["pid"] = int(text)
    for proc in procs or []:
        if parse_nspid(proc.get("status")) != out["pid"]:
            continue
        state, start = parse_proc_stat(proc.get("stat"))
        if state in ("Z", "X"):
            out["reason"] = "the server process %d is a zombie (it exited)" % out["pid"]
            return out
        argv = proc.get("cmdline") or []
        out.update(running=True, host_pid=proc.get("host_pid"),
                   command=argv[0].rsplit("/", 1)[-1] if argv else None)
        try:
            uptime = float((uptime_text or "").split()[0])
            if start is not None and clock_ticks:
                out["elapsed_seconds"] = max(0, int(uptime - start / float(clock_ticks)))
        except (ValueError, IndexError):
            pass
        return out
    out["reason"] = "no process %d in the container (the server exited)" % out["pid"]
    return out


def _trim_launch(running):
    """A state file's ``running`` (or ``previous``) without argv, environment and config text; None when empty."""
    if not isinstance(running, dict) or not running:
        return None
    launch = running.get("launch") or {}
    return {
        "fingerprint": running.get("fingerprint"),
        "target_model": running.get("target_model"),
        "method": running.get("method"),
        "max_draft_len": running.get("max_draft_len"),
        "started_at": running.get("started_at"),
        "endpoint": running.get("endpoint"),
        "image_id": launch.get("image_id"),
        "port": launch.get("port"),
        "members": launch.get("members"),
    }


def torn_down(state):
    """The (trimmed) state records a deployment teardown.yml ended: no running server, and ``torn_down_at``."""
    return isinstance(state, dict) and not state.get("running") and bool(state.get("torn_down_at"))


def trim_state(state):
    """The parts of a state file the status reports (no argv, environment or config text)."""
    if not isinstance(state, dict):
        return None
    desired = state.get("desired") or {}
    tuned = state.get("tuned") or None
    return {
        "schema_version": state.get("schema_version"),
        "deployment": state.get("deployment"),
        "engine": state.get("engine"),
        "updated_at": state.get("updated_at"),
        "torn_down_at": state.get("torn_down_at"),
        "desired": {k: desired.get(k) for k in ("topology", "members", "head", "image", "preset", "method",
                                                "target_model", "draft_model", "max_draft_len", "tp_size", "host",
                                                "port")},
        "running": _trim_launch(state.get("running")),
        "previous": _trim_launch(state.get("previous")),
        "tuned": {k: tuned.get(k) for k in ("method", "max_draft_len")} if isinstance(tuned, dict) else None,
        "supervisor_gave_up": gave_up_of(state),
    }


def gave_up_of(state):
    """The supervisor's give-up the state file records (key supervisor_gave_up, written by specdec_supervisor.py when
    it stopped restarting the server after its cap of failed starts): {at, failed_starts, max_failed_starts,
    last_failure}, or None."""
    entry = state.get("supervisor_gave_up") if isinstance(state, dict) else None
    if not isinstance(entry, dict):
        return None
    keys = ("at", "failed_starts", "max_failed_starts", "last_failure")
    if entry.get("kind"):
        # A give-up of the liveness probe, the memory wait or the boot-loop guard: its kind and reason.
        keys = ("at", "kind", "reason")
    return {k: entry.get(k) for k in keys}


# What the supervisor keeps on disk in the state directory (specdec_supervisor.py GUARD_NAME): its boot-loop count and
# the last liveness probe's verdict.
GUARD_FILE = "supervisor-state.json"


def supervisor_facts(text):
    """The supervisor's own file, trimmed: {liveness: {at, result, seconds, failures, unauthorized, restarts,
    last_restart} or None, unstable_boots: int}; None when there is none or it is unreadable."""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    lv = data.get("liveness")
    keys = ("at", "result", "seconds", "failures", "unauthorized", "restarts", "last_restart")
    return {"key": data.get("key"), "liveness": {k: lv.get(k) for k in keys} if isinstance(lv, dict) else None,
            "unstable_boots": len(data.get("unstable_boots") or []) if isinstance(data.get("unstable_boots"), list)
            else 0}


def liveness_problem(head, liveness):
    """One line for a liveness probe the server refuses (401/403) or that fails now; '' when it answers."""
    if not liveness:
        return ""
    if liveness.get("unauthorized"):
        return ("%s: the supervisor's liveness probe was refused (HTTP 401/403) at %s: it cannot ask the model, so it "
                "would not see a wedged engine (it never restarts for this); check specdec_api_key and the key file "
                "in the state directory" % (head, liveness.get("at")))
    if liveness.get("failures"):
        return "%s: the supervisor's liveness probe failed %s time(s) in a row (last at %s: %s)" % (
            head, liveness.get("failures"), liveness.get("at"), liveness.get("result"))
    return ""


def gave_up_problem(head, entry):
    """One line: the supervisor of head gave up, why, and what starts the server again."""
    if entry.get("kind"):
        return ("%s: the supervisor gave up at %s (%s): %s; it starts nothing until Ansible does; see docker logs of the "
                "engine container and the server log, then run the deploy playbook" % (
                    head, entry.get("at"), entry.get("kind"), entry.get("reason")))
    values = (head, entry.get("at"), entry.get("failed_starts"), entry.get("max_failed_starts"),
              entry.get("last_failure"))
    return ("%s: the supervisor gave up at %s after %s consecutive failed starts (specdec_server_max_failed_starts %s; "
            "last: %s): it starts nothing until Ansible does; see docker logs of the engine container and the server "
            "log, then run the deploy playbook" % values)


def members_of(state):
    """Members of the deployment a (trimmed) state records, head first: the running launch's, else the desired."""
    running = (state or {}).get("running") or {}
    return list(running.get("members") or ((state or {}).get("desired") or {}).get("members") or [])


def head_of(state):
    desired = (state or {}).get("desired") or {}
    members = members_of(state)
    return desired.get("head") or (members[0] if members else None)


def probe_base(state):
    """http://ADDRESS:PORT the head probes for its own server: the loopback unless the server binds one address."""
    desired = (state or {}).get("desired") or {}
    running = (state or {}).get("running") or {}
    port = running.get("port") or desired.get("port")
    if not port:
        return None
    host = str(desired.get("host") or "").strip()
    if host in _LOCAL_BINDS:
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "http://%s:%s" % (host, port)


def model_ids(body):
    """The ids of an OpenAI ``/v1/models`` answer (JSON text), or None when it is not one."""
    try:
        data = json.loads(body) if isinstance(body, (str, bytes)) else body
    except ValueError:
        return None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    return [str(item.get("id")) for item in items if isinstance(item, dict) and item.get("id") is not None]


def metrics_counters(engine, text):
    """The engine's cumulative speculative-decoding counters in a metrics text (``_bench.spec_counters`` from zero).

    Returns standin (the lab's TensorRT-LLM stand-in, which reports no figures), present (the draft counter is
    there), draft_tokens, accepted_tokens, drafts, acceptance_length_gauge, error.
    """
    out = {"standin": False, "present": False, "draft_tokens": None, "accepted_tokens": None, "drafts": None,
           "acceptance_length_gauge": None, "error": None}
    try:
        parsed = _bench.parse_prometheus(text or "")
        if _bench.detect_engine(parsed) == "standin":
            out["standin"] = True
            return out
        if engine not in _bench.ENGINES:
            out["error"] = "engine %r has no known speculative-decoding counters" % (engine,)
            return out
        counters = _bench.spec_counters(engine, "", parsed)
    except _bench.BenchError as exc:
        out["error"] = str(exc)
        return out
    for key in ("present", "draft_tokens", "accepted_tokens", "drafts", "acceptance_length_gauge"):
        out[key] = counters.get(key)
    return out


# ---------------------------------------------------------------------------- controller side
def _num(value):
    return None if value is None else (int(value) if float(value).is_integer() else value)


def acceptance(method, probe):
    """Live acceptance of a serving deployment from the head's metrics read (``probe['metrics']``)."""
    out = {"available": False, "rate": None, "draft_tokens": None, "accepted_tokens": None, "drafts": None,
           "mean_accepted_length": None, "since": "server start (cumulative counters)", "source": None, "reason": None}
    if method in (None, "none"):
        out["reason"] = "no speculation (method %s)" % (method or "unknown")
        return out
    metrics = (probe or {}).get("metrics") or {}
    out["source"] = metrics.get("path")
    counters = metrics.get("counters") or {}
    if not probe:
        out["reason"] = "the head was not probed"
    elif metrics.get("error") and not counters:
        out["reason"] = "%s: %s" % (metrics.get("path") or "metrics", metrics["error"])
    elif counters.get("standin"):
        out["reason"] = "the lab's TensorRT-LLM stand-in reports no figures"
    elif counters.get("error"):
        out["reason"] = counters["error"]
    elif not counters.get("present"):
        out["reason"] = "no speculative-decoding counter at %s; %s" % (
            metrics.get("path"), METRICS_FIX.get(probe.get("engine"), "the engine exposes none"))
    else:
        draft, accepted, drafts = counters.get("draft_tokens"), counters.get("accepted_tokens"), counters.get("drafts")
        out.update(draft_tokens=_num(draft), accepted_tokens=_num(accepted), drafts=_num(drafts))
        if not draft:
            out["reason"] = "no token drafted since the server started (no request yet)"
        elif accepted is None:
            out["reason"] = "no accepted-token counter next to the draft counter"
        else:
            out.update(available=True, rate=round(float(accepted) / float(draft), 4))
            if drafts:
                out["mean_accepted_length"] = round(1.0 + float(accepted) / float(drafts), 4)
    return out


def docker_problem(host, error):
    """One line for a node whose Docker could not be read, with the fix when it is the docker group."""
    line = "%s: Docker could not be read: %s" % (host, str(error)[:160])
    if "permission denied" in str(error).lower():
        line += " (the deploy user is not in the docker group there: run the docker_group role, e.g. with " \
                "single_spark.yml or two_sparks.yml, or read as root with -e status_become=true)"
    return line


def _node_view(host, fact, active):
    """One node as the report sees it: reachable, error, container, server process, records, probes, now."""
    fact = fact if isinstance(fact, dict) else {}
    view = {"node": host, "reachable": False, "error": None, "container": None, "server_process": None,
            "records": [], "probes": [], "now": None, "pending_change": None, "supervisor": None}
    if fact.get("unreachable"):
        text = str(fact.get("msg") or "no connection").strip().splitlines()[0]
        view["error"] = "unreachable: %s" % (text[len("Task failed: "):] if text.startswith("Task failed: ") else text)[:200]
        return view
    if not active and not fact:
        view["error"] = "left the play before the status was read (failed or unreachable earlier)"
        return view
    if fact.get("skipped"):
        view["error"] = "skipped: %s" % (fact.get("skip_reason") or "the status task did not run")
        return view
    status = fact.get("status")
    if not isinstance(status, dict):
        view["error"] = "no status read: %s" % str(fact.get("msg") or "the status module returned nothing").splitlines()[0][:200]
        # A node whose module failed still answered: it is reachable.
        view["reachable"] = bool(fact) and active
        return view
    view.update(reachable=True, container=status.get("container"), server_process=status.get("server_process"),
                records=[r for r in status.get("records") or [] if isinstance(r, dict)],
                probes=[p for p in status.get("probes") or [] if isinstance(p, dict)], now=status.get("now"),
                error=status.get("docker_error"),
                pending_change=status.get("pending_change") if isinstance(status.get("pending_change"), dict) else None,
                supervisor=status.get("supervisor") if isinstance(status.get("supervisor"), dict) else None)
    return view


def _newest(records):
    """The record with the latest updated_at (ties: the first)."""
    best, best_time = None, None
    for rec in records:
        when = parse_time((rec.get("state") or {}).get("updated_at")) or datetime.datetime.min.replace(
            tzinfo=datetime.timezone.utc)
        if best is None or when > best_time:
            best, best_time = rec, when
    return best


def _seconds_between(start, now):
    a, b = parse_time(start), parse_time(now)
    if a is None or b is None:
        return None
    return max(0, int((b - a).total_seconds()))


def _container_row(view):
    c = view.get("container") or {}
    return {"exists": c.get("exists"), "running": c.get("running"), "status": c.get("status"), "image": c.get("image"),
            "image_id": c.get("image_id"), "started_at": c.get("started_at"),
            "uptime_seconds": _seconds_between(c.get("started_at"), view.get("now")) if c.get("running") else None,
            "error": c.get("error")}


def retired_problem(dep_id, holders, path):
    """The problem line of a deployment id the inventory no longer assigns to its members (``retired``).

    holders: the hosts that hold a state file of it; path: the state file's path there."""
    hosts = ", ".join(holders)
    return ("%s: the inventory no longer assigns deployment %s and it does not serve: remove its state file %s on %s, "
            "or run playbooks/teardown.yml -e confirm=yes -e teardown_remove_state=true --limit %s (which also tears "
            "down what those hosts run now and removes all their state files, tuned picks included), or deploy it "
            "again under that id" % (dep_id, dep_id, path or "deployments/%s.json" % dep_id, hosts, ",".join(holders)))


def not_in_inventory_problem(dep_id, members):
    """The problem line of a deployment that still serves although the inventory no longer assigns its id."""
    return ("%s: deployment %s serves but is not in the inventory (no member is assigned that id any more): add it "
            "back, or stop it with playbooks/teardown.yml -e confirm=yes --limit %s"
            % (", ".join(members), dep_id, ",".join(members)))


def _in_inventory(dep_id, members, assigned):
    """The inventory still assigns ``dep_id`` to one of ``members`` (None: the inventory is not known)."""
    if assigned is None:
        return None
    return any(dep_id in (assigned.get(host) or ()) for host in members)


def _deployment_row(dep_id, newest, holders, views, assigned=None):
    state = newest["state"]
    running = state.get("running") or {}
    desired = state.get("desired") or {}
    members = members_of(state)
    head = head_of(state)
    engine = state.get("engine")
    problems, missing = [], {}
    nodes = {}
    engine_ids = {}
    for host in members:
        view = views.get(host) or {"node": host, "reachable": False, "error": "not in this run (not in the play's "
                                   "hosts: add it, or drop --limit)", "records": []}
        own = next((r for r in view.get("records") or [] if (r.get("state") or {}).get("deployment") == dep_id), None)
        own_fp = ((own or {}).get("state") or {}).get("running", {}) or {}
        record = ("current" if own and own_fp.get("fingerprint") == running.get("fingerprint") else
                  "differs" if own else "missing")
        node = {"reachable": view["reachable"], "role": "head" if host == head else "worker", "error": view.get("error"),
                "container": _container_row(view) if view["reachable"] else None,
                "state_record": record if view["reachable"] else None,
                "pending_change": view.get("pending_change") if view["reachable"] else None}
        nodes[host] = node
        if not view["reachable"]:
            problems.append("%s (%s): %s" % (host, node["role"], view.get("error") or "unreachable"))
            continue
        c = node["container"]
        if view.get("container") is None:
            # Nothing was read there: neither its container nor its state file is known.
            node["state_record"] = None
            problems.append("%s: %s" % (host, view.get("error") or "no status read"))
            continue
        if c.get("error"):
            problems.append(docker_problem(host, c["error"]))
        elif not c.get("exists"):
            problems.append("%s: no container" % host)
        elif not c.get("running"):
            problems.append("%s: container %s" % (host, c.get("status")))
        elif c.get("image") == desired.get("image") and c.get("image_id") not in (None, running.get("image_id")) and \
                running.get("image_id"):
            # Only where the container runs the deployment's image by name: a two-Spark container runs the image
            # with sshd derived from it (another id), compared between the members below instead.
            problems.append("%s: the container runs image %s, the server was launched from %s"
                            % (host, c["image_id"][:19], running["image_id"][:19]))
        # The engine image this member runs: its container's image when that is the deployment's image by name; else
        # (a two-Spark container runs the image with sshd that each node derives from it, whose id differs between
        # nodes that built it) the image id its own state file says its server was launched from.
        if c.get("image") == desired.get("image") and c.get("image_id"):
            engine_ids[host] = c["image_id"]
        elif own_fp.get("image_id"):
            engine_ids[host] = own_fp["image_id"]
        if record == "differs":
            problems.append("%s: its state file records another launch than the head's newest record" % host)
        elif record == "missing":
            problems.append("%s: no state file for deployment %s" % (host, dep_id))
        if node["pending_change"]:
            problems.append(pending_problem(host, node["pending_change"]))
    image_ids = sorted(set(engine_ids.values()))
    if len(image_ids) > 1:
        problems.append("the members run different images (%s)" % ", ".join(i[:19] for i in image_ids))

    head_view = views.get(head) or {}
    probe = next((p for p in head_view.get("probes") or [] if p.get("deployment") == dep_id), None)
    process = head_view.get("server_process") or {}
    head_ok = bool(head_view.get("reachable"))
    health = {"status": None, "error": None}
    served = None
    if not head_ok:
        missing["health"] = missing["model"] = missing["server_process"] = "the head %s is not reachable" % head
    else:
        if not process.get("running"):
            problems.append("%s: server process not running (%s)" % (head, process.get("reason") or "unknown"))
        if probe is None:
            missing["health"] = missing["model"] = "the head did not probe the server (no port in the state file)"
        else:
            health = {"status": (probe.get("health") or {}).get("status"), "error": (probe.get("health") or {}).get("error")}
            served = (probe.get("models") or {}).get("ids")
            if health["status"] != 200:
                said = ("answered %s" % health["status"] if health["status"] is not None
                        else "did not answer (%s)" % health["error"])
                problems.append("%s: /health %s" % (probe.get("base_url"), said))
            if served is None:
                missing["model"] = "/v1/models: %s" % ((probe.get("models") or {}).get("error") or "no model list")
            elif running.get("target_model") not in served:
                problems.append("/v1/models lists %s, not %s" % (served, running.get("target_model")))
    answering = health["status"] == 200 and served is not None and running.get("target_model") in served
    if not running:
        problems.append("the state file records no running server")
        answering = False
    gave_up = gave_up_of(state)
    if gave_up:
        problems.append(gave_up_problem(head, gave_up))
    supervisor = head_view.get("supervisor") if head_ok else None
    liveness = (supervisor or {}).get("liveness")
    if liveness and liveness_problem(head, liveness):
        problems.append(liveness_problem(head, liveness))
    acc = acceptance(running.get("method"), dict(probe, engine=engine) if probe else None) if answering else None
    if acc is None:
        missing["acceptance"] = "the server does not serve"
    elif not acc["available"]:
        missing["acceptance"] = acc["reason"]
    all_reachable = all(n["reachable"] for n in nodes.values())
    if answering and not problems:
        status = "serving"
    elif answering:
        status = "degraded"
    else:
        status = "down"
    uptime = process.get("elapsed_seconds") if head_ok and process.get("running") else None
    if uptime is None:
        missing["uptime"] = ("the head %s is not reachable" % head if not head_ok else
                             "the server process is not running" if not process.get("running") else
                             "the server process's start time could not be read")
    stale = sorted(h for h, rec in holders if h not in members)
    in_inventory = _in_inventory(dep_id, members, assigned)
    if torn_down(state):
        # Ended on purpose by teardown.yml: nothing of it is expected to run, so nothing is a problem.
        status, problems, missing = "torn_down", [], {}
    elif in_inventory is False and status == "down":
        holding = list(dict.fromkeys(h for h, dummy in holders))
        status, problems = "retired", [retired_problem(dep_id, holding, newest.get("path"))]
    elif in_inventory is False:
        problems.append(not_in_inventory_problem(dep_id, members))
    return {
        "kind": "deployment",
        "deployment": dep_id,
        "status": status,
        "serving": status == "serving",
        "in_inventory": in_inventory,
        "torn_down_at": state.get("torn_down_at") if status == "torn_down" else None,
        # What the record says served last (teardown.yml keeps it as previous).
        "last_launch": state.get("previous") if status == "torn_down" else None,
        "reachable": all_reachable,
        "head": head,
        "members": members,
        "nodes": nodes,
        "engine": engine,
        "server": {
            "target_model": running.get("target_model"),
            "draft_model": desired.get("draft_model"),
            "method": running.get("method"),
            "max_draft_len": running.get("max_draft_len"),
            "port": running.get("port"),
            "endpoint": running.get("endpoint"),
            "image_id": running.get("image_id"),
            "started_at": running.get("started_at"),
            "fingerprint": running.get("fingerprint"),
            "process_running": process.get("running") if head_ok else None,
            "process": process.get("command") if head_ok else None,
            "uptime_seconds": uptime,
            "tuned": state.get("tuned"),
        },
        "state_updated_at": state.get("updated_at"),
        "state_file": newest.get("path"),
        # The supervisor stopped restarting the server (its cap of failed starts): why, until Ansible starts it.
        "supervisor_gave_up": gave_up if status != "torn_down" else None,
        # The head's supervisor: the last liveness probe (a chat completion while /health answers) and the boot-loop
        # count (supervisor-state.json in the state directory); None when it wrote none.
        "supervisor": supervisor if status != "torn_down" else None,
        "health": health,
        "model": {"expected": running.get("target_model"), "served": served},
        "acceptance": acc,
        "problems": problems,
        "missing": missing,
        "stale_records_on": stale,
    }


def _node_row(host, view, stale_of):
    reachable = view["reachable"]
    read = view.get("container") is not None
    row = {"kind": "node", "deployment": None,
           "status": "unreachable" if not reachable else "not_deployed" if read else "unknown",
           "serving": False, "in_inventory": None, "torn_down_at": None, "last_launch": None, "reachable": reachable, "head": None, "members": [host],
           "nodes": {host: {"reachable": reachable, "role": None, "error": view.get("error"),
                            "container": _container_row(view) if reachable else None, "state_record": None,
                            "pending_change": view.get("pending_change") if reachable else None}},
           "engine": None, "server": None, "state_updated_at": None, "state_file": None,
           "health": {"status": None, "error": None}, "model": {"expected": None, "served": None}, "acceptance": None,
           "problems": [], "missing": {}, "stale_records_on": []}
    if not reachable:
        row["problems"].append("%s: %s" % (host, view.get("error") or "unreachable"))
    elif not read:
        row["problems"].append("%s: %s" % (host, view.get("error") or "no status read"))
    elif view["container"].get("error"):
        row["problems"].append(docker_problem(host, view["container"]["error"]))
        row["missing"] = {"deployment": "the node is not reachable and no reachable node's state file names it"}
    if reachable and view.get("pending_change"):
        row["problems"].append(pending_problem(host, view["pending_change"]))
    for dep_id in stale_of:
        row["problems"].append("%s: holds an older state file of deployment %s, whose newest record does not name it"
                               % (host, dep_id))
    return row


def build_rows(hosts, active, facts, assigned=None):
    """Rows of the status: one per deployment, then one per node in no live deployment.

    ``hosts``: every host of the play (``ansible_play_hosts_all``); ``active``: the hosts still in the play
    (``ansible_play_hosts``); ``facts``: host -> the registered ``specdec_status_info`` result (an unreachable
    host's result carries ``unreachable``); ``assigned``: host -> the deployment ids the inventory gives it
    (plugin_utils/_inventory.assigned_ids), or None when the inventory is not known (no row is then ``retired``).
    A node whose deployments are all torn down or retired also gets its own row (it serves nothing).
    """
    active = set(active if active is not None else hosts)
    views = {h: _node_view(h, (facts or {}).get(h), h in active) for h in hosts}
    by_dep = {}
    for host in hosts:
        for rec in views[host]["records"]:
            state = rec.get("state") or {}
            if state.get("deployment"):
                by_dep.setdefault(state["deployment"], []).append((host, rec))
    rows, placed, stale = [], set(), {}
    for dep_id in sorted(by_dep):
        holders = by_dep[dep_id]
        newest = _newest([rec for dummy, rec in holders])
        row = _deployment_row(dep_id, newest, holders, views, assigned)
        rows.append(row)
        if row["status"] not in ENDED:
            placed.update(row["members"])
        for host in row["stale_records_on"]:
            stale.setdefault(host, []).append(dep_id)
    for host in hosts:
        if host not in placed:
            rows.append(_node_row(host, views[host], stale.get(host, [])))
    return rows


def _duration(seconds):
    if seconds is None:
        return "-"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return "%dd%02dh" % (days, hours)
    if hours:
        return "%dh%02dm" % (hours, minutes)
    return "%dm%02ds" % (minutes, secs)


TABLE_COLUMNS = ("DEPLOYMENT", "STATUS", "NODES", "CONTAINER", "ENGINE", "METHOD", "K", "HEALTH", "MODEL", "IMAGE",
                 "UPTIME", "ACCEPTANCE")


def _cells(row):
    nodes = ",".join("%s%s" % (h, "" if n["reachable"] else "(unreachable)") for h, n in row["nodes"].items())
    containers = [n["container"] for n in row["nodes"].values() if n.get("container")]
    container = ("-" if not containers else
                 ",".join(("running" if n["container"].get("running") else (n["container"].get("status") or "?"))
                          + ("+pending" if n.get("pending_change") else "")
                          for n in row["nodes"].values() if n.get("container")))
    server = row.get("server") or {}
    if row["status"] == "torn_down" and row.get("last_launch"):
        # What served until the teardown (the record keeps it as previous).
        last = row["last_launch"]
        server = {"method": last.get("method"), "max_draft_len": last.get("max_draft_len")}
    images = sorted({(c.get("image_id") or "").replace("sha256:", "")[:12] for c in containers if c.get("image_id")})
    acc = row.get("acceptance") or {}
    if acc.get("available"):
        accept = "%.2f (%s/%s)" % (acc["rate"], acc["accepted_tokens"], acc["draft_tokens"])
    else:
        accept = "-"
    model = (row.get("model") or {}).get("expected") or (row.get("last_launch") or {}).get("target_model") or "-"
    served = (row.get("model") or {}).get("served")
    if served is not None and model not in served:
        model = "%s (serves %s)" % (model, ",".join(served) or "none")
    health = (row.get("health") or {}).get("status")
    name = row.get("deployment") or "-"
    if row.get("in_inventory") is False:
        name += " (not in inventory)"
    return [name, row["status"], nodes, container, row.get("engine") or "-",
            server.get("method") or "-", "-" if server.get("max_draft_len") is None else str(server["max_draft_len"]),
            "-" if health is None else str(health), model, ",".join(images) or "-",
            _duration(server.get("uptime_seconds")), accept]


def table(rows):
    """The rows as a text table (list of lines): a header and one line per row, then one ``PENDING`` line per node with
    a pending container change (its problem line) and one ``INVENTORY`` line per deployment the inventory no longer
    assigns (how to remove it, or that it still serves)."""
    cells = [list(TABLE_COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(TABLE_COLUMNS))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(widths))).rstrip() for c in cells]
    return lines + ["PENDING " + pending_problem(host, node["pending_change"])
                    for row in rows for host, node in row["nodes"].items() if node.get("pending_change")] + [
        "INVENTORY " + row["problems"][-1] for row in rows
        if row.get("in_inventory") is False and row["status"] != "torn_down" and row["problems"]] + [
        "SUPERVISOR " + gave_up_problem(row.get("head"), row["supervisor_gave_up"]) for row in rows
        if row.get("supervisor_gave_up")]


def summary(rows):
    """The per-deployment summary for ``set_stats`` (and the JSON document's ``summary``)."""
    deployments = {}
    for row in rows:
        if row["kind"] != "deployment":
            continue
        server = row["server"] or {}
        acc = row.get("acceptance") or {}
        deployments[row["deployment"]] = {
            "status": row["status"], "serving": row["serving"], "reachable": row["reachable"], "head": row["head"],
            "members": row["members"], "engine": row["engine"], "method": server.get("method"),
            "max_draft_len": server.get("max_draft_len"), "model": server.get("target_model"),
            "health": row["health"]["status"], "image_id": server.get("image_id"),
            "uptime_seconds": server.get("uptime_seconds"), "acceptance_rate": acc.get("rate"),
            "draft_tokens": acc.get("draft_tokens"), "accepted_tokens": acc.get("accepted_tokens"),
            "problems": len(row["problems"]),
            "in_inventory": row.get("in_inventory"), "torn_down_at": row.get("torn_down_at"),
            "pending_changes": sorted(h for h, n in row["nodes"].items() if n.get("pending_change")),
        }
    others = {row["members"][0]: {"status": row["status"], "reachable": row["reachable"],
                                  "pending_change": bool(row["nodes"][row["members"][0]].get("pending_change"))}
              for row in rows if row["kind"] == "node"}
    return {
        "deployments": deployments,
        "serving": sorted(d for d, v in deployments.items() if v["serving"]),
        "not_serving": sorted(d for d, v in deployments.items() if not v["serving"] and v["status"] not in ENDED),
        "torn_down": sorted(d for d, v in deployments.items() if v["status"] == "torn_down"),
        "retired": sorted(d for d, v in deployments.items() if v["status"] == "retired"),
        "nodes_without_deployment": others,
        # A torn-down or retired deployment's members are rows of their own when they are in the run; one outside it
        # (removed from the inventory since) was never tried: not an unreachable node.
        "unreachable_nodes": sorted({h for row in rows if row["status"] not in ENDED
                                     for h, n in row["nodes"].items() if not n["reachable"]}),
    }


def document(rows, generated_at):
    """The JSON file's content."""
    return {"schema_version": SCHEMA_VERSION, "generated_at": generated_at,
            "acceptance_definition": "accepted draft tokens / drafted tokens, from the server's cumulative counters "
                                     "since the server process started",
            "summary": summary(rows), "deployments": rows}


def verdict(rows):
    """(all serving, one line): the deployments that serve and those that do not, with their first problem."""
    ended = [r for r in rows if r["kind"] == "deployment" and r["status"] in ENDED]
    deps = [r for r in rows if r["kind"] == "deployment" and r["status"] not in ENDED]
    bad = [r for r in deps if not r["serving"]]
    tail = ""
    for word in ENDED:
        ids = [r["deployment"] for r in ended if r["status"] == word]
        if ids:
            tail += " %s: %s." % (word.capitalize().replace("_", " "), ", ".join(ids))
    if not deps and ended:
        return False, "No deployment is deployed.%s" % tail
    if not deps:
        return False, "No deployment found: no reachable node holds a state file (%d node(s) read)." % len(rows)
    if not bad:
        return True, "%d deployment(s) serving: %s.%s" % (len(deps), ", ".join(r["deployment"] for r in deps), tail)
    return False, "%d of %d deployment(s) not serving: %s.%s" % (
        len(bad), len(deps), "; ".join("%s %s (%s)" % (r["deployment"], r["status"], (r["problems"] or ["?"])[0])
                                       for r in bad), tail)
