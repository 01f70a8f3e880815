# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE module_util sparkops.specdec.plugins.module_utils._preflight: the tier-2
# preflight checks (parsing of the node probe, every check's pass/fail/warn/skip and message, the
# cross-node comparisons, the budgets, the summary and the verdict). The messages asserted here are
# the ones molecule/preflight_faults asserts on the lab, plus the cases the lab cannot show.

from __future__ import annotations

import base64
import copy
import json

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _preflight

GIB = 1024 ** 3
HOSTS = ["spark-1", "spark-2"]
IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12"
IMAGE_ID = "sha256:" + "a" * 64
PLAN = {
    "deployment": {"image": IMAGE, "topology": "two_sparks"},
    "plan": {
        "port": 8355, "tp_size": 2,
        "models": [
            {"role": "target", "repo": "nvidia/Qwen3-235B-A22B-FP4", "revision": "main", "local_dir": None},
            {"role": "draft", "repo": "nvidia/Qwen3-235B-A22B-Eagle3", "revision": "main",
             "local_dir": "sparkops-drafts/nvidia--Qwen3-235B-A22B-Eagle3"},
        ],
    },
}
SETTINGS = {"container": "trtllm-multinode", "ssh_port": 2233, "hf_cache_dir": "", "gpus": {h: False for h in HOSTS}}
IFNAMES = "enp1s0f1np1,enP2p1s0f1np1"
ENV_OK = json.dumps([{"Id": "c0ffee", "Config": {"Env": [
    "PATH=/usr/bin", "NCCL_SOCKET_IFNAME=%s" % IFNAMES, "UCX_NET_DEVICES=%s" % IFNAMES,
    "OMPI_MCA_btl_tcp_if_include=%s" % IFNAMES]}}])
DOCKER_INFO = """Client:
 Context:    default
Server:
 Containers: 1
 Runtimes: io.containerd.runc.v2 io.containerd.runtime.v1.linux runc
 Default Runtime: runc
"""


def image_json(image_id):
    return json.dumps([{"Id": image_id, "RepoTags": [IMAGE], "Config": {"Env": ["PATH=/usr/bin"]}}])


HF_OK = [{"item": {"repo": "nvidia/Qwen3-235B-A22B-FP4"}, "bytes_total": 100 * GIB, "changed": False},
         {"item": {"repo": "nvidia/Qwen3-235B-A22B-Eagle3"}, "bytes_total": 2 * GIB, "changed": False}]
CACHE = "/home/spark/.cache/huggingface"


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def line(name, rc=0, out="", err=""):
    return "%s\t%d\t%s\t%s" % (name, rc, _b64(out), _b64(err))


def user_part(**over):
    cmds = {
        "docker_ps": (0, "abc123", ""),
        "runtimes": (0, DOCKER_INFO, ""),
        "image": (0, image_json(IMAGE_ID), ""),
        "env": (0, ENV_OK, ""),
        "user": (0, "spark", ""),
        "clock": (1, "", "System has not been booted with systemd as init system (PID 1). Can't operate.\n"
                  "Failed to connect to bus: Host is down"),
        "meminfo": (0, "MemTotal:       131072000 kB\nMemAvailable:   120000000 kB\n", ""),
        "hostfile": (0, "# Managed by sparkops.specdec\n192.168.100.10\n192.168.100.11\n", ""),
        "disk_free": (0, str(500 * GIB), ""),
        "cache": (0, "%d\t%s/hub/models--nvidia--Qwen3-235B-A22B-FP4\n%d\t%s/hub\n" % (40 * GIB, CACHE, 40 * GIB, CACHE), ""),
    }
    cmds.update(over)
    return {"item": "user", "rc": 0, "stdout": "\n".join(line(k, *v) for k, v in cmds.items())}


def root_part(**over):
    cmds = {
        "ours": (0, "PID\n4242\n4243\n", ""),
        "listen": (0, 'LISTEN 0 5 0.0.0.0:8355 0.0.0.0:* users:(("trtllm-serve",pid=4242,fd=3))\n'
                      'LISTEN 0 128 0.0.0.0:2233 0.0.0.0:* users:(("sshd",pid=4243,fd=3))\n'
                      'LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=12,fd=3))\n', ""),
    }
    cmds.update(over)
    return {"item": "root", "rc": 0, "stdout": "\n".join(line(k, *v) for k, v in cmds.items())}


def registered(user=None, root=None):
    return {"results": [user or user_part(), root or root_part()], "changed": False}


def fabric(port=1, ips=("192.168.100.10/24",), speed=200000, failed=False):
    devs = ["enp1s0f%dnp%d" % (port, port), "enP2p1s0f%dnp%d" % (port, port)]
    if failed:
        return {"failed": True, "msg": "no cabled ConnectX-7 port is Up", "interfaces": []}
    return {"selected_port": port, "selected_interfaces": devs, "nccl_socket_ifname": ",".join(devs),
            "interfaces": [{"netdev": devs[0], "speed_mbps": speed, "ipv4": list(ips)},
                           {"netdev": devs[1], "speed_mbps": speed, "ipv4": ["192.168.101.1%s/24" % ips[0][-4]]}]}


def run(probes=None, fabrics=None, hf=None, plan=None, settings=None, hosts=None):
    hosts = HOSTS if hosts is None else hosts
    probes = probes if probes is not None else {h: registered() for h in hosts}
    fabrics = fabrics if fabrics is not None else {"spark-1": fabric(ips=("192.168.100.10/24",)),
                                                   "spark-2": fabric(ips=("192.168.100.11/24",))}
    entries = _preflight.build_checks(hosts, {h: _preflight.merge_probe(r) for h, r in probes.items()}, fabrics,
                                      HF_OK if hf is None else hf, plan or PLAN, dict(SETTINGS, **(settings or {})))
    return {(e["id"], e["node"]): e for e in entries}, entries


def test_clean_two_nodes_every_check_once_per_node_in_order():
    by_key, entries = run()
    assert [e["id"] for e in entries] == list(_preflight.CHECK_IDS) * 2
    assert [e["node"] for e in entries] == ["spark-1"] * 14 + ["spark-2"] * 14
    statuses = {k: v["status"] for k, v in by_key.items() if k[1] == "spark-1"}
    assert statuses == {
        ("docker_nosudo", "spark-1"): "pass", ("gpu_runtime", "spark-1"): "skip", ("ports_free", "spark-1"): "pass",
        ("clock_sync", "spark-1"): "skip", ("hf_access", "spark-1"): "pass", ("same_user", "spark-1"): "pass",
        ("same_port", "spark-1"): "pass", ("link_speed", "spark-1"): "pass", ("fabric_ips", "spark-1"): "pass",
        ("nccl_env", "spark-1"): "pass", ("same_image", "spark-1"): "pass", ("disk_space", "spark-1"): "pass",
        ("memory_budget", "spark-1"): "pass", ("mem_available", "spark-1"): "pass"}
    assert all(set(e) == {"id", "node", "status", "message", "fix"} and e["fix"] for e in entries)
    assert _preflight.verdict(entries) == (
        True, "Preflight passed (28 checks; warnings and skips are in the summary and the report).")


def test_clean_messages():
    by_key, dummy = run()
    msg = {k[0]: v["message"] for k, v in by_key.items() if k[1] == "spark-1"}
    assert msg["docker_nosudo"] == "docker ps works without sudo"
    assert msg["gpu_runtime"] == "skipped: this inventory has no GPU (trtllm_container_gpus: false)"
    assert msg["ports_free"] == "ports 8355 and 2233 are free or ours"
    assert msg["clock_sync"] == ("skipped: timedatectl cannot report NTP sync on this node (no systemd?): System has not "
                                 "been booted with systemd as init system (PID 1). Can't operate. Failed to connect to "
                                 "bus: Host is down")
    assert msg["hf_access"] == "token and access OK for nvidia/Qwen3-235B-A22B-FP4, nvidia/Qwen3-235B-A22B-Eagle3"
    assert msg["same_user"] == "deploy user(s): spark"
    assert msg["same_port"] == "cabled port per node: spark-1: port 1, spark-2: port 1"
    assert msg["link_speed"] == "links at 200000 Mb/s"
    assert msg["fabric_ips"] == ("hostfile 192.168.100.10, 192.168.100.11 matches the fabric addresses 192.168.100.10, "
                                 "192.168.100.11")
    assert msg["nccl_env"] == ("container has NCCL_SOCKET_IFNAME=%s, UCX_NET_DEVICES=%s, OMPI_MCA_btl_tcp_if_include=%s; "
                               "the Up interfaces are %s" % (IFNAMES, IFNAMES, IFNAMES, IFNAMES))
    assert msg["same_image"] == "image ids: spark-1=%s, spark-2=%s" % (IMAGE_ID, IMAGE_ID)
    total, present = 102 * GIB, 40 * GIB
    assert msg["disk_space"] == (
        "%d bytes of models (%d already in the cache, %d to download) + %d bytes reserve (preflight_disk_reserve_bytes) "
        "fit in %d bytes free under ~/.cache/huggingface" % (total, present, total - present, 10 * GIB, 500 * GIB))
    per_node = 50 * GIB + 2 * GIB
    assert msg["memory_budget"] == (
        "weights per node %d bytes (target/tp_size 2 + draft) + %d bytes reserve (preflight_memory_reserve_bytes) fit in "
        "90%% of %d usable bytes (preflight_usable_memory_bytes); the KV cache takes its fraction of what is left"
        % (per_node, 4 * GIB, 119 * GIB))
    assert msg["mem_available"] == ("MemAvailable %d bytes covers %d bytes of weights + %d bytes reserve "
                                    "(preflight_memory_reserve_bytes)" % (120000000 * 1024, per_node, 4 * GIB))


def test_single_spark_has_no_two_node_checks():
    plan = copy.deepcopy(PLAN)
    plan["deployment"]["topology"] = "single_spark"
    plan["plan"]["tp_size"] = 1
    by_key, entries = run(hosts=["spark-1"], probes={"spark-1": registered()}, fabrics={}, plan=plan)
    assert [e["id"] for e in entries] == [c for c in _preflight.CHECK_IDS if c not in _preflight.TWO_NODE_CHECKS]
    assert by_key[("memory_budget", "spark-1")]["fix"] == "Use two Sparks (TP=2, two_sparks.yml) or a smaller/quantised model."
    assert "weights per node %d bytes (target/tp_size 1" % (102 * GIB) in by_key[("memory_budget", "spark-1")]["message"]


# (case id, node, override of that node's user part, override of its root part, check, status, substrings)
NODE_FAULTS = [
    ("docker-not-in-group", "spark-2",
     {"docker_ps": (1, "", "permission denied while trying to connect to the Docker daemon socket"),
      "env": (1, "", "permission denied while trying to connect to the Docker daemon socket")}, {},
     "docker_nosudo", "fail", ["docker ps failed", "permission denied"]),
    ("docker-not-in-group-env", "spark-2",
     {"env": (1, "", "permission denied while trying to connect")}, {},
     "nccl_env", "skip", ["skipped: cannot inspect container trtllm-multinode", "permission denied"]),
    ("port-taken", "spark-1", {},
     {"listen": (0, 'LISTEN 0 5 127.0.0.1:8355 0.0.0.0:* users:(("python3",pid=777,fd=3))\n'
                    'LISTEN 0 5 [::1]:8355 [::]:* users:(("python3",pid=777,fd=4))\n', "")},
     "ports_free", "fail", ["taken by another process: 8355 python3(pid 777)"]),
    ("sshd-port-taken-no-container", "spark-2", {},
     {"ours": (1, "", "Error: No such container: trtllm-multinode"),
      "listen": (0, 'LISTEN 0 128 0.0.0.0:2233 0.0.0.0:* users:(("sshd",pid=99,fd=3))\n', "")},
     "ports_free", "fail", ["2233 sshd(pid 99)"]),
    ("ss-missing", "spark-1", {}, {"listen": (127, "", "bash: ss: command not found")},
     "ports_free", "fail", ["cannot list the listening ports", "ss: command not found"]),
    ("clock-unsynchronised", "spark-1", {"clock": (0, "no", "")}, {},
     "clock_sync", "fail", ["clock not synchronised", "NTPSynchronized=no", "Root CA"]),
    ("clock-synchronised", "spark-1", {"clock": (0, "yes\n", "")}, {}, "clock_sync", "pass", ["clock synchronised"]),
    ("no-timedatectl", "spark-2", {"clock": (127, "", "bash: timedatectl: command not found")}, {},
     "clock_sync", "skip", ["timedatectl", "command not found"]),
    ("other-user", "spark-2", {"user": (0, "sparkb", "")}, {}, "same_user", "fail", ["deploy user(s): spark, sparkb"]),
    ("no-hostfile", "spark-1", {"hostfile": (1, "", "cat: no such file")}, {},
     "fabric_ips", "skip", ["skipped: no OpenMPI hostfile yet (not deployed)"]),
    ("hostfile-extra-host", "spark-1", {"hostfile": (0, "192.168.100.10\n192.168.100.11\n192.168.100.12\n", "")}, {},
     "fabric_ips", "fail", ["does not match"]),
    ("env-other-interfaces", "spark-2", {"env": (0, ENV_OK.replace(IFNAMES, "enp1s0f0np0,enP2p1s0f0np0"), "")}, {},
     "nccl_env", "fail", ["NCCL_SOCKET_IFNAME=enp1s0f0np0,enP2p1s0f0np0"]),
    ("env-unset", "spark-2", {"env": (0, json.dumps([{"Config": {"Env": ["PATH=/usr/bin"]}}]), "")}, {},
     "nccl_env", "fail", ["NCCL_SOCKET_IFNAME=unset", "UCX_NET_DEVICES=unset"]),
    ("image-missing-here", "spark-2", {"image": (1, "", "Error: No such image")}, {},
     "same_image", "skip", ["skipped: %s is not on this node yet" % IMAGE]),
    ("image-differs", "spark-1", {"image": (0, image_json("sha256:" + "b" * 64), "")}, {},
     "same_image", "fail", ["different images named %s: image ids: spark-1=sha256:bbb" % IMAGE]),
    ("no-meminfo", "spark-1", {"meminfo": (1, "", "cat: /proc/meminfo: Permission denied")}, {},
     "mem_available", "skip", ["MemAvailable unknown", "Permission denied"]),
    ("low-mem-available", "spark-2", {"meminfo": (0, "MemAvailable:   1024 kB\n", "")}, {},
     "mem_available", "warn", ["MemAvailable 1048576 bytes is below"]),
    ("disk-full", "spark-1", {"disk_free": (0, str(1 * GIB), "")}, {},
     "disk_space", "fail", ["do not fit in %d bytes free" % GIB]),
    ("df-failed", "spark-1", {"disk_free": (1, "", "df: /x: No such file")}, {},
     "disk_space", "skip", ["free disk space unknown", "No such file"]),
]


@pytest.mark.parametrize("case,node,user,root,check,status,texts", NODE_FAULTS, ids=[c[0] for c in NODE_FAULTS])
def test_node_fault(case, node, user, root, check, status, texts):
    probes = {h: registered() for h in HOSTS}
    probes[node] = registered(user_part(**user), root_part(**root))
    by_key, entries = run(probes=probes)
    got = by_key[(check, node)]
    assert got["status"] == status, got
    for text in texts:
        assert text in got["message"], (text, got)
    assert got["fix"] == _preflight.FIXES[check]
    other = [h for h in HOSTS if h != node][0]
    if check not in ("same_user", "same_image", "fabric_ips"):  # the cross-node checks report on both nodes
        assert by_key[(check, other)]["status"] in ("pass", "skip"), by_key[(check, other)]
    assert _preflight.verdict(entries)[0] is (not any(e["status"] == "fail" for e in entries))


def test_same_user_and_same_image_fail_on_every_node():
    probes = {h: registered() for h in HOSTS}
    probes["spark-2"] = registered(user_part(user=(0, "sparkb", ""), image=(0, image_json("sha256:" + "c" * 64), "")))
    by_key, dummy = run(probes=probes)
    for host in HOSTS:
        assert by_key[("same_user", host)]["status"] == "fail"
        assert by_key[("same_image", host)]["status"] == "fail"


def test_image_on_one_node_only_skips_on_the_other():
    probes = {h: registered() for h in HOSTS}
    probes["spark-2"] = registered(user_part(image=(1, "", "No such image")))
    by_key, dummy = run(probes=probes)
    assert by_key[("same_image", "spark-1")]["status"] == "skip"
    assert by_key[("same_image", "spark-1")]["message"] == (
        "skipped, not on every node yet: image ids: spark-1=%s, spark-2=" % IMAGE_ID)


def test_gpu_runtime():
    gpus = {"gpus": {"spark-1": True, "spark-2": True}}
    probes = {h: registered() for h in HOSTS}
    probes["spark-2"] = registered(user_part(runtimes=(0, DOCKER_INFO.replace(" runc\n", " nvidia runc\n"), "")))
    by_key, dummy = run(probes=probes, settings=gpus)
    assert by_key[("gpu_runtime", "spark-1")]["status"] == "fail"
    assert by_key[("gpu_runtime", "spark-1")]["message"] == (
        "Docker has no nvidia runtime: runtimes io.containerd.runc.v2, io.containerd.runtime.v1.linux, runc")
    assert by_key[("gpu_runtime", "spark-1")]["fix"] == (
        "Install the NVIDIA Container Toolkit (DGX OS ships it) and check: docker run --rm --gpus all %s nvidia-smi" % IMAGE)
    assert by_key[("gpu_runtime", "spark-2")]["status"] == "pass"
    assert by_key[("gpu_runtime", "spark-2")]["message"] == "Docker has the nvidia runtime"


def test_same_port_and_env_when_spark2_moved_to_port_0():
    fabrics = {"spark-1": fabric(1, ("192.168.100.10/24",)), "spark-2": fabric(0, ("192.168.100.11/24",))}
    by_key, dummy = run(fabrics=fabrics)
    for host in HOSTS:
        assert by_key[("same_port", host)]["status"] == "fail"
        assert by_key[("same_port", host)]["message"] == "cabled port per node: spark-1: port 1, spark-2: port 0"
    assert by_key[("nccl_env", "spark-2")]["status"] == "fail"
    assert by_key[("nccl_env", "spark-2")]["message"].endswith("the Up interfaces are enp1s0f0np0,enP2p1s0f0np0")
    assert by_key[("nccl_env", "spark-1")]["status"] == "pass"


def test_same_port_when_detection_failed():
    fabrics = {"spark-1": fabric(1, ("192.168.100.10/24",)), "spark-2": fabric(failed=True)}
    by_key, dummy = run(fabrics=fabrics)
    assert by_key[("same_port", "spark-2")] == dict(by_key[("same_port", "spark-2")], status="fail",
                                                    message="no cabled ConnectX-7 port is Up")
    assert by_key[("same_port", "spark-1")]["message"] == "cabled port per node: spark-1: port 1, spark-2: port unknown"
    assert by_key[("link_speed", "spark-2")]["status"] == "skip"


def test_link_speed_warns_below_200g():
    fabrics = {"spark-1": fabric(1, ("192.168.100.10/24",), speed=10000), "spark-2": fabric(1, ("192.168.100.11/24",))}
    by_key, dummy = run(fabrics=fabrics)
    assert by_key[("link_speed", "spark-1")]["status"] == "warn"
    assert by_key[("link_speed", "spark-1")]["message"] == (
        "below 200000 Mb/s: enp1s0f1np1, enP2p1s0f1np1 at 10000, 10000 Mb/s")
    assert by_key[("link_speed", "spark-2")]["status"] == "pass"


def test_fabric_ips_when_an_address_is_missing():
    fabrics = {"spark-1": fabric(1, ("192.168.100.10/24",)), "spark-2": fabric(1, ("192.168.100.11/24",))}
    fabrics["spark-2"]["interfaces"][0]["ipv4"] = []
    by_key, dummy = run(fabrics=fabrics)
    for host in HOSTS:
        assert by_key[("fabric_ips", host)]["status"] == "fail"
        assert by_key[("fabric_ips", host)]["message"] == (
            "hostfile 192.168.100.10, 192.168.100.11 does not match the fabric addresses 192.168.100.10")


def test_hf_failure_skips_the_budgets():
    hf = [dict(HF_OK[0]), {"item": {"repo": "nvidia/Qwen3-235B-A22B-Eagle3"}, "failed": True,
                           "msg": "HF token rejected by http://hub:8080: set a valid token"}]
    by_key, entries = run(hf=hf)
    assert by_key[("hf_access", "spark-1")]["status"] == "fail"
    assert by_key[("hf_access", "spark-1")]["message"] == "HF token rejected by http://hub:8080: set a valid token"
    for check in ("disk_space", "memory_budget", "mem_available"):
        assert by_key[(check, "spark-2")] == dict(by_key[(check, "spark-2")], status="skip",
                                                  message="skipped: model sizes unknown (hf_access failed)")
    passed, msg = _preflight.verdict(entries)
    assert not passed and msg.startswith("hf_access | spark-1 | HF token rejected")
    assert msg.count(" || ") == 1


def test_reserves_that_cannot_fit():
    settings = {"usable_memory_bytes": 1048576, "memory_reserve_bytes": 10 ** 15, "disk_reserve_bytes": 10 ** 15}
    by_key, dummy = run(settings=settings)
    assert by_key[("disk_space", "spark-1")]["status"] == "fail"
    assert "1000000000000000 bytes reserve (preflight_disk_reserve_bytes) do not fit in" in \
        by_key[("disk_space", "spark-1")]["message"]
    assert by_key[("memory_budget", "spark-1")]["status"] == "fail"
    assert "do not fit in 90% of 1048576 usable bytes" in by_key[("memory_budget", "spark-1")]["message"]
    assert by_key[("memory_budget", "spark-1")]["fix"] == "Use a smaller model or lower max_num_tokens."
    assert by_key[("mem_available", "spark-2")]["status"] == "warn"
    assert "is below" in by_key[("mem_available", "spark-2")]["message"]


@pytest.mark.parametrize("usable,status", [(int((52 * GIB + 4 * GIB) / 0.9) + 1, "pass"),
                                           (int((52 * GIB + 4 * GIB) / 0.9) - 10, "fail")])
def test_memory_budget_edge(usable, status):
    by_key, dummy = run(settings={"usable_memory_bytes": usable})
    assert by_key[("memory_budget", "spark-1")]["status"] == status


def test_disk_counts_only_what_is_missing():
    # The whole target (100 GiB) is there already: only the draft (2 GiB) is to download.
    user = user_part(disk_free=(0, str(12 * GIB + 1), ""),
                     cache=(0, "%d\t%s/hub/models--nvidia--Qwen3-235B-A22B-FP4\n" % (120 * GIB, CACHE), ""))
    probes = {h: registered(user) for h in HOSTS}
    by_key, dummy = run(probes=probes, settings={"hf_cache_dir": "/data/hf"})
    got = by_key[("disk_space", "spark-1")]
    assert got["status"] == "pass", got
    assert "(%d already in the cache, %d to download)" % (100 * GIB, 2 * GIB) in got["message"]
    assert got["message"].endswith("bytes free under /data/hf")


def test_unreached_node_fails_every_check():
    probes = {"spark-1": registered()}
    by_key, entries = run(probes=probes)
    spark2 = [e for e in entries if e["node"] == "spark-2"]
    assert len(spark2) == 14 and all(e["status"] == "fail" and "no facts from this node" in e["message"] for e in spark2)
    assert by_key[("same_user", "spark-1")]["status"] == "pass"


def test_root_part_that_could_not_run():
    probes = {h: registered() for h in HOSTS}
    probes["spark-1"] = {"results": [user_part(), {"item": "root", "failed": True, "rc": 1, "stdout": "",
                                                   "msg": "Missing sudo password"}]}
    by_key, dummy = run(probes=probes)
    assert by_key[("ports_free", "spark-1")]["status"] == "fail"
    assert by_key[("ports_free", "spark-1")]["message"] == (
        "cannot list the listening ports (ss -Hltnp as root): Missing sudo password")


def test_summary_and_verdict_format():
    entries = [{"id": "ports_free", "node": "spark-1", "status": "fail", "message": "taken by another process: 8355 "
                "python3(pid 1)", "fix": "Stop that process."},
               {"id": "link_speed", "node": "spark-1", "status": "warn", "message": "slow", "fix": "cable"}]
    assert _preflight.summary(entries) == [
        "FAIL | ports_free | spark-1 | taken by another process: 8355 python3(pid 1)", "WARN | link_speed | spark-1 | slow"]
    assert _preflight.verdict(entries) == (
        False, "ports_free | spark-1 | taken by another process: 8355 python3(pid 1) | Stop that process.")


# --------------------------------------------------------------------------- parsers

def test_parse_probe_ignores_garbage_and_decodes():
    text = "\n".join([line("a", 0, "x\n", ""), "garbage", "b\tnotanint\t\t", line("c", 2, "", "err\n"), "d\t0\t!!\t"])
    assert _preflight.parse_probe(text) == {"a": {"rc": 0, "stdout": "x", "stderr": ""},
                                            "c": {"rc": 2, "stdout": "", "stderr": "err"},
                                            "d": {"rc": 0, "stdout": "", "stderr": ""}}


def test_merge_probe_skipped_and_plain():
    assert _preflight.merge_probe({"skipped": True}) == {"_errors": {}}
    plain = _preflight.merge_probe({"rc": 0, "stdout": line("user", 0, "spark")})
    assert plain["user"]["stdout"] == "spark"


@pytest.mark.parametrize("text,expected", [
    ('LISTEN 0 5 127.0.0.1:8355 0.0.0.0:* users:(("python3",pid=5,fd=3))', [(8355, [("python3", 5)])]),
    ('LISTEN 0 5 [::]:2233 [::]:* users:(("sshd",pid=7,fd=4),("sshd",pid=8,fd=4))', [(2233, [("sshd", 7), ("sshd", 8)])]),
    ("LISTEN 0 5 *:80 *:*", [(80, [])]),
    ("LISTEN 0 5 127.0.0.53%lo:53 0.0.0.0:*", [(53, [])]),
    ("nonsense", []),
])
def test_parse_listeners(text, expected):
    assert _preflight.parse_listeners(text) == expected


def test_foreign_listeners_ours_and_duplicates():
    listeners = [(8355, [("python3", 5)]), (8355, [("python3", 5)]), (2233, [("sshd", 9)]), (22, [("sshd", 1)]),
                 (8355, [])]
    assert _preflight.foreign_listeners(listeners, {9}, (8355, 2233)) == ["8355 python3(pid 5)",
                                                                          "8355 (process not shown)"]


@pytest.mark.parametrize("model,rel", [
    ({"repo": "nvidia/Qwen3-235B-A22B-FP4", "local_dir": None}, "hub/models--nvidia--Qwen3-235B-A22B-FP4"),
    ({"repo": "nvidia/X", "local_dir": "sparkops-drafts/nvidia--X/"}, "sparkops-drafts/nvidia--X"),
])
def test_model_cache_dir(model, rel):
    assert _preflight.model_cache_dir(model) == rel


def test_hostfile_env_and_runtimes_parsers():
    assert _preflight.hostfile_hosts("# c\n\n 10.0.0.1 slots=1\n10.0.0.2\n") == ["10.0.0.1", "10.0.0.2"]
    assert _preflight.container_env(json.dumps([{"Config": {"Env": ["A=1", "B=x=y", "C"]}}])) == {"A": "1", "B": "x=y"}
    assert _preflight.container_env("not json") == {} and _preflight.container_env("[]") == {}
    assert _preflight.image_id(image_json("sha256:1")) == "sha256:1" and _preflight.image_id("") == ""
    assert _preflight.has_nvidia_runtime(" Runtimes: nvidia runc\n")
    assert not _preflight.has_nvidia_runtime(DOCKER_INFO) and not _preflight.has_nvidia_runtime("")
    assert _preflight.mem_available_bytes("MemAvailable:   10 kB") == 10240
    assert _preflight.mem_available_bytes("") is None
