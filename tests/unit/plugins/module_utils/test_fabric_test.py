# -*- coding: utf-8 -*-
# The fabric test's parser and verdicts (issue 24, item 4): module_utils/_fabric_test.py. The log is a real
# recorded run (its source is named in the fixture's first lines).

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _fabric_test

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"
LOG = (FIXTURES / "all_gather_perf_gb10_direct.log").read_text()
PAIR = ["spark-1", "spark-2"]


def test_parses_the_recorded_gb10_run():
    parsed = _fabric_test.parse(LOG)
    assert parsed["version"] == "2.18.5" and parsed["nccl_library"] == "22809"
    assert parsed["ranks"] == [{"rank": 0, "host": "promaxgb10-4c75", "device": 0},
                               {"rank": 1, "host": "promaxgb10-4c99", "device": 0}]
    assert parsed["rows"] == [{
        "size": 17179869184, "count": 2147483648, "type": "float", "redop": "none", "root": "-1",
        "out_of_place": {"time_us": 374425.0, "algbw": 45.88, "busbw": 22.94, "wrong": 0},
        "in_place": {"time_us": 373792.0, "algbw": 45.96, "busbw": 22.98, "wrong": 0}}]
    assert parsed["out_of_bounds"] == 0 and parsed["avg_busbw"] == 22.9611 and parsed["concluded"] is True


def test_mpirun_prefixed_lines_are_read():
    prefixed = "\n".join("[1,0]<stdout>:" + line for line in LOG.splitlines())
    assert _fabric_test.parse(prefixed)["avg_busbw"] == 22.9611


def test_the_recorded_pair_passes_the_direct_threshold():
    verdict = _fabric_test.classify({"rc": 0, "stdout": LOG}, "direct", PAIR)
    assert verdict == {"status": "pass", "busbw": 22.9611, "threshold": 21.875, "message": None}


def test_thresholds_per_layout():
    assert _fabric_test.threshold("direct", 2) == 21.875
    assert _fabric_test.threshold("switch", 4) == 21.875
    assert _fabric_test.threshold("ring", 3) == 10.0
    assert _fabric_test.threshold("ring", 4) is None


def test_below_the_runbook_figure_fails_naming_nodes_and_figure():
    slow = LOG.replace("# Avg bus bandwidth    : 22.9611", "# Avg bus bandwidth    : 11.4805")
    verdict = _fabric_test.classify({"rc": 0, "stdout": slow}, "direct", PAIR)
    assert verdict["status"] == "fail" and verdict["busbw"] == 11.4805
    assert verdict["message"].startswith("The fabric test on spark-1, spark-2 measured 11.48 GB/s bus bandwidth, "
                                         "below the 21.875 GB/s")
    # The same figure passes a 3-node ring (10 GB/s), whose runbook asks less.
    ring = slow.replace("#  Rank  1 Group", "#  Rank  2 Group  0 Pid  1 on s3 device  0 [000f:01:00] NVIDIA GB10\n"
                        "#  Rank  1 Group")
    assert _fabric_test.classify({"rc": 0, "stdout": ring}, "ring", ["s1", "s2", "s3"])["status"] == "pass"


def test_baseline_drop_warns():
    verdict = _fabric_test.classify({"rc": 0, "stdout": LOG}, "direct", PAIR, baseline=30.0)
    assert verdict["status"] == "warn" and "below 80% of the 30.00 GB/s recorded before" in verdict["message"]
    assert _fabric_test.classify({"rc": 0, "stdout": LOG}, "direct", PAIR, baseline=24.0)["status"] == "pass"


def test_missing_nccl_library():
    stderr = ("/opt/nccl-tests/build/all_gather_perf: error while loading shared libraries: libnccl.so.2: cannot open "
              "shared object file: No such file or directory\n")
    verdict = _fabric_test.classify({"rc": 127, "stdout": "", "stderr": stderr}, "direct", PAIR)
    assert verdict["status"] == "missing_library"
    assert verdict["message"].startswith("The fabric test cannot start on spark-1, spark-2: libnccl.so.2: cannot open "
                                         "shared object file")


def test_missing_tool():
    verdict = _fabric_test.classify({"rc": 127, "stdout": "", "stderr": "bash: all_gather_perf: command not found\n"},
                                    "switch", PAIR)
    assert verdict["status"] == "missing_tool" and "build nccl-tests once" in verdict["message"]
    assert "specdec_server_fabric_test_binary" in verdict["message"]


def test_hang():
    head = LOG.split("# Out of bounds")[0]
    verdict = _fabric_test.classify({"rc": None, "stdout": head, "timed_out": True, "timeout": 10}, "direct", PAIR)
    assert verdict["status"] == "hang"
    assert verdict["message"].startswith("The fabric test (all_gather_perf, 2 ranks on spark-1, spark-2) did not finish "
                                         "within 10 s")


@pytest.mark.parametrize("mutate,fragment", [
    (lambda t: t.split("# Out of bounds")[0], "no '# Avg bus bandwidth' line"),
    (lambda t: t.replace("22.94       0", "22.94       3").replace("values : 0 OK", "values : 3 FAILED"),
     "3 wrong values"),
    (lambda t: t.replace("#  Rank  1 Group  0 Pid  30808 on promaxgb10-4c99 device  0 [000f:01:00] NVIDIA GB10\n", ""),
     "1 ranks reported, 2 nodes in the deployment"),
])
def test_failures(mutate, fragment):
    verdict = _fabric_test.classify({"rc": 0, "stdout": mutate(LOG)}, "direct", PAIR)
    assert verdict["status"] == "fail" and fragment in verdict["message"], verdict
    assert "\n" not in verdict["message"]


# ---------------------------------------------------------------------------- when it runs, how, and the baseline
HOSTS = ["192.168.100.10", "192.168.100.11"]
KEY = _fabric_test.key("direct", PAIR, HOSTS)
BASELINE = dict(KEY, busbw=22.96, measured_at="2026-11-28T05:00:00Z", threshold=21.875)


@pytest.mark.parametrize("mode, record, running, run, reason", [
    ("auto", None, False, True, "no baseline in the state file (first start)"),
    ("auto", BASELINE, False, False, "baseline 22.96 GB/s measured at 2026-11-28T05:00:00Z on this layout"),
    ("auto", dict(BASELINE, layout="switch"), False, True, "the layout changed (layout switch -> direct)"),
    ("auto", dict(BASELINE, hosts=["192.168.100.1", "192.168.100.2"]), False, True, "the layout changed (hosts"),
    ("auto", dict(BASELINE, nodes=["spark-1", "spark-3"]), False, True, "the layout changed (nodes"),
    ("auto", None, True, False, "a server of the deployment runs"),
    ("always", BASELINE, False, True, "specdec_server_fabric_test is always"),
    ("always", BASELINE, True, False, "a server of the deployment runs"),
    ("never", None, False, False, "specdec_server_fabric_test is never"),
])
def test_decide_before_the_first_start_and_after_a_layout_change_never_while_serving(mode, record, running, run,
                                                                                     reason):
    decision = _fabric_test.decide(mode, record, KEY, running)
    assert decision["run"] is run and decision["reason"].startswith(reason), decision


def test_the_baseline_compared_is_the_same_layouts_only():
    assert _fabric_test.decide("always", BASELINE, KEY, False)["baseline"] == 22.96
    assert _fabric_test.decide("auto", dict(BASELINE, layout="switch"), KEY, False)["baseline"] is None
    with pytest.raises(ValueError, match="auto, always, never"):
        _fabric_test.decide("sometimes", None, KEY, False)


def test_record_keeps_the_first_pass_as_baseline_and_the_last_run():
    passed = _fabric_test.classify({"rc": 0, "stdout": LOG}, "direct", PAIR)
    first = _fabric_test.record(None, KEY, passed, "2026-11-28T06:00:00Z", "all_gather_perf")
    assert first == dict(KEY, busbw=22.9611, threshold=21.875, measured_at="2026-11-28T06:00:00Z",
                         binary="all_gather_perf", args="-b 16G -e 16G -f 2",
                         last={"busbw": 22.9611, "status": "pass", "measured_at": "2026-11-28T06:00:00Z"})
    slower = LOG.replace("# Avg bus bandwidth    : 22.9611", "# Avg bus bandwidth    : 22.0")
    warned = _fabric_test.classify({"rc": 0, "stdout": slower}, "direct", PAIR, baseline=30.0)
    again = _fabric_test.record(dict(first, busbw=30.0), KEY, warned, "2026-11-28T07:00:00Z", "all_gather_perf")
    assert again["busbw"] == 30.0 and again["measured_at"] == "2026-11-28T06:00:00Z"
    assert again["last"] == {"busbw": 22.0, "status": "warn", "measured_at": "2026-11-28T07:00:00Z"}
    # A new layout: this run is its baseline. A failure keeps what was recorded.
    moved = _fabric_test.record(dict(first, layout="switch"), KEY, passed, "2026-11-28T08:00:00Z", "x")
    assert moved["layout"] == "direct" and moved["measured_at"] == "2026-11-28T08:00:00Z"
    failed = {"status": "fail", "busbw": 3.0, "threshold": 21.875, "message": "..."}
    assert _fabric_test.record(first, KEY, failed, "2026-11-28T09:00:00Z", "x") is first
    assert _fabric_test.record(None, KEY, failed, "2026-11-28T09:00:00Z", "x") is None


def test_hostfile_hosts():
    text = "# Managed by sparkops.specdec (trtllm_container role): one fabric address per node, head first.\n" \
           "192.168.100.10\n192.168.100.11 slots=1\n\n"
    assert _fabric_test.hostfile_hosts(text) == HOSTS


def test_the_command_is_a_docker_exec_of_the_script_in_the_engine_container():
    argv = _fabric_test.command("/usr/bin/docker", "trtllm-multinode", "all_gather_perf", 2, 10, "/var/lib/s",
                                {"NCCL_DEBUG": "INFO"})
    assert argv[:6] == ["/usr/bin/docker", "exec", "-e", "NCCL_DEBUG=INFO", "-e",
                        "SPARKOPS_FABRIC_TEST_FORWARD=NCCL_DEBUG"]
    assert argv[6:9] == ["trtllm-multinode", "bash", "-c"] and argv[9] == _fabric_test.SCRIPT
    assert argv[10:] == ["sparkops-fabric-test", "all_gather_perf", "2", "10", "/var/lib/s",
                         "/run/sparkops-specdec", "-b", "16G", "-e", "16G", "-f", "2"]
    assert _fabric_test.command("docker", "c", "/opt/agp", 4, 300, "/s")[:4] == ["docker", "exec", "c", "bash"]


def _script_env(tmp_path, monkeypatch, binary_text):
    """A PATH with a fake mpirun (records its argv, runs the binary after its options) and an all_gather_perf."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mpirun").write_text(
        "#!/bin/bash\nprintf '%%s\\n' \"$@\" > %s/mpirun.argv\n"
        "while [ $# -gt 0 ]; do case $1 in -np|-x) shift 2;; *) break;; esac; done\nexec \"$@\"\n" % tmp_path)
    (bindir / "all_gather_perf").write_text(binary_text)
    for name in ("mpirun", "all_gather_perf"):
        (bindir / name).chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    state = tmp_path / "state"
    state.mkdir()
    return state


def _run_script(tmp_path, state, timeout=10, env=None, binary="all_gather_perf"):
    argv = _fabric_test.command("docker", "c", binary, 2, timeout, str(state), env, lock_dir=str(tmp_path / "run"))
    proc = subprocess.run(argv[argv.index("bash"):], capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, **(env or {}), SPARKOPS_FABRIC_TEST_FORWARD=" ".join(env or {})))
    return _fabric_test.result_of(proc.returncode, proc.stdout, proc.stderr, timeout)


def test_the_script_runs_mpirun_with_the_fabric_env_forwarded(tmp_path, monkeypatch):
    state = _script_env(tmp_path, monkeypatch, "#!/bin/sh\ncat %s\n" % (FIXTURES / "all_gather_perf_gb10_direct.log"))
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "enp1s0f1np1,enP2p1s0f1np1")
    monkeypatch.setenv("UCX_NET_DEVICES", "enp1s0f1np1,enP2p1s0f1np1")
    monkeypatch.setenv("NCCL_IB_SUBNET_AWARE_ROUTING", "1")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/lib")
    result = _run_script(tmp_path, state, env={"NCCL_DEBUG": "INFO"})
    assert result["rc"] == 0 and _fabric_test.classify(result, "direct", PAIR)["status"] == "pass"
    argv = (tmp_path / "mpirun.argv").read_text().split("\n")
    forwarded = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert {"LD_LIBRARY_PATH", "NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "NCCL_IB_SUBNET_AWARE_ROUTING",
            "NCCL_DEBUG"} <= set(forwarded)
    assert argv[:2] == ["-np", "2"] and argv[-7:-1] == ["-b", "16G", "-e", "16G", "-f", "2"]
    assert argv[-8] == str(tmp_path / "bin" / "all_gather_perf")


def test_the_script_refuses_while_the_server_runs(tmp_path, monkeypatch):
    state = _script_env(tmp_path, monkeypatch, "#!/bin/sh\necho ran > %s/ran\n" % tmp_path)
    (state / "server.sh").write_text('[ "$1" = status ] && { echo "running (pid 1)"; exit 0; }\nexit 2\n')
    result = _run_script(tmp_path, state)
    assert _fabric_test.server_runs(result) and "a server of the deployment runs" in result["stderr"]
    assert not (tmp_path / "ran").exists() and not (tmp_path / "mpirun.argv").exists()
    # server.sh status says stopped (exit 3): it runs.
    (state / "server.sh").write_text('[ "$1" = status ] && { echo stopped; exit 3; }\nexit 2\n')
    assert not _fabric_test.server_runs(_run_script(tmp_path, state)) and (tmp_path / "ran").exists()


def test_the_script_reports_a_missing_binary_as_missing_tool(tmp_path, monkeypatch):
    state = _script_env(tmp_path, monkeypatch, "#!/bin/sh\n")
    result = _run_script(tmp_path, state, binary="/opt/nccl-tests/build/all_gather_perf")
    assert result["rc"] == 127 and _fabric_test.classify(result, "direct", PAIR)["status"] == "missing_tool"


def test_the_script_bounds_a_hang_with_timeout(tmp_path, monkeypatch):
    state = _script_env(tmp_path, monkeypatch, "#!/bin/sh\necho '# Using devices'\nexec sleep 60\n")
    result = _run_script(tmp_path, state, timeout=1)
    assert result["rc"] == 124 and result["timed_out"] is True
    assert _fabric_test.classify(result, "direct", PAIR)["status"] == "hang"


# ---------------------------------------------------------------------------- from the host (engine vllm)

def test_host_command_is_the_runbooks_mpirun_dash_h_one_slot_each():
    argv = _fabric_test.host_command("all_gather_perf", HOSTS, 10)
    assert argv[:3] == ["bash", "-c", _fabric_test.HOST_SCRIPT]
    assert argv[3:] == ["sparkops-fabric-test", "all_gather_perf", "2", "10", "192.168.100.10:1,192.168.100.11:1",
                        "-b", "16G", "-e", "16G", "-f", "2"]


def test_host_env_takes_the_containers_nccl_and_sets_ucx_and_openmpi_as_the_runbook():
    env = _fabric_test.host_env({"NCCL_SOCKET_IFNAME": "enP7s7", "GLOO_SOCKET_IFNAME": "enP7s7",
                                 "NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_NET_PLUGIN": "none",
                                 "VLLM_HOST_IP": "10.0.0.1"}, {"NCCL_DEBUG": "INFO"})
    assert {k: env[k] for k in ("UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include")} == {
        "UCX_NET_DEVICES": "enP7s7", "OMPI_MCA_btl_tcp_if_include": "enP7s7", "OMPI_MCA_oob_tcp_if_include": "enP7s7"}
    assert env["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1" and env["NCCL_NET_PLUGIN"] == "none"
    assert "GLOO_SOCKET_IFNAME" not in env and "VLLM_HOST_IP" not in env
    assert env["NCCL_DEBUG"] == "INFO" and env["SPARKOPS_FABRIC_TEST_FORWARD"] == "NCCL_DEBUG"
    assert env["SPARKOPS_FABRIC_TEST_BUILDS"].split()[0] == "nccl-tests/build/all_gather_perf:nccl/build/lib"
    # An exclusion list names no interface OpenMPI could include; "=" (exact names) is NCCL's only.
    assert "OMPI_MCA_btl_tcp_if_include" not in _fabric_test.host_env({"NCCL_SOCKET_IFNAME": "^docker,lo"})
    assert _fabric_test.host_env({"NCCL_SOCKET_IFNAME": "=eth0"})["UCX_NET_DEVICES"] == "eth0"
    # The user's own value wins.
    assert _fabric_test.host_env({"NCCL_SOCKET_IFNAME": "eth0"}, {"UCX_NET_DEVICES": "mlx5_0:1"})[
        "UCX_NET_DEVICES"] == "mlx5_0:1"


OPENMPI_NO_EXEC = """--------------------------------------------------------------------------
mpirun was unable to launch the specified application as it could not access
or execute an executable:

Executable: /home/spark/nccl-tests/build/all_gather_perf
Node: 192.168.100.11

while attempting to start process rank 1.
--------------------------------------------------------------------------
"""
OPENMPI_NO_DAEMON = """bash: line 1: orted: command not found
--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
This usually is caused by:
"""


def test_a_node_without_the_binary_is_missing_tool_and_one_without_ssh_a_failure():
    verdict = _fabric_test.classify({"rc": 1, "stdout": "", "stderr": OPENMPI_NO_EXEC}, "direct", PAIR, run_from="host")
    assert verdict["status"] == "missing_tool" and "~/nccl-tests/build" in verdict["message"]
    daemon = _fabric_test.classify({"rc": 127, "stdout": "", "stderr": OPENMPI_NO_DAEMON}, "direct", PAIR,
                                   run_from="host")
    assert daemon["status"] == "fail" and "mpirun could not start on every node over SSH (the host's SSH mesh" \
        in daemon["message"]
    denied = _fabric_test.classify({"rc": 255, "stdout": "", "stderr": "spark@192.168.100.11: Permission denied "
                                    "(publickey).\n"}, "direct", PAIR)
    assert denied["status"] == "fail" and "the containers' SSH mesh" in denied["message"]


def test_no_mpirun_on_the_host_names_openmpi():
    stderr = "%s mpirun: command not found\n" % _fabric_test.MARK
    verdict = _fabric_test.classify({"rc": 127, "stdout": "", "stderr": stderr}, "direct", PAIR, run_from="host")
    assert verdict["status"] == "missing_tool" and verdict["message"].startswith("No mpirun on spark-1")
