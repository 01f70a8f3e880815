# -*- coding: utf-8 -*-
# sparkops.specdec.fabric_test on the head: when it runs (first start, layout change, never while serving, check
# mode), the docker exec of the test (a fake docker runs the in-container script here, with a fake mpirun and an
# all_gather_perf that prints the recorded two-Spark log at a figure the test sets), the verdicts it stops on, the
# warnings it gives, and the record the role keeps in the state file.

from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest

from ansible.module_utils import basic

from ansible_collections.sparkops.specdec.plugins.module_utils import _fabric_test
from ansible_collections.sparkops.specdec.plugins.modules import fabric_test as m
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import module_failure, run_module

LOG = (pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"
       / "all_gather_perf_gb10_direct.log").read_text()
PAIR = ["spark-1", "spark-2"]
HOSTS = ["192.168.100.10", "192.168.100.11"]


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A state dir with the hostfile, and docker/mpirun/all_gather_perf fakes first on PATH. ``lab.figure(text)``
    sets what all_gather_perf prints (the recorded log at another ``# Avg bus bandwidth``, or a hang)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    (state / _fabric_test.HOSTFILE).write_text("# Managed by sparkops.specdec\n%s\n%s\n" % tuple(HOSTS))
    # docker exec [-e K=V]... CONTAINER CMD...: runs CMD here with the variables (and records the call).
    (bindir / "docker").write_text(
        "#!/bin/bash\nprintf '%%q ' \"$@\" >> %s/docker.calls\necho >> %s/docker.calls\nshift\n"
        "while [ \"$1\" = -e ]; do export \"$2\"; shift 2; done\nshift\nexec \"$@\"\n" % (tmp_path, tmp_path))
    # mpirun [-np N] [-H HOSTS] [-x NAME]... CMD...: records its argv and environment, runs CMD here.
    (bindir / "mpirun").write_text(
        "#!/bin/bash\nprintf '%%s\\n' \"$@\" > %s/mpirun.argv\nenv > %s/mpirun.env\n"
        "while [ $# -gt 0 ]; do case $1 in -np|-x|-H) shift 2;; *) break;; esac; done\nexec \"$@\"\n"
        % (tmp_path, tmp_path))
    out = tmp_path / "out.txt"
    (bindir / "all_gather_perf").write_text("#!/bin/sh\ncat %s\n[ -f %s.hang ] && exec sleep 60\nexit 0\n" % (out, out))
    for name in ("docker", "mpirun", "all_gather_perf"):
        (bindir / name).chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    monkeypatch.setattr(_fabric_test, "LOCK_DIR", str(tmp_path / "run"))
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: warnings.append(warning))

    class Lab(object):
        def figure(self, busbw=None, hang=False):
            text = LOG if busbw is None else LOG.replace("22.9611", str(busbw))
            out.write_text(LOG.split("# Out of bounds")[0] if hang else text)
            if hang:
                pathlib.Path(str(out) + ".hang").write_text("")

        def calls(self):
            path = tmp_path / "docker.calls"
            return path.read_text().splitlines() if path.exists() else []

    lab = Lab()
    lab.state_dir, lab.warnings = str(state), warnings
    lab.figure()
    return lab


def args(lab, **extra):
    base = {"state_dir": lab.state_dir, "layout": "direct", "nodes": PAIR, "timeout": 10}
    base.update(extra)
    return base


def test_the_first_start_runs_it_and_returns_the_baseline(lab):
    result = run_module(m, args(lab))
    test = result["fabric_test"]
    assert test["ran"] is True and test["status"] == "pass" and test["busbw"] == 22.9611
    assert test["reason"] == "no baseline in the state file (first start)" and test["hosts"] == HOSTS
    record = result["record"]
    assert record["busbw"] == 22.9611 and record["layout"] == "direct" and record["nodes"] == PAIR
    assert record["hosts"] == HOSTS and record["threshold"] == 21.875 and record["measured_at"].endswith("Z")
    assert result["changed"] is False and lab.warnings == []
    assert len(lab.calls()) == 1 and lab.calls()[0].startswith("exec trtllm-multinode bash -c")


def test_a_recorded_baseline_of_this_layout_skips_it_without_a_docker_call(lab):
    first = run_module(m, args(lab))["record"]
    again = run_module(m, args(lab, state={"fabric": first}))
    assert again["fabric_test"]["ran"] is False and again["fabric_test"]["reason"].startswith("baseline 22.96 GB/s")
    assert again["record"] == first and len(lab.calls()) == 1
    # Another hostfile (a layout change): it runs again, and this run is the new baseline.
    pathlib.Path(lab.state_dir, "openmpi-hostfile").write_text("192.168.100.1\n192.168.100.2\n")
    moved = run_module(m, args(lab, state={"fabric": first}))
    assert moved["fabric_test"]["ran"] is True and moved["fabric_test"]["reason"].startswith("the layout changed")
    assert moved["record"]["hosts"] == ["192.168.100.1", "192.168.100.2"]


def test_never_while_a_server_runs_nor_in_check_mode_nor_when_never(lab):
    assert run_module(m, args(lab, server_running=True))["fabric_test"]["reason"].startswith("a server of the")
    checked = run_module(m, args(lab), check=True)["fabric_test"]
    assert checked["ran"] is False and checked["reason"].startswith("check mode: would run")
    assert run_module(m, args(lab, mode="never"))["fabric_test"]["ran"] is False
    assert lab.calls() == []


def test_a_server_found_running_in_the_container_is_not_a_failure(lab):
    pathlib.Path(lab.state_dir, "server.sh").write_text('[ "$1" = status ] && exit 0\nexit 2\n')
    result = run_module(m, args(lab))
    assert result["fabric_test"]["ran"] is False and result["record"] is None
    assert result["fabric_test"]["reason"] == "not run: a server of the deployment runs"


def test_below_the_runbook_figure_fails_with_one_line_naming_nodes_and_figure(lab):
    lab.figure(11.4805)
    result = module_failure(m, args(lab))
    assert result["msg"].startswith("The fabric test on spark-1, spark-2 measured 11.48 GB/s bus bandwidth, below "
                                    "the 21.875 GB/s NVIDIA's runbook asks of a direct layout")
    assert "\n" not in result["msg"] and result["fabric_test"]["status"] == "fail" and result["record"] is None


def test_a_hang_fails_after_the_timeout(lab):
    lab.figure(hang=True)
    result = module_failure(m, args(lab, timeout=1))
    assert result["msg"].startswith("The fabric test (all_gather_perf, 2 ranks on spark-1, spark-2) did not finish "
                                    "within 1 s")
    assert result["fabric_test"]["status"] == "hang" and result["fabric_test"]["seconds"] < 20


def test_a_missing_binary_warns_once_and_goes_on(lab):
    result = run_module(m, args(lab, binary="/opt/nccl-tests/build/all_gather_perf"))
    assert result["fabric_test"]["status"] == "missing_tool" and result["record"] is None
    assert len(lab.warnings) == 1 and "specdec_server_fabric_test_binary" in lab.warnings[0]


def test_a_missing_nccl_library_fails(lab, tmp_path):
    broken = tmp_path / "bin" / "agp_nolib"
    broken.write_text("#!/bin/sh\necho '%s: error while loading shared libraries: libnccl.so.2: cannot open shared "
                      "object file: No such file or directory' >&2\nexit 127\n" % broken)
    broken.chmod(0o755)
    result = module_failure(m, args(lab, binary=str(broken)))
    assert result["fabric_test"]["status"] == "missing_library" and "libnccl.so.2" in result["msg"]


def test_below_a_fraction_of_the_baseline_warns(lab):
    baseline = dict(_fabric_test.key("direct", PAIR, HOSTS), busbw=30.0, measured_at="2026-11-28T05:00:00Z")
    result = run_module(m, args(lab, mode="always", state={"fabric": baseline}, warn_fraction=0.8))
    assert result["fabric_test"]["status"] == "warn" and result["record"]["busbw"] == 30.0
    assert result["record"]["last"]["busbw"] == 22.9611 and "below 80% of the 30.00 GB/s" in lab.warnings[0]


def test_the_extra_env_reaches_the_test(lab, tmp_path):
    (tmp_path / "bin" / "all_gather_perf").write_text("#!/bin/sh\necho \"NCCL_DEBUG=$NCCL_DEBUG\" >&2\ncat %s\n"
                                                      % (tmp_path / "out.txt"))
    result = run_module(m, args(lab, env={"NCCL_DEBUG": "INFO"}))
    assert "NCCL_DEBUG=INFO" in result["fabric_test"]["stderr"]
    assert "-e NCCL_DEBUG=INFO" in lab.calls()[0]


def test_no_hostfile_fails_with_one_line(lab):
    os.remove(os.path.join(lab.state_dir, "openmpi-hostfile"))
    result = module_failure(m, args(lab))
    assert result["msg"].startswith("The fabric test needs the OpenMPI hostfile") and "\n" not in result["msg"]
    assert json.dumps(result)  # JSON-serialisable as Ansible returns it


# ---------------------------------------------------------------------------- from the host (engine vllm)

# The engine container's environment of a vLLM pair (module_utils/_container.container_spec: fabric_env for vllm).
VLLM_ENV = {"NCCL_SOCKET_IFNAME": "enp1s0f1np1,enP2p1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1,enP2p1s0f1np1",
            "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "VLLM_HOST_IP": "192.168.100.10", "HF_HUB_OFFLINE": "1"}


def _mpirun_env(tmp_path):
    return dict(line.split("=", 1) for line in (tmp_path / "mpirun.env").read_text().splitlines() if "=" in line)


def test_a_vllm_pair_runs_it_from_the_host_with_the_containers_nccl_env_and_no_docker(lab, tmp_path):
    result = run_module(m, args(lab, run_from="host", container_env=VLLM_ENV, env={"NCCL_DEBUG": "INFO"}))
    test = result["fabric_test"]
    assert test["ran"] is True and test["status"] == "pass" and test["busbw"] == 22.9611 and test["hosts"] == HOSTS
    assert result["record"]["busbw"] == 22.9611 and result["record"]["hosts"] == HOSTS and lab.calls() == []
    argv = (tmp_path / "mpirun.argv").read_text().splitlines()
    assert argv[:4] == ["-np", "2", "-H", "192.168.100.10:1,192.168.100.11:1"]
    assert argv[-7:] == [str(tmp_path / "bin" / "all_gather_perf"), "-b", "16G", "-e", "16G", "-f", "2"]
    forwarded = {argv[i + 1] for i, a in enumerate(argv) if a == "-x"}
    assert {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "UCX_NET_DEVICES", "NCCL_DEBUG"} <= forwarded
    assert not forwarded & {"GLOO_SOCKET_IFNAME", "VLLM_HOST_IP", "HF_HUB_OFFLINE"}
    env = _mpirun_env(tmp_path)
    # NVIDIA's NCCL runbook: UCX_NET_DEVICES, NCCL_SOCKET_IFNAME and OMPI_MCA_btl_tcp_if_include on the same interfaces.
    assert env["OMPI_MCA_btl_tcp_if_include"] == env["UCX_NET_DEVICES"] == "enp1s0f1np1,enP2p1s0f1np1"
    assert env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1" and env["OMPI_MCA_plm_rsh_args"] == "-o BatchMode=yes"
    assert "GLOO_SOCKET_IFNAME" not in env and "VLLM_HOST_IP" not in env


def test_the_host_run_finds_the_runbooks_build_and_its_nccl_library(lab, tmp_path, monkeypatch):
    home = tmp_path / "home"
    build = home / "nccl-tests" / "build"
    build.mkdir(parents=True)
    (home / "nccl" / "build" / "lib").mkdir(parents=True)
    os.rename(str(tmp_path / "bin" / "all_gather_perf"), str(build / "all_gather_perf"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    result = run_module(m, args(lab, run_from="host", container_env=VLLM_ENV))
    assert result["fabric_test"]["status"] == "pass"
    argv = (tmp_path / "mpirun.argv").read_text().splitlines()
    assert argv[-7] == str(build / "all_gather_perf") and "LD_LIBRARY_PATH" in argv
    assert _mpirun_env(tmp_path)["LD_LIBRARY_PATH"].split(":")[0] == str(home / "nccl" / "build" / "lib")
    # The user's LD_LIBRARY_PATH wins.
    run_module(m, args(lab, run_from="host", container_env=VLLM_ENV, env={"LD_LIBRARY_PATH": "/opt/nccl/lib"}))
    assert _mpirun_env(tmp_path)["LD_LIBRARY_PATH"] == "/opt/nccl/lib"


def test_no_mpirun_on_the_host_warns_once_naming_openmpi_and_goes_on(lab, tmp_path, monkeypatch):
    os.remove(str(tmp_path / "bin" / "mpirun"))
    shell = tmp_path / "shell"
    shell.mkdir()
    for tool in ("bash", "env"):
        os.symlink(shutil.which(tool), str(shell / tool))
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", shell))
    result = run_module(m, args(lab, run_from="host", container_env=VLLM_ENV))
    assert result["fabric_test"]["status"] == "missing_tool" and result["record"] is None
    assert len(lab.warnings) == 1 and lab.warnings[0].startswith("No mpirun on spark-1, the host that starts the "
                                                                 "fabric test of spark-1, spark-2")
    assert "openmpi-bin" in lab.warnings[0]
