# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection. Not a public API; names and messages may change in any release.
"""The fabric test before serving (issue 24, item 4), as pure functions: no I/O, no Ansible.

Every NVIDIA multi-Spark runbook ends its network set-up with nccl-tests' ``all_gather_perf -b 16G -e 16G -f 2``
over ``mpirun -np N -H ip1:1,...`` and a pass figure (docs/layouts.md):

* ``# Avg bus bandwidth`` >= 21.875 GB/s (175 Gb/s) for ``direct`` and ``switch``, >= 10 GB/s (80 Gb/s) for the
  3-node ``ring`` (NVIDIA/dgx-spark-playbooks ``nvidia/playbook-nccl``, ``nvidia/connect-three-sparks``);
* ``libnccl.so.2: cannot open shared object file`` means NCCL is not installed (built) on every node.

The output format is nccl-tests' (``src/common.cu``): a header of ``#`` lines (``# nccl-tests version``, ``# Using
devices``, one ``#  Rank  N Group ... on HOST device ...`` line per rank), one row per size with the out-of-place
then the in-place ``time algbw busbw #wrong`` columns, ``# Out of bounds values : N OK|FAILED`` and ``# Avg bus
bandwidth    : X``. The unit tests read a real recorded log (tests/unit/plugins/fixtures/nccl_tests/).

Node-side and stdlib only (module sparkops.specdec.fabric_test runs it on the head of a deployment across Sparks):
besides the parser and the verdicts, ``decide`` (whether a start runs the test: before the first start and after a
layout change, never while a server of the deployment runs), ``command`` (TensorRT-LLM: the ``docker exec`` of SCRIPT
in the engine container, the image's mpirun over the container SSH mesh, the hostfile and NCCL/UCX environment the
server's launch uses, under the server's lock), ``host_command`` (vLLM, whose containers run no sshd: HOST_SCRIPT, the
host's mpirun over the host SSH mesh, NVIDIA's NCCL runbook as written, with the NCCL environment of the engine
container) and ``record`` (the baseline kept in the deployment state file, key ``fabric``). perftest's per-link
``ib_write_bw`` is not wired.
"""

from __future__ import annotations

import re

# Pass figures of NVIDIA's runbooks, bus bandwidth in GB/s (the ``# Avg bus bandwidth`` unit).
THRESHOLDS = {"direct": 21.875, "switch": 21.875, "ring": 10.0}
# The command the runbooks run (16 GB buffers: never while a server of the deployment holds the unified memory).
ARGS = ("-b", "16G", "-e", "16G", "-f", "2")
STATUSES = ("pass", "warn", "fail", "hang", "missing_library", "missing_tool")
# specdec_server_fabric_test: auto (before the first start and after a layout change), always (before every start),
# never.
MODES = ("auto", "always", "never")
# What the in-container script prints on stderr before it gives up on its own (server running, no binary).
MARK = "sparkops-fabric-test:"
# Its exit status when a server of the deployment runs (or its lock stays held): the test must not run then.
SERVER_RUNS = 75
# The server's lock in the engine container (server.sh and the supervisor take it to start a server).
LOCK_DIR = "/run/sparkops-specdec"
# Variables the ssh-spawned remote ranks get with mpirun -x when set in the container, besides every NCCL_ and UCX_
# one (module_utils/_layout.fabric_env's, whatever the layout) and the names of specdec_server_fabric_test_env:
# the loader path (nccl-tests' runbook forwards it) and server.sh's forwarded settings.
FORWARD = ("LD_LIBRARY_PATH", "CPATH", "TRITON_PTXAS_PATH", "NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "NCCL_IB_HCA")
# The OpenMPI hostfile the trtllm_container role writes in the state directory (module_utils/_layout.fabric_env).
HOSTFILE = "openmpi-hostfile"

_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:\s+.*nccl-library=(\d+))?")
_MISSING_LIB = re.compile(r"(libnccl[^:\s]*\.so[.0-9]*): cannot open shared object file")
# OpenMPI (4.x) when a node has no such executable at the path the head resolved.
_NO_EXEC = re.compile(r"could not access\s+or execute an executable")
# mpirun could not start its daemon on a node: ssh refused, a key or host key not accepted, no orted there.
_NO_DAEMON = re.compile(r"ORTE was unable to reliably start one or more daemons|Permission denied \(publickey|"
                        r"Host key verification failed|orted: (?:command )?not found")
# Where the test runs: in the head's engine container (TensorRT-LLM) or on the head host (vLLM).
RUN_FROM = ("container", "host")


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _half(tokens):
    """One side's ``time algbw busbw #wrong`` columns."""
    return {"time_us": _number(tokens[0]), "algbw": _number(tokens[1]), "busbw": _number(tokens[2]),
            "wrong": int(tokens[3]) if tokens[3].isdigit() else None}


def parse(text):
    """nccl-tests output -> ``{version, nccl_library, ranks: [{rank, host, device}], rows: [{size, count, type, redop,
    root, out_of_place: {time_us, algbw, busbw, wrong}, in_place: {...}}], out_of_bounds, avg_busbw, concluded}``.

    Lines mpirun prefixes with ``[1,0]<stdout>:`` are read without the prefix; other lines (warnings, our fixture
    notes) are skipped. ``avg_busbw`` is None when the ``# Avg bus bandwidth`` line is missing (the run did not end).
    """
    out = {"version": None, "nccl_library": None, "ranks": [], "rows": [], "out_of_bounds": None, "avg_busbw": None,
           "concluded": False}
    for raw in (text or "").splitlines():
        line = re.sub(r"^\[\d+,\d+\]<std(?:out|err)>:", "", raw).rstrip()
        match = _VERSION.match(line)
        if match:
            out["version"], out["nccl_library"] = match.group(1), match.group(2)
            continue
        match = _RANK.match(line)
        if match:
            out["ranks"].append({"rank": int(match.group(1)), "host": match.group(2), "device": int(match.group(3))})
            continue
        match = _OOB.match(line)
        if match:
            out["out_of_bounds"] = int(match.group(1))
            continue
        match = _AVG.match(line)
        if match:
            out["avg_busbw"] = _number(match.group(1))
            continue
        if line.startswith("# Collective test concluded"):
            out["concluded"] = True
            continue
        if line.startswith("#"):
            continue
        tokens = line.split()
        # size count type redop root + 2 x (time algbw busbw #wrong); older releases print no root column.
        if len(tokens) in (12, 13) and tokens[0].isdigit() and tokens[1].isdigit():
            root = tokens[4] if len(tokens) == 13 else None
            rest = tokens[5:] if len(tokens) == 13 else tokens[4:]
            out["rows"].append({"size": int(tokens[0]), "count": int(tokens[1]), "type": tokens[2], "redop": tokens[3],
                                "root": root, "out_of_place": _half(rest[:4]), "in_place": _half(rest[4:8])})
    return out


def threshold(layout, nodes):
    """The runbook's pass figure (GB/s) for ``layout``; a 4-node ring has none of NVIDIA's (its own baseline only)."""
    if layout == "ring" and nodes != 3:
        return None
    return THRESHOLDS.get(layout)


def _missing_tool_message(text, rc, nodes, run_from):
    """The warning of a run that found no mpirun (the host's) or no all_gather_perf; None when neither is missing."""
    where = ", ".join(nodes)
    if run_from == "host" and re.search(r"%s mpirun: command not found" % MARK, text):
        return ("No mpirun on %s, the host that starts the fabric test of %s: the test did not run; install OpenMPI on "
                "every node (sudo apt-get install -y openmpi-bin, as NVIDIA's NCCL runbook does), or set "
                "specdec_server_fabric_test: never to silence this." % (nodes[0], where))
    if not (rc == 127 or _NO_EXEC.search(text) or re.search(
            r"(?:all_gather_perf|%s \S+): (?:command )?not found|all_gather_perf.*No such file or directory" % MARK, text)):
        return None
    if run_from == "host":
        return ("No all_gather_perf on %s, the fabric test did not run: build nccl-tests on every node as NVIDIA's "
                "NCCL runbook does (~/nccl-tests, make MPI=1, against the host's NCCL and OpenMPI; the test looks in "
                "the PATH, then ~/nccl-tests/build and ~/nccl-tests_spark_cluster/build) or set "
                "specdec_server_fabric_test_binary to its path on the hosts, or set specdec_server_fabric_test: never "
                "to silence this; the collection never builds it during a run." % where)
    return ("No all_gather_perf on %s, the fabric test did not run: build nccl-tests once (git clone "
            "https://github.com/NVIDIA/nccl-tests; make MPI=1, against the engine image's NCCL and OpenMPI) and set "
            "specdec_server_fabric_test_binary to it, or set specdec_server_fabric_test: never to silence this; the "
            "collection never builds it during a run." % where)


def classify(result, layout, nodes, baseline=None, warn_fraction=0.8, run_from="container"):
    """The verdict of one fabric test run: ``{status, busbw, threshold, message}``, ``message`` one line (None on pass).

    ``result``: ``{rc, stdout, stderr, timed_out, timeout}`` of the run; ``nodes``: the deployment's nodes (one rank
    each, head first); ``baseline``: the figure recorded in the state file by an earlier pass (None: none yet); below
    ``warn_fraction`` of it is a warning; ``run_from``: ``container`` (the engine container's mpirun, TensorRT-LLM) or
    ``host`` (the host's, vLLM), for the messages. Statuses: pass, warn, fail, hang (no end within the timeout),
    missing_library (NCCL not on every node), missing_tool (no all_gather_perf on a node; on the host, no mpirun).
    """
    nodes = list(nodes)
    where = ", ".join(nodes)
    text = "%s\n%s" % (result.get("stdout") or "", result.get("stderr") or "")
    parsed = parse(result.get("stdout") or "")
    need = threshold(layout, len(nodes))
    verdict = {"status": "pass", "busbw": parsed["avg_busbw"], "threshold": need, "message": None}
    if result.get("timed_out"):
        verdict.update(status="hang", message=(
            "The fabric test (all_gather_perf, %d ranks on %s) did not finish within %s s: NCCL hangs (a pip NCCL, a "
            "node whose MTU or link speed changed, a peer not answering); run it again with NCCL_DEBUG=INFO in "
            "specdec_server_fabric_test_env, check ip -d link (MTU) and ethtool (speed) on every node, or raise "
            "specdec_server_fabric_test_timeout; nothing was started." % (len(nodes), where, result.get("timeout", "?"))))
        return verdict
    missing = _MISSING_LIB.search(text)
    if missing:
        verdict.update(status="missing_library", message=(
            "The fabric test cannot start on %s: %s: cannot open shared object file, NCCL is not installed on every "
            "node; install the same NCCL on each (NVIDIA's playbook-nccl builds it), point "
            "specdec_server_fabric_test_binary at an all_gather_perf built against the engine image's NCCL, or set "
            "specdec_server_fabric_test: never; nothing was started." % (where, missing.group(1))))
        return verdict
    daemon = _NO_DAEMON.search(text)
    # A node without orted (ssh's 127) is not a missing all_gather_perf.
    no_tool = _missing_tool_message(text, None if daemon else result.get("rc"), nodes, run_from)
    if no_tool:
        verdict.update(status="missing_tool", message=no_tool)
        return verdict
    problems = []
    if daemon:
        problems.append("mpirun could not start on every node over SSH (the %s SSH mesh of the ssh_mesh role: "
                        "passwordless ssh to each hostfile address%s)" % (
                            "host's" if run_from == "host" else "containers'",
                            ", and OpenMPI's orted on every host" if run_from == "host" else ""))
    if len(parsed["ranks"]) != len(nodes):
        problems.append("%d ranks reported, %d nodes in the deployment" % (len(parsed["ranks"]), len(nodes)))
    wrong = sum((r[side]["wrong"] or 0) for r in parsed["rows"] for side in ("out_of_place", "in_place"))
    if wrong or parsed["out_of_bounds"]:
        problems.append("%d wrong values (data corrupted in transit)" % max(wrong, parsed["out_of_bounds"] or 0))
    if result.get("rc"):
        problems.append("exit status %s" % result["rc"])
    if parsed["avg_busbw"] is None:
        problems.append("no '# Avg bus bandwidth' line (the run did not complete)")
    if problems:
        verdict.update(status="fail", message="The fabric test on %s failed: %s; nothing was started (specdec_server_fabric_test: never skips it)." % (
            where, "; ".join(problems)))
        return verdict
    busbw = float(parsed["avg_busbw"])
    if need is not None and busbw < need:
        verdict.update(status="fail", message=(
            "The fabric test on %s measured %.2f GB/s bus bandwidth, below the %.3f GB/s NVIDIA's runbook asks of a "
            "%s layout: check each node's MTU, link speed (200 Gb/s, not 100) and NCCL_IB_HCA (both RoCE twins); "
            "nothing was started (specdec_server_fabric_test: never skips it)." % (where, busbw, need, layout)))
        return verdict
    if baseline and busbw < warn_fraction * float(baseline):
        verdict.update(status="warn", message=(
            "The fabric test on %s measured %.2f GB/s bus bandwidth, below %d%% of the %.2f GB/s recorded before; "
            "something on the fabric changed (MTU, link speed, cabling)." % (
                where, busbw, round(warn_fraction * 100), float(baseline))))
    return verdict


# ---------------------------------------------------------------------------- running it on a pair


def key(layout, nodes, hosts):
    """What a baseline was measured on: the layout, the nodes (inventory names) and the hostfile addresses (one rank
    each, head first). Any change of them is a layout change: the test runs again before the next start."""
    return {"layout": layout, "nodes": list(nodes), "hosts": list(hosts)}


def _same_key(record, current):
    return isinstance(record, dict) and all(record.get(k) == current[k] for k in ("layout", "nodes", "hosts"))


def decide(mode, record, current, server_running):
    """Whether this start runs the fabric test: ``{"run": bool, "reason": str, "baseline": GB/s or None}``.

    ``mode``: specdec_server_fabric_test (auto, always, never); ``record``: the state file's ``fabric`` (None: never
    measured); ``current``: ``key(...)`` of the deployment now; ``server_running``: whether a server of the deployment
    runs (the test never runs then: its 16 GB buffers would compete with the loaded model for the unified memory).
    ``baseline`` is the recorded figure when it was measured on the same layout (the warning's reference), else None.
    """
    if mode not in MODES:
        raise ValueError("specdec_server_fabric_test must be one of %s, got %r" % (", ".join(MODES), mode))
    same = _same_key(record, current)
    baseline = record.get("busbw") if same else None
    if mode == "never":
        return {"run": False, "reason": "specdec_server_fabric_test is never", "baseline": baseline}
    if server_running:
        return {"run": False, "reason": "a server of the deployment runs (the test runs only before a start)",
                "baseline": baseline}
    if mode == "always":
        return {"run": True, "reason": "specdec_server_fabric_test is always", "baseline": baseline}
    if not isinstance(record, dict) or record.get("busbw") is None:
        return {"run": True, "reason": "no baseline in the state file (first start)", "baseline": None}
    if not same:
        changed = [k for k in ("layout", "nodes", "hosts") if record.get(k) != current[k]]
        return {"run": True, "reason": "the layout changed (%s) since the baseline of %s" % (
            ", ".join("%s %s -> %s" % (k, record.get(k), current[k]) for k in changed), record.get("measured_at")),
            "baseline": None}
    return {"run": False, "reason": "baseline %.2f GB/s measured at %s on this layout" % (
        float(record["busbw"]), record.get("measured_at")), "baseline": baseline}


# Both scripts' ``mpirun -x`` list: FORWARD, every NCCL_ and UCX_ variable set, and the names of
# specdec_server_fabric_test_env (SPARKOPS_FABRIC_TEST_FORWARD), each when it is set.
_FORWARD_LOOP = r"""forward=()
for v in %s $(compgen -e | grep -E '^(NCCL|UCX)_' || true) ${SPARKOPS_FABRIC_TEST_FORWARD:-}; do
  if [ -n "${!v:-}" ]; then forward+=(-x "$v"); fi
done
""" % " ".join(FORWARD)

# Runs INSIDE the engine container on the head (bash -c SCRIPT name BINARY RANKS TIMEOUT STATE_DIR LOCK_DIR ARGS...):
# under the server's lock (server.sh start and the supervisor take it), refuses while server.sh says a server runs,
# resolves the binary, forwards the fabric environment to the ssh-spawned ranks and bounds mpirun with timeout(1).
SCRIPT = r"""set -u
bin=$1 ranks=$2 limit=$3 state_dir=$4 lock_dir=$5
shift 5
mkdir -p "$lock_dir"
exec 9>>"$lock_dir/server.lock"
if ! flock -w 30 9; then echo "%(mark)s the server lock stays held (a server is being started)" >&2; exit %(runs)d; fi
if [ -f "$state_dir/server.sh" ] && bash "$state_dir/server.sh" status >/dev/null 2>&1; then
  echo "%(mark)s a server of the deployment runs" >&2; exit %(runs)d
fi
path=$(command -v "$bin") || { echo "%(mark)s $bin: command not found" >&2; exit 127; }
%(forward_loop)stimeout -k 10 "$limit" mpirun -np "$ranks" "${forward[@]}" "$path" "$@" 9>&-
""" % {"mark": MARK, "runs": SERVER_RUNS, "forward_loop": _FORWARD_LOOP}


def command(docker, container, binary, ranks, timeout, state_dir, env=None, lock_dir=LOCK_DIR):
    """The argv of the test: ``docker exec`` of SCRIPT in the head's engine container, which has the OpenMPI
    hostfile, the NCCL/UCX/OpenMPI environment (module_utils/_layout.fabric_env) and the container SSH mesh the
    server's mpirun uses. ``env``: specdec_server_fabric_test_env (given to the test, forwarded to every rank)."""
    env = dict(env or {})
    argv = [docker, "exec"]
    for name in sorted(env):
        argv += ["-e", "%s=%s" % (name, env[name])]
    if env:
        argv += ["-e", "SPARKOPS_FABRIC_TEST_FORWARD=%s" % " ".join(sorted(env))]
    return argv + [container, "bash", "-c", SCRIPT, "sparkops-fabric-test", str(binary), str(int(ranks)),
                   str(int(timeout)), str(state_dir), str(lock_dir)] + list(ARGS)


# ---------------------------------------------------------------------------- running it from the host (vLLM)

# Where NVIDIA's runbooks build nccl-tests and NCCL on the hosts, under the cluster user's home: playbook-nccl's
# (~/nccl-tests, ~/nccl/build; two Sparks, a switch) and the TRT-LLM cluster script's (~/nccl-tests_spark_cluster,
# ~/nccl_spark_cluster/build; its ring build). Looked in, in this order, when the binary is the default name and not in
# the PATH; the NCCL library directory beside it goes into LD_LIBRARY_PATH when that is not set.
RUNBOOK_BUILDS = (("nccl-tests/build/all_gather_perf", "nccl/build/lib"),
                  ("nccl-tests_spark_cluster/build/all_gather_perf", "nccl_spark_cluster/build/lib"))
# The rest of the runbook's LD_LIBRARY_PATH ($CUDA_HOME/lib64, $MPI_HOME/lib on a Spark), where they exist.
RUNBOOK_LIBS = ("/usr/local/cuda/lib64", "/usr/lib/aarch64-linux-gnu/openmpi/lib")
# The OpenMPI and UCX variables NVIDIA's NCCL runbook exports with the interface NCCL_SOCKET_IFNAME names.
HOST_IFNAME_ENV = ("UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include")
# mpirun's own settings on the host: ssh never asks for a password (a missing key fails at once, not at the timeout),
# and a cluster user root may run it (as in the engine containers).
HOST_MPI_ENV = {"OMPI_MCA_plm_rsh_args": "-o BatchMode=yes", "OMPI_ALLOW_RUN_AS_ROOT": "1",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

# Runs on the head HOST as the cluster user (bash -c HOST_SCRIPT name BINARY RANKS TIMEOUT HOSTS ARGS...): the host's
# mpirun -H ip1:1,ip2:1 (NVIDIA's NCCL runbook), the binary from the PATH or the runbook's build directories, the
# runbook's LD_LIBRARY_PATH when none is set, the NCCL/UCX environment forwarded to the ranks, bounded by timeout(1).
HOST_SCRIPT = r"""set -u
bin=$1 ranks=$2 limit=$3 hosts=$4
shift 4
command -v mpirun >/dev/null 2>&1 || { echo "%(mark)s mpirun: command not found" >&2; exit 127; }
lib=
path=$(command -v "$bin" 2>/dev/null) || path=
if [ -z "$path" ] && [ "$bin" = all_gather_perf ]; then
  for build in ${SPARKOPS_FABRIC_TEST_BUILDS:-}; do
    if [ -x "$HOME/${build%%%%:*}" ]; then path=$HOME/${build%%%%:*} lib=$HOME/${build#*:}; break; fi
  done
fi
[ -n "$path" ] || { echo "%(mark)s $bin: command not found" >&2; exit 127; }
if [ -z "${LD_LIBRARY_PATH:-}" ]; then
  ld=
  for d in $lib ${SPARKOPS_FABRIC_TEST_LIBS:-}; do if [ -d "$d" ]; then ld=${ld:+$ld:}$d; fi; done
  if [ -n "$ld" ]; then export LD_LIBRARY_PATH=$ld; fi
fi
%(forward_loop)stimeout -k 10 "$limit" mpirun -np "$ranks" -H "$hosts" "${forward[@]}" "$path" "$@"
""" % {"mark": MARK, "forward_loop": _FORWARD_LOOP}


def host_env(container_env=None, env=None):
    """The environment of the host run (``{NAME: value}``, added to the module's own).

    ``container_env``: the engine container's environment (trtllm_container_spec's ``env``: module_utils/_layout's
    fabric_env for the engine and the user's trtllm_container_env), of which the ``NCCL_`` entries are what the server's
    NCCL runs with (the bootstrap interface, NCCL_IB_HCA, a ring's routing). UCX's and OpenMPI's interface variables
    get NCCL_SOCKET_IFNAME's interfaces, as NVIDIA's NCCL runbook exports all three, unless the container names its own
    or NCCL_SOCKET_IFNAME is an exclusion (``^``) list. ``env``: specdec_server_fabric_test_env, last (it wins).
    """
    out = dict(HOST_MPI_ENV)
    container_env = dict(container_env or {})
    out.update({k: str(v) for k, v in container_env.items() if k.startswith(("NCCL_", "UCX_"))})
    ifname = out.get("NCCL_SOCKET_IFNAME", "")
    if ifname and not ifname.startswith("^"):
        for name in HOST_IFNAME_ENV:
            out.setdefault(name, str(container_env.get(name) or ifname.lstrip("=")))
    user = {k: str(v) for k, v in (env or {}).items()}
    out.update(user)
    out["SPARKOPS_FABRIC_TEST_FORWARD"] = " ".join(sorted(user))
    out["SPARKOPS_FABRIC_TEST_BUILDS"] = " ".join("%s:%s" % pair for pair in RUNBOOK_BUILDS)
    out["SPARKOPS_FABRIC_TEST_LIBS"] = " ".join(RUNBOOK_LIBS)
    return out


def host_command(binary, hosts, timeout):
    """The argv of the host run: HOST_SCRIPT with the hostfile's addresses as mpirun's ``-H ip1:1,ip2:1`` (one rank
    each, head first) and the runbook's arguments. Run it with ``host_env(...)`` added to the environment."""
    return ["bash", "-c", HOST_SCRIPT, "sparkops-fabric-test", str(binary), str(len(hosts)), str(int(timeout)),
            ",".join("%s:1" % h for h in hosts)] + list(ARGS)


def result_of(rc, stdout, stderr, timeout, timed_out=False):
    """The run as classify reads it; timeout(1) exits 124 (137 after its KILL) when the limit passed."""
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "timeout": timeout,
            "timed_out": bool(timed_out) or rc in (124, 137)}


def server_runs(result):
    """Whether the script refused because a server of the deployment runs (or is being started)."""
    return result.get("rc") == SERVER_RUNS and MARK in (result.get("stderr") or "")


def record(previous, current, verdict, now, binary):
    """The state file's ``fabric`` after a run: the baseline (``busbw``, ``measured_at``, what it was measured on,
    the runbook's figure) and the last run (``last``: ``busbw``, ``status``, ``measured_at``).

    A pass or a warning on a layout without a baseline makes this run the baseline; on the same layout the baseline
    stays (a later, lower figure is compared with it). Other verdicts keep ``previous`` as it was (None: none)."""
    if verdict["status"] not in ("pass", "warn"):
        return previous
    last = {"busbw": verdict["busbw"], "status": verdict["status"], "measured_at": now}
    if _same_key(previous, current) and previous.get("busbw") is not None:
        out = dict(previous)
        out["last"] = last
        return out
    out = dict(current)
    out.update({"busbw": verdict["busbw"], "threshold": verdict["threshold"], "measured_at": now,
                "binary": str(binary), "args": " ".join(ARGS), "last": last})
    return out


def hostfile_hosts(text):
    """The addresses of an OpenMPI hostfile (one a line, comments and slots= left out), in its order."""
    out = []
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line.split()[0])
    return out
