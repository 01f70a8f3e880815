# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE: the server lifecycle on the head (module sparkops.specdec.server_lifecycle). Node-side, stdlib only.

The on-node state of a deployment's server, in one place (the module's DOCUMENTATION and docs/architecture.md
describe the same):

- ``<state_dir>/deployments/<deployment>.json``: the state file (schema in plugin_utils/_plan.py, written on every
  member by the specdec_server role once a server serves); ``running`` names the launch spec that serves.
- ``<state_dir>/server.sh``: the control script that runs INSIDE the engine container (``start|stop|status|recycle``),
  rendered from the launch spec by ``render_script`` (byte for byte what the role's former template server.sh.j2
  rendered, so a deployment made before keeps its script and its consent record's sha1).
- ``<state_dir>/server.pid``, ``server.log``: written by server.sh.
- ``<state_dir>/autostart.json``: the supervisor's consent record (``autostart_record``; schema 1 in the
  trtllm_container role's files/specdec_supervisor.py). ``server.sh stop`` removes it first.
- ``<state_dir>/deployments/<deployment>.json`` key ``supervisor_gave_up``: written by the supervisor when it gives up
  after its cap of failed starts; the role's next start writes the state file without it.
- ``<state_dir>/api-key``: llama-server's key file (0600) with specdec_api_key.

Everything that runs a command takes a ``run(argv, env=None) -> (rc, stdout, stderr)`` (the module passes
AnsibleModule.run_command; tests a fake) and health checks an ``http_get(url, timeout) -> (status, reason)``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import time
import urllib.error

from ansible.module_utils.urls import open_url
from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets

hf_token_env = _secrets.hf_token_env

SCRIPT_NAME = "server.sh"
RECORD_NAME = "autostart.json"
# What the supervisor keeps on disk (its boot-loop count, the last liveness verdict) and its metrics textfile.
GUARD_NAME = "supervisor-state.json"
METRICS_NAME = "supervisor.prom"
API_KEY_NAME = "api-key"
RECORD_SCHEMA = 1
STATE_SCHEMA = 1
# The engines and the speculative-decoding methods a state file and a tuned record may name.
ENGINES = ("trtllm", "llamacpp", "vllm")
# One vocabulary for every engine, each rendered in the engine's own spelling by the plan (plugin_utils/_plan.py);
# which engine serves which method is the plan's ENGINE_METHODS.
METHODS = ("eagle3", "draft_target", "mtp", "ngram", "dflash", "none")
# Container settings that ssh-spawned remote ranks would not inherit otherwise (forwarded by mpirun -x when set).
FORWARDED = "CPATH TRITON_PTXAS_PATH NCCL_SOCKET_IFNAME UCX_NET_DEVICES NCCL_IB_HCA"

_HEAD = """\
# Managed by sparkops.specdec (specdec_server role). Runs INSIDE the {container}
# container on the head node: `server.sh start|stop|status`. Rendered from the launch spec of
# the deployment plan (state file: {state_file}); `recycle` is the supervisor's only. No secrets here: HF_TOKEN,
"""

_BODY_1 = """\
# when set, comes from the `docker exec` environment and reaches the ranks with `mpirun -x HF_TOKEN`.
# start and stop hold a lock shared with the supervisor in the container (trtllm_container's specdec_supervisor.py,
# which restarts the recorded server after a reboot or a crash): it never races them. stop first removes the consent
# record autostart.json, so that a server stopped on purpose (by Ansible or by hand) stays stopped. recycle (the
# supervisor's hang watchdog, under its lock) stops a hung server the same way but keeps the record, so the supervisor
# starts it again. Two nodes: SIGTERM to mpirun's process group; mpirun then stops the ranks on every node.
set -euo pipefail
cd {state_dir}
pidfile=server.pid
lock() {{  # the supervisor holds the lock itself when it runs `server.sh start`
  [ -n "${{SPARKOPS_SERVER_LOCK_HELD:-}}" ] && return 0
  mkdir -p /run/sparkops-specdec
  exec 9>>/run/sparkops-specdec/server.lock
  flock 9
}}
running() {{  # alive and not a zombie
  local pid state
  [ -s "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  state=$(sed -E 's/^[0-9]+ \\(.*\\) ([A-Za-z]).*/\\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}}
halt() {{  # stop the server's process group: SIGCONT (a stopped process must see SIGTERM), SIGTERM, SIGKILL after 60 s
  local pid
  pid=$(cat "$pidfile")
  kill -CONT -- "-$pid" 2>/dev/null || kill -CONT "$pid" 2>/dev/null || true
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
  for _ in $(seq 1 60); do running || break; sleep 1; done
  if running; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"; fi
  for _ in $(seq 1 10); do running || break; sleep 1; done
}}
case "${{1:-status}}" in
  start)
    lock
    if running; then echo "already running (pid $(cat "$pidfile"))"; exit 0; fi
"""

_BODY_2 = """\
    # Container settings that ssh-spawned remote ranks would not inherit otherwise.
    for v in CPATH TRITON_PTXAS_PATH NCCL_SOCKET_IFNAME UCX_NET_DEVICES NCCL_IB_HCA; do
      if [ -n "${!v:-}" ]; then forward+=(-x "$v"); fi
    done
    if [ -n "${HF_TOKEN:-}" ]; then forward+=(-x HF_TOKEN); fi
"""

_TAIL = """\
    echo $! > "$pidfile"
    echo "started (pid $!)"
    ;;
  stop)
    lock
    rm -f autostart.json
    if running; then
      pid=$(cat "$pidfile")
      halt
      echo "stopped (pid $pid)"
    fi
    rm -f "$pidfile"
    ;;
  recycle)  # the supervisor's hang watchdog only: stop a hung server, keep autostart.json (it starts it again)
    lock
    if running; then
      pid=$(cat "$pidfile")
      halt
      if running; then echo "pid $pid still alive after SIGKILL (uninterruptible?): left to the next look" >&2; exit 1; fi
      echo "recycled (pid $pid)"
    fi
    rm -f "$pidfile"
    ;;
  status)
    if running; then echo "running (pid $(cat "$pidfile"))"; else echo "stopped"; exit 3; fi
    ;;
  *) echo "usage: $0 start|stop|status|recycle" >&2; exit 2 ;;
esac
"""


def _text(value):
    """Jinja's ``string`` filter, then Ansible's ``quote`` (None quotes as '')."""
    return "" if value is None else str(value)


def _quote(value):
    return shlex.quote(_text(value))


def _jinja_sorted(keys):
    """Jinja's ``sort``/``dictsort`` (case-insensitive, stable)."""
    return sorted(keys, key=lambda k: k.lower() if isinstance(k, str) else k)


def render_script(spec, state_dir, container, state_file):
    """server.sh for the launch spec ``spec`` (the plan's ``launch``: ``env``, ``members``, ``argv``).

    The same bytes the role's template server.sh.j2 rendered (Ansible's template module: trim_blocks), so that a
    deployment made by an earlier release reads as unchanged and its consent record's sha1 still matches."""
    env = spec.get("env") or {}
    argv = " ".join(_quote(a) for a in spec.get("argv") or [])
    out = [_HEAD.format(container=container, state_file=state_file), _BODY_1.format(state_dir=_quote(state_dir))]
    for key in _jinja_sorted(env.keys()):
        out.append("    export %s=%s\n" % (key, _quote(env[key])))
    # Secrets read from their 0600 files at start (engine vllm: VLLM_API_KEY from the key file): never in argv, the
    # state file, this script or the container's environment (docker inspect).
    secret_env = spec.get("secret_env") or {}
    for key in _jinja_sorted(secret_env.keys()):
        out.append('    %s="$(cat %s)"; export %s\n' % (key, _quote(secret_env[key]), key))
    out.append("    forward=(%s)\n" % "".join("-x %s " % k for k in _jinja_sorted(env.keys())))
    out.append(_BODY_2)
    if len(spec.get("members") or []) > 1 and spec.get("engine", "trtllm") == "trtllm":
        out.append('    nohup setsid mpirun "${forward[@]}" trtllm-llmapi-launch %s \\\n' % argv)
        out.append("      </dev/null >server.log 2>&1 9>&- &\n")
    else:
        out.append("    nohup setsid %s </dev/null >server.log 2>&1 9>&- &\n" % argv)
    out.append(_TAIL)
    return "".join(out)


def sha1_text(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def nice_json(data):
    """Ansible's ``to_nice_json(indent=2)`` plus a newline: how the role wrote the state file and the record."""
    return json.dumps(data, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"


# The supervisor's bounded recovery and completion probe (optional record fields, left out when not given: the
# supervisor then uses its documented defaults, RECORD_DEFAULTS of specdec_supervisor.py).
RECOVERY_INT_FIELDS = ("max_failed_starts", "backoff_initial", "backoff_max", "health_timeout",
                       "min_available_memory", "completion_probe_interval")


# The record's fields added with bounded recovery (0.3.0); a record written before has none of them.
RECOVERY_FIELDS = RECOVERY_INT_FIELDS + ("drop_caches", "model", "api_key_file")

# The fields added with the liveness probe, the memory wait's bound and the boot-loop guard, with the defaults the
# supervisor serves a record without them with (RECORD_DEFAULTS of specdec_supervisor.py; a unit test keeps the two
# equal): a record written before stands while the wanted values are these.
LIVENESS_DEFAULTS = {"liveness_interval": 300, "liveness_timeout": 30, "liveness_grace": 600, "liveness_failures": 2,
                     "liveness_cooldown": 2700, "memory_wait_timeout": 900, "boot_loop_starts": 3,
                     "boot_loop_window": 600}
LIVENESS_FIELDS = tuple(sorted(LIVENESS_DEFAULTS))


def keeps_earlier_record(current, wanted):
    """Whether a record an earlier version wrote stands for ``wanted`` as it is. Converging an upgraded deployment then
    changes nothing (the supervisor serves such a record with its documented defaults); the next start writes the
    full record. Two generations: a record without RECOVERY_FIELDS (before 0.3.0) whose other fields equal
    ``wanted``'s; a record without LIVENESS_FIELDS whose other fields equal ``wanted``'s while ``wanted`` has their
    defaults (LIVENESS_DEFAULTS; other values are another behaviour, written at once)."""
    if not isinstance(current, dict) or any(key in current for key in LIVENESS_FIELDS):
        return False
    if any(wanted.get(key, value) != value for key, value in LIVENESS_DEFAULTS.items()):
        return False
    wanted = dict((k, v) for k, v in wanted.items() if k not in LIVENESS_FIELDS)
    if current == wanted:
        return True
    if any(key in current for key in RECOVERY_FIELDS):
        return False
    return current == dict((k, v) for k, v in wanted.items() if k not in RECOVERY_FIELDS)


def autostart_record(fields, script_sha1, needs_hf_token):
    """The consent record (schema 1): ``fields`` has deployment, state_file, fingerprint, config_file, health_url
    and hang_timeout (the optional watchdog fields: left out when None), and the optional bounded-recovery fields
    RECOVERY_INT_FIELDS, drop_caches, model and api_key_file (the completion probe's; a path, never the key), and
    LIVENESS_FIELDS (the liveness probe, the memory wait's bound, the boot-loop guard)."""
    rec = {
        "schema_version": RECORD_SCHEMA,
        "deployment": fields["deployment"],
        "state_file": fields["state_file"],
        "fingerprint": fields["fingerprint"],
        "server_sh_sha1": script_sha1,
        "config_file": fields.get("config_file") or "",
        "needs_hf_token": bool(needs_hf_token),
    }
    if fields.get("health_url"):
        rec["health_url"] = fields["health_url"]
    if fields.get("hang_timeout") is not None:
        rec["hang_timeout"] = int(fields["hang_timeout"])
    for key in RECOVERY_INT_FIELDS + LIVENESS_FIELDS:
        if fields.get(key) is not None:
            rec[key] = int(fields[key])
    if fields.get("drop_caches") is not None:
        flag = fields["drop_caches"]
        rec["drop_caches"] = flag.strip().lower() in ("true", "yes", "on", "1") if isinstance(flag, str) else bool(flag)
    for key in ("model", "api_key_file"):
        if fields.get(key) is not None:
            rec[key] = str(fields[key])
    return rec


def gave_up_entry(state_text):
    """The supervisor's give-up (key supervisor_gave_up) in a state file's text, or None."""
    try:
        state = json.loads(state_text) if state_text else None
    except ValueError:
        return None
    entry = state.get("supervisor_gave_up") if isinstance(state, dict) else None
    return entry if isinstance(entry, dict) else None


def gave_up_line(entry):
    """One line of a give-up: its kind's reason (liveness, memory, boot_loop), or the cap of failed starts."""
    if entry.get("reason"):
        return "the supervisor gave up at %s (%s): %s" % (entry.get("at"), entry.get("kind"), entry.get("reason"))
    return ("the supervisor gave up at %s after %s consecutive failed starts (specdec_server_max_failed_starts %s; "
            "last: %s)" % (entry.get("at"), entry.get("failed_starts"), entry.get("max_failed_starts"),
                           entry.get("last_failure")))


def parse_status(stdout, rc):
    """The head's look in the container (the state file, then a last line 'running' or 'stopped'):
    ``(state, running)``. No container, an unreadable or non-JSON state file, or another schema: an empty state;
    anything but a last line 'running' is not running."""
    if rc != 0 or not stdout:
        return {}, False
    lines = stdout.rstrip("\n").split("\n")
    running = lines[-1].strip() == "running"
    try:
        state = json.loads("\n".join(lines[:-1]) or "null") or {}
    except ValueError:
        state = {}
    if not isinstance(state, dict) or state.get("schema_version") != STATE_SCHEMA:
        state = {}
    return state, running


_PID = re.compile(r"\(pid (\d+)\)")


def pid_of(text):
    """The pid server.sh printed ('started (pid N)', 'already running (pid N)', 'stopped (pid N)'), or None."""
    m = _PID.search(text or "")
    return int(m.group(1)) if m else None


def http_get(url, timeout):
    """(status, reason): the HTTP status of a GET (None when there was no answer) and why it is not 200."""
    try:
        # The server's own address: never through a proxy of the node's environment.
        resp = open_url(url, method="GET", timeout=timeout, use_proxy=False, use_netrc=False,
                        http_agent="sparkops-server-lifecycle")
        status = resp.getcode()
        resp.close()
        return status, "" if status == 200 else "HTTP %d" % status
    except urllib.error.HTTPError as exc:
        return exc.code, "HTTP %d" % exc.code
    except Exception as exc:  # refused, reset, timed out, DNS: all "not healthy yet"
        return None, " ".join(str(getattr(exc, "reason", exc)).split()) or type(exc).__name__


class Server(object):
    """server.sh in the engine container, through the docker CLI on the head."""

    def __init__(self, run, container, state_dir, docker="docker"):
        self.run = run
        self.container = container
        self.state_dir = state_dir.rstrip("/") or "/"
        self.docker = docker
        self.script = "%s/%s" % (self.state_dir, SCRIPT_NAME)

    def exec_(self, argv, env_names=()):
        cmd = [self.docker, "exec"]
        for name in env_names:
            cmd += ["-e", name]  # the value comes from the docker CLI's environment, never from argv
        return cmd + [self.container] + list(argv)

    def call(self, verb, env=None):
        env = env or {}
        return self.run(self.exec_(["bash", self.script, verb], sorted(env)), env=env)

    def status(self, state_file):
        """(state, running, rc, stderr) as the plan reads them."""
        rc, out, err = self.run(self.exec_([
            "sh", "-c", '{ cat "$0" && echo; } 2>/dev/null || echo null; if bash "$1" status >/dev/null 2>&1; then echo running; '
            'else echo stopped; fi', state_file, self.script]))
        state, running = parse_status(out, rc)
        return state, running, rc, err


def wait_healthy(server, url, timeout, interval, get=http_get, clock=time.monotonic, sleep=time.sleep):
    """Wait until ``url``/health answers 200 from the head, or the server process exits.

    The same polls as the role's former wait.yml: ceil(timeout/interval) looks, ``interval`` s apart; each asks
    ``server.sh status`` first. Returns (outcome, detail, looks): ``healthy``; ``exited`` (the process is gone);
    ``timeout``; ``error`` (the check could not run in the container: detail says why)."""
    looks = max(1, int(math.ceil(float(timeout) / float(interval)))) if interval > 0 else 1
    detail = ""
    for n in range(1, looks + 2):
        rc, out, err = server.call("status")
        if rc == 3:
            return "exited", "the server process exited", n
        if rc != 0:
            return "error", " ".join((err or out or "rc %d" % rc).split()), n
        status, reason = get(url.rstrip("/") + "/health", 5)
        if status == 200:
            return "healthy", "", n
        detail = "not healthy yet: %s" % reason
        if n > looks:
            break
        sleep(interval)
    return "timeout", detail, looks + 1


# The libnccl files mapped by the processes of the server's process group (server.sh starts it with setsid: its pid is
# the group's id), from /proc/<pid>/maps in the container; $0 is server.pid. No pgrep (not every image has procps).
NCCL_PROBE = r"""pg=$(cat "$0" 2>/dev/null) || exit 0
for d in /proc/[0-9]*; do
  s=$(cat "$d/stat" 2>/dev/null) || continue
  s=${s##*) }
  set -- $s
  [ "${3:-}" = "$pg" ] && cat "$d/maps" 2>/dev/null
done | awk '/libnccl/ {print $6}' | sort -u
"""

# vLLM across Sparks with pip's NCCL (the nvidia-nccl-cu* wheel vLLM's torch pulls in) has hung on Spark pairs;
# users load the system libnccl2 instead (vllm-project/vllm#41725, #42354).
NCCL_HANG = ("vLLM across Sparks loads pip's NCCL (%s): known to hang on Spark pairs (vllm-project/vllm#41725, "
             "#42354); if the first requests hang, use an image whose vLLM loads the system libnccl2.")


def nccl_library(stdout, members):
    """Which NCCL the server's processes loaded: {'source': pip|system|other|none, 'paths': [...], 'warning': text or
    ''} from NCCL_PROBE's output. pip: a path under site-packages/ or dist-packages/nvidia/nccl/; system: under
    /usr/lib, /lib or /usr/local; none: no libnccl mapped (a CPU build). The warning: pip's NCCL across Sparks."""
    paths = sorted(set(line.strip() for line in (stdout or "").splitlines() if "libnccl" in line))
    pip = [p for p in paths if "-packages/nvidia/nccl/" in p]
    if pip:
        source = "pip"
    elif any(p.startswith(("/usr/lib", "/lib", "/usr/local")) for p in paths):
        source = "system"
    else:
        source = "other" if paths else "none"
    warning = NCCL_HANG % pip[0] if pip and len(members or []) > 1 else ""
    return {"source": source, "paths": paths, "warning": warning}


def wait_worker(server, interval, sleep=time.sleep):
    """A vLLM headless worker (no HTTP): its process must still run one ``interval`` after its start (it then waits at
    its head's rendezvous; the head's /health answers only once every rank joined). Returns (outcome, detail, looks):
    ``running``, ``exited`` or ``error``."""
    sleep(interval)
    rc, out, err = server.call("status")
    if rc == 0:
        return "running", "", 1
    if rc == 3:
        return "exited", "the headless worker exited", 1
    return "error", " ".join((err or out or "rc %d" % rc).split()), 1


def wait_message(outcome, detail, timeout, container):
    """The role's failure messages of the health wait (one line each)."""
    if outcome == "exited" and detail == "the headless worker exited":
        return ("The headless vLLM worker exited right after its start (it rejected its settings or crashed; see "
                "server.log on this node).")
    if outcome == "exited":
        return "The server process exited before /health answered (it rejected its settings or crashed; see the log)."
    if outcome == "timeout":
        return "/health did not answer 200 within specdec_server_health_timeout (%s s)." % timeout
    return "The health check could not run in %s: %s" % (container, detail)


def is_int(value, minimum=None):
    """True when ``value`` is an int (not a bool), or text of one, of at least ``minimum``."""
    if isinstance(value, bool):
        return False
    try:
        number = int(str(value))
    except (TypeError, ValueError):
        return False
    return minimum is None or number >= minimum


# The keys of a tuned record (the tuner's pick as the state file keeps it).
TUNED_KEYS = ("engine", "target_model", "draft_model", "method", "max_draft_len")


def check_tuned(tuned):
    """Problems of a tuned record (the tuner's pick as the state file keeps it); [] when it is usable."""
    if not isinstance(tuned, dict):
        return ["tuned: must be a mapping with %s" % ", ".join(TUNED_KEYS)]
    problems = ["tuned: %s is missing" % k for k in TUNED_KEYS if k not in tuned]
    if problems:
        return problems
    if tuned["engine"] not in ENGINES:
        problems.append("tuned.engine: %r is not an engine (%s)" % (tuned["engine"], ", ".join(ENGINES)))
    if tuned["method"] not in METHODS:
        problems.append("tuned.method: %r is not a method (%s)" % (tuned["method"], ", ".join(METHODS)))
    elif tuned["method"] == "none":
        if tuned["max_draft_len"] is not None:
            problems.append("tuned.max_draft_len: must be null with method none")
    elif not is_int(tuned["max_draft_len"], 1) or int(str(tuned["max_draft_len"])) > 32:
        problems.append("tuned.max_draft_len: %r is not a draft length from 1 to 32" % (tuned["max_draft_len"],))
    return problems
