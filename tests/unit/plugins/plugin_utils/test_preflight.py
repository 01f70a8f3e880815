# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE module_util sparkops.specdec.plugins.plugin_utils._preflight: the tier-2
# preflight checks (parsing of the node probe, every check's pass/fail/warn/skip and message, the
# cross-node comparisons, the budgets, the summary and the verdict). The messages asserted here are
# the ones molecule/preflight_faults asserts on the lab, plus the cases the lab cannot show.

from __future__ import annotations

import base64
import copy
import json

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _preflight
from ansible_collections.sparkops.specdec.plugins.module_utils import _nccl

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
    cmds.update({k: v for k, v in over.items() if isinstance(v, tuple)})
    facts = {k: {"rc": v[0], "stdout": v[1].rstrip("\n"), "stderr": v[2].rstrip("\n")} for k, v in cmds.items()}
    facts.update(ssh_nodes=[ssh_ok()], ssh_containers=[ssh_ok()], hub=dict(HUB_OK), gpu=dict(GPU_NONE),
                 pending_change=dict(NO_PENDING))
    facts.update({k: v for k, v in over.items() if not isinstance(v, tuple)})
    # What sparkops.specdec.preflight_info returns for the user part.
    return {"item": "user", "changed": False, "facts": facts}


def ssh_ok(address="192.168.100.11", host="peer", rc=0, err=""):
    return {"host": host, "address": address, "rc": rc, "stdout": "", "stderr": err}


HUB_URL = "http://192.168.250.5:8080/api/models/nvidia/Qwen3-235B-A22B-FP4/revision/main"
HUB_OK = {"url": HUB_URL, "status": 200, "error": None, "offline": "", "skipped": False, "reason": "", "seconds": 0.01}
RECORD_PATH = "/var/lib/sparkops/specdec/container-previous.json"
NO_PENDING = {"record": RECORD_PATH, "present": False, "text": "", "error": "", "kept": None}
GPU_NONE = {"present": False, "evidence": "", "ran": False, "rc": None, "stdout": "", "stderr": "",
            "reason": "no GPU on this node"}


def root_part(**over):
    cmds = {
        "ours": (0, "PID\n4242\n4243\n", ""),
        "listen": (0, 'LISTEN 0 5 0.0.0.0:8355 0.0.0.0:* users:(("trtllm-serve",pid=4242,fd=3))\n'
                      'LISTEN 0 128 0.0.0.0:2233 0.0.0.0:* users:(("sshd",pid=4243,fd=3))\n'
                      'LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=12,fd=3))\n', ""),
    }
    cmds.update(over)
    return {"item": "root", "changed": False,
            "facts": {k: {"rc": v[0], "stdout": v[1].rstrip("\n"), "stderr": v[2].rstrip("\n")} for k, v in cmds.items()}}


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
    assert [e["node"] for e in entries] == ["spark-1"] * 20 + ["spark-2"] * 20
    statuses = {k: v["status"] for k, v in by_key.items() if k[1] == "spark-1"}
    assert statuses == {
        ("docker_nosudo", "spark-1"): "pass", ("gpu_runtime", "spark-1"): "skip", ("gpu_run", "spark-1"): "skip",
        ("ports_free", "spark-1"): "pass", ("endpoint_exposure", "spark-1"): "skip", ("clock_sync", "spark-1"): "skip", ("hf_access", "spark-1"): "pass",
        ("hub_reach", "spark-1"): "pass", ("same_user", "spark-1"): "pass", ("same_port", "spark-1"): "pass",
        ("link_speed", "spark-1"): "pass", ("fabric_ips", "spark-1"): "pass", ("ssh_nodes", "spark-1"): "pass",
        ("ssh_containers", "spark-1"): "pass",
        ("nccl_env", "spark-1"): "pass", ("same_image", "spark-1"): "pass", ("pending_change", "spark-1"): "pass",
        ("disk_space", "spark-1"): "pass", ("memory_budget", "spark-1"): "pass", ("mem_available", "spark-1"): "pass"}
    assert all(set(e) == {"id", "node", "status", "message", "fix"} and e["fix"] for e in entries)
    assert _preflight.verdict(entries) == (
        True, "Preflight passed (40 checks; warnings and skips are in the summary and the report).")


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
    assert msg["pending_change"] == "no container change is pending (no %s)" % RECORD_PATH
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
     "same_image", "fail", ["trtllm_container_image: the nodes of this deployment hold different images under %s "
                            "(spark-1: sha256:%s, spark-2: %s); TP=2 ranks must run one engine build"
                            % (IMAGE, "b" * 64, IMAGE_ID)]),
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


def test_node_without_facts_is_one_failed_row():
    probes = {"spark-1": registered()}
    by_key, entries = run(probes=probes)
    spark2 = [e for e in entries if e["node"] == "spark-2"]
    assert [(e["id"], e["status"]) for e in spark2] == [("reachable", "fail")]
    assert "no facts from this node" in spark2[0]["message"] and spark2[0]["fix"] == _preflight.FIXES["unreached"]
    assert by_key[("same_user", "spark-1")]["status"] == "pass"


def test_unreachable_node_is_one_row_saying_why():
    """A node the play could not reach (its registered reach result, ignore_unreachable) is one failed row with the
    connection's message; its (empty) probe is not judged, the other node's checks are."""
    reach = {"spark-1": {"ping": "pong"},
             "spark-2": {"unreachable": True, "msg": "Failed to connect to the host via ssh:\n  Connection refused"}}
    unreachable = _preflight.unreachable_reasons(reach)
    assert unreachable == {"spark-2": "Failed to connect to the host via ssh: Connection refused"}
    probes = {"spark-1": _preflight.merge_probe(registered()), "spark-2": _preflight.merge_probe({"skipped": True})}
    entries = _preflight.build_checks(HOSTS, probes, {h: fabric() for h in HOSTS}, HF_OK, PLAN, SETTINGS,
                                      unreachable=unreachable)
    spark2 = [e for e in entries if e["node"] == "spark-2"]
    assert spark2 == [{"id": "reachable", "node": "spark-2", "status": "fail", "fix": _preflight.FIXES["unreached"],
                       "message": "unreachable: Failed to connect to the host via ssh: Connection refused"}]
    assert len([e for e in entries if e["node"] == "spark-1"]) == 20
    assert _preflight.unreachable_reasons({"a": {"unreachable": True}}) == {"a": "the connection failed (no message)"}


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


# ---------------------------------------------------------------------------------------------
# The rows the troubleshooting tables imply: SSH between nodes and containers, the node's own reach to the
# Hub, the GPU run. Each verdict of the classification, with the fix it names.
# ---------------------------------------------------------------------------------------------

SSH_STDERR = [
    ("ok", 0, ""),
    ("refused", 255, "ssh: connect to host 192.168.100.11 port 2233: Connection refused"),
    ("publickey", 255, "root@192.168.100.11: Permission denied (publickey)."),
    ("publickey", 255, "spark@192.168.100.11: Permission denied (publickey,password)."),
    ("host_key", 255, "No ED25519 host key is known for [192.168.100.11]:2233 and you have requested strict checking.\n"
                      "Host key verification failed."),
    ("host_key", 255, "@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
                      "Host key verification failed."),
    ("timeout", 255, "ssh: connect to host 192.168.100.11 port 22: Connection timed out"),
    ("timeout", 124, ""),
    ("no_route", 255, "ssh: connect to host 192.168.100.11 port 22: No route to host"),
    ("no_route", 255, "ssh: connect to host 192.168.100.11 port 22: Network is unreachable"),
    ("dns", 255, "ssh: Could not resolve hostname spark-2: Name or service not known"),
    ("closed", 255, "kex_exchange_identification: read: Connection reset by peer"),
    ("closed", 255, "Connection closed by 192.168.100.11 port 2233"),
    ("no_container", 1, "Error response from daemon: container 3f2a is not running"),
    ("no_container", 1, "Error response from daemon: No such container: trtllm-multinode"),
    ("docker", 1, "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock"),
    ("no_client", 127, "OCI runtime exec failed: exec failed: unable to start container process: exec: \"ssh\": "
                       "executable file not found in $PATH: unknown"),
    ("other", 1, "something else"),
]


@pytest.mark.parametrize("kind,rc,err", SSH_STDERR, ids=["%s-%d" % (c[0], i) for i, c in enumerate(SSH_STDERR)])
def test_classify_ssh(kind, rc, err):
    assert _preflight.classify_ssh(rc, err) == kind


def _ssh_run(node, check_id, results):
    probes = {h: registered() for h in HOSTS}
    probes[node] = registered(user_part(**{check_id: results}))
    by_key, entries = run(probes=probes)
    return by_key, entries


@pytest.mark.parametrize("check_id", ["ssh_nodes", "ssh_containers"])
def test_ssh_pass_names_the_addresses(check_id):
    by_key, dummy = _ssh_run("spark-1", check_id, [ssh_ok("192.168.100.11", "spark-2"), ssh_ok("192.168.101.11", "spark-2")])
    got = by_key[(check_id, "spark-1")]
    assert got["status"] == "pass"
    assert got["message"].endswith("works to 192.168.100.11 (spark-2), 192.168.101.11 (spark-2)")
    assert got["fix"] == _preflight.FIXES[check_id]


# (check, stderr, rc, substrings of the message, substrings of the fix)
SSH_FAULTS = [
    ("ssh_containers", "root@192.168.100.11: Permission denied (publickey).", 255,
     ["ssh from this node's container to the peer container's sshd failed", "192.168.100.11 (spark-2): publickey"],
     ["/etc/sparkops/trtllm-ssh/mesh/authorized_keys on the peer", "from=", "re-run two_sparks.yml"]),
    ("ssh_containers", "ssh: connect to host 192.168.100.11 port 2233: Connection refused", 255,
     ["refused", "Connection refused"], ["does not listen on that address and port 2233", "docker logs trtllm-multinode",
                                         "ports_free"]),
    ("ssh_containers", "Host key verification failed.", 255, ["host_key"],
     ["/etc/sparkops/trtllm-ssh/mesh/known_hosts"]),
    ("ssh_nodes", "spark@192.168.100.11: Permission denied (publickey).", 255,
     ["ssh as the deploy user to the peer's sshd failed", "publickey"],
     ["~/.ssh/id_ed25519_sparkops.pub", "authorized_keys", "StrictModes"]),
    ("ssh_nodes", "ssh: connect to host 192.168.100.11 port 22: Connection refused", 255, ["refused"],
     ["systemctl enable --now ssh", "ListenAddress"]),
    ("ssh_nodes", "Host key verification failed.", 255, ["host_key"], ["ssh-keygen -R", "known_hosts_sparkops"]),
    ("ssh_nodes", "", 124, ["timeout"], ["ibdev2netdev", "firewall"]),
    ("ssh_nodes", "ssh: connect to host 192.168.100.11 port 22: No route to host", 255, ["no_route"], ["fabric_ips"]),
]


@pytest.mark.parametrize("check_id,err,rc,texts,fix_texts", SSH_FAULTS, ids=["%s-%d" % (c[0], i) for i, c in enumerate(SSH_FAULTS)])
def test_ssh_faults(check_id, err, rc, texts, fix_texts):
    by_key, entries = _ssh_run("spark-1", check_id, [ssh_ok("192.168.100.11", "spark-2", rc=rc, err=err)])
    got = by_key[(check_id, "spark-1")]
    assert got["status"] == "fail", got
    for text in texts:
        assert text in got["message"], (text, got)
    for text in fix_texts:
        assert text in got["fix"], (text, got)
    assert by_key[(check_id, "spark-2")]["status"] == "pass"
    assert _preflight.verdict(entries)[0] is False


def test_ssh_several_kinds_name_each_fix_once():
    results = [ssh_ok("192.168.100.11", "spark-2", 255, "Permission denied (publickey)."),
               ssh_ok("192.168.101.11", "spark-2", 255, "Permission denied (publickey)."),
               ssh_ok("192.168.101.12", "spark-3", 255, "Connection refused")]
    by_key, dummy = _ssh_run("spark-1", "ssh_containers", results)
    got = by_key[("ssh_containers", "spark-1")]
    assert got["fix"].count("re-run two_sparks.yml (ssh_mesh rewrites it)") == 1
    assert "does not listen on that address" in got["fix"]
    assert got["message"].count(": publickey: ") == 2


@pytest.mark.parametrize("err", ["Error response from daemon: container 3f2a is not running",
                                 "permission denied while trying to connect to the Docker daemon socket"])
def test_ssh_containers_skip_when_the_container_cannot_run_ssh(err):
    by_key, dummy = _ssh_run("spark-2", "ssh_containers", [ssh_ok(rc=1, err=err)])
    got = by_key[("ssh_containers", "spark-2")]
    assert got["status"] == "skip"
    assert got["message"].startswith("skipped: cannot run ssh in container trtllm-multinode")
    assert err in got["message"]


def test_ssh_without_peer_addresses_skips_and_missing_fact_fails():
    by_key, dummy = _ssh_run("spark-1", "ssh_nodes", [])
    assert by_key[("ssh_nodes", "spark-1")]["status"] == "skip"
    assert "no fabric address of a peer is known" in by_key[("ssh_nodes", "spark-1")]["message"]
    probes = {h: registered() for h in HOSTS}
    probes["spark-1"]["results"][0]["facts"].pop("ssh_containers")
    by_key, dummy = run(probes=probes)
    assert by_key[("ssh_containers", "spark-1")]["status"] == "fail"


def test_ssh_targets_are_the_peers_up_addresses():
    fabrics = {"spark-1": fabric(ips=("192.168.100.10/24",)), "spark-2": fabric(ips=("192.168.100.11/24",)),
               "spark-3": {"skipped": True}, "spark-4": fabric(failed=True)}
    assert _nccl.ssh_targets("spark-1", ["spark-1", "spark-2", "spark-3", "spark-4"], fabrics) == [
        {"host": "spark-2", "address": "192.168.100.11"}, {"host": "spark-2", "address": "192.168.101.11"}]
    moved = fabric(port=0, ips=("192.168.100.11/24",))
    moved["interfaces"] = [dict(i, ipv4=[]) for i in moved["interfaces"]]
    assert _nccl.ssh_targets("spark-1", ["spark-1", "spark-2"], {"spark-2": moved}) == []


def _err(etype, text, errno_=None, verify=None):
    return {"url": HUB_URL, "status": None, "error": {"type": etype, "errno": errno_, "text": text, "verify_message": verify},
            "offline": "", "skipped": False}


HUB_CASES = [
    (_err("gaierror", "[Errno -2] Name or service not known", -2), "dns"),
    (_err("gaierror", "[Errno -3] Temporary failure in name resolution", -3), "dns"),
    (_err("ConnectionRefusedError", "[Errno 111] Connection refused", 111), "refused"),
    (_err("OSError", "[Errno 113] No route to host", 113), "no_route"),
    (_err("OSError", "[Errno 101] Network is unreachable", 101), "no_route"),
    (_err("TimeoutError", "timed out"), "timeout"),
    (_err("TimeoutError", "_ssl.c:990: The handshake operation timed out"), "timeout"),
    (_err("ConnectionResetError", "[Errno 104] Connection reset by peer", 104), "closed"),
    (_err("SSLCertVerificationError", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate is not "
          "yet valid (_ssl.c:1006)", 1, "certificate is not yet valid"), "tls_clock"),
    (_err("SSLCertVerificationError", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has "
          "expired (_ssl.c:1006)", 1, "certificate has expired"), "tls_expired"),
    (_err("SSLCertVerificationError", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed "
          "certificate in certificate chain (_ssl.c:1006)", 1), "tls_ca"),
    (_err("SSLCertVerificationError", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local "
          "issuer certificate (_ssl.c:1006)", 1), "tls_ca"),
    (_err("SSLCertVerificationError", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: Hostname mismatch, "
          "certificate is not valid for 'hub.example'. (_ssl.c:1006)", 1), "tls_name"),
    (_err("SSLError", "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)", 1), "tls"),
    (_err("bad_url", "not an http(s) URL: ftp://x/api"), "bad_url"),
    (_err("RemoteDisconnected", "Remote end closed connection without response"), "closed"),
    (_err("ValueError", "something odd"), "other"),
]


@pytest.mark.parametrize("hub,kind", HUB_CASES, ids=["%s-%d" % (c[1], i) for i, c in enumerate(HUB_CASES)])
def test_classify_hub(hub, kind):
    assert _preflight.classify_hub(hub)[0] == kind


def _hub_run(hub, settings=None, node="spark-2"):
    probes = {h: registered() for h in HOSTS}
    probes[node] = registered(user_part(hub=hub))
    by_key, entries = run(probes=probes, settings=settings)
    return by_key[("hub_reach", node)], by_key


@pytest.mark.parametrize("hub,texts,fix_texts", [
    (_err("ConnectionRefusedError", "[Errno 111] Connection refused", 111),
     ["the node cannot reach %s: connection refused: [Errno 111] Connection refused" % HUB_URL],
     ["specdec_server_hf_endpoint", "https_proxy"]),
    (_err("gaierror", "[Errno -2] Name or service not known", -2), ["DNS failure"], ["/etc/resolv.conf"]),
    (_err("SSLCertVerificationError", "certificate verify failed: certificate is not yet valid", 1,
          "certificate is not yet valid"), ["certificate not yet valid (clock)"], ["sudo timedatectl set-ntp true"]),
    (_err("SSLCertVerificationError", "certificate verify failed: self-signed certificate in certificate chain", 1),
     ["untrusted issuer"], ["update-ca-certificates"]),
    (_err("OSError", "[Errno 113] No route to host", 113), ["no route"], ["https_proxy"]),
    (_err("TimeoutError", "timed out"), ["timed out"], ["firewall"]),
    (dict(HUB_OK, status=503), ["answered HTTP 503 to the node"], ["server error"]),
    (dict(HUB_OK, status=407), ["HTTP 407 (proxy authentication required)"], ["https_proxy"]),
])
def test_hub_reach_failures(hub, texts, fix_texts):
    got, by_key = _hub_run(hub)
    assert got["status"] == "fail", got
    for text in texts:
        assert text in got["message"], (text, got)
    for text in fix_texts:
        assert text in got["fix"], (text, got)
    assert by_key[("hub_reach", "spark-1")]["status"] == "pass"


@pytest.mark.parametrize("hub,settings,status,text", [
    (HUB_OK, None, "pass", "the node reached %s: HTTP 200" % HUB_URL),
    (dict(HUB_OK, status=401), None, "pass", "HTTP 401 (no token is sent from here; access is the hf_access row)"),
    (dict(HUB_OK, status=404), None, "warn", "answered HTTP 404"),
    (dict(HUB_OK, status=429), None, "warn", "HTTP 429 (too many requests)"),
    (dict(HUB_OK, status=None, offline="1", skipped=True), None, "skip",
     "skipped: the node runs offline (HF_HUB_OFFLINE=1 in its environment)"),
    (dict(HUB_OK, status=None, skipped=True, reason="no model in the plan"), None, "skip", "skipped: no model in the plan"),
    (HUB_OK, {"download": {"spark-2": False}}, "skip",
     "skipped: specdec_server_download is false (the nodes download nothing)"),
])
def test_hub_reach_pass_warn_skip(hub, settings, status, text):
    got, dummy = _hub_run(hub, settings)
    assert got["status"] == status and text in got["message"], got


GPU_OUT = "GPU 0: NVIDIA GB10 (UUID: GPU-5c1c8f0e-2b47-4a0b-9d3c-0e6c2a7d8f11)"
GPU_CASES = [
    (0, "== TensorRT-LLM ==\n" + GPU_OUT + "\n", "", "ok"),
    (0, "", "", "no_gpu_listed"),
    (125, "", "docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].",
     "toolkit"),
    (125, "", "docker: Error response from daemon: unknown or invalid runtime name: nvidia.", "toolkit"),
    (125, "", "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI "
              "runtime create failed: runc create failed: unable to start container process: error during container "
              "init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as "
              "'legacy'\nnvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.", "driver"),
    (125, "", "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
              "object file: no such file or directory: unknown.", "driver"),
    (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95", "", "mismatch"),
    (6, "No devices were found", "", "no_device"),
    (127, "", "docker: Error response from daemon: failed to create task for container: OCI runtime create failed: "
              "exec: \"nvidia-smi\": executable file not found in $PATH: unknown.", "no_smi"),
    (124, "", "", "timeout"),
    (1, "", "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock",
     "docker"),
    (125, "", "docker: Error response from daemon: No such image: nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12.",
     "no_image"),
    (125, "", "docker: Error response from daemon: something new.", "other"),
]


@pytest.mark.parametrize("rc,out,err,kind", GPU_CASES, ids=["%s-%d" % (c[3], i) for i, c in enumerate(GPU_CASES)])
def test_classify_gpu_run(rc, out, err, kind):
    got_kind, detail = _preflight.classify_gpu_run(rc, out, err)
    assert got_kind == kind
    if kind == "ok":
        assert detail == GPU_OUT


def _gpu_run(gpu, settings=None):
    probes = {h: registered() for h in HOSTS}
    probes["spark-1"] = registered(user_part(gpu=gpu))
    by_key, entries = run(probes=probes, settings=dict({"gpus": {"spark-1": True, "spark-2": True}}, **(settings or {})))
    return by_key[("gpu_run", "spark-1")]


GPU_RAN = {"present": True, "evidence": "/usr/bin/nvidia-smi", "ran": True, "reason": ""}


def test_gpu_run_pass_and_skips():
    got = _gpu_run(dict(GPU_RAN, rc=0, stdout=GPU_OUT, stderr=""))
    assert got["status"] == "pass" and got["message"] == "docker run --gpus all %s nvidia-smi -L: %s" % (IMAGE, GPU_OUT)
    got = _gpu_run(dict(GPU_NONE))
    assert got["status"] == "skip" and got["message"] == "skipped: no GPU on this node (no nvidia-smi on PATH, no /dev/nvidia*)"
    got = _gpu_run(dict(GPU_RAN, ran=False, rc=None, stdout="", stderr=""), {"gpus": {"spark-1": False}})
    assert got["status"] == "skip" and "trtllm_container_gpus: false" in got["message"]
    got = _gpu_run(dict(GPU_RAN, ran=False, rc=None, stdout="", stderr="", reason="the image is not on this node"))
    assert got["status"] == "skip" and got["message"] == "skipped: %s is not on this node yet (preflight pulls nothing)" % IMAGE


@pytest.mark.parametrize("rc,out,err,kind", [c for c in GPU_CASES if c[3] not in ("ok", "no_image")],
                         ids=[c[3] for c in GPU_CASES if c[3] not in ("ok", "no_image")])
def test_gpu_run_failures_name_kind_and_fix(rc, out, err, kind):
    got = _gpu_run(dict(GPU_RAN, rc=rc, stdout=out, stderr=err))
    assert got["status"] == "fail"
    assert got["message"].startswith("docker run --gpus all %s nvidia-smi -L failed (%s): " % (IMAGE, kind))
    expected = _preflight.GPU_FIXES.get(kind) or _preflight.FIXES["gpu_run"].replace("%(image)s", IMAGE)
    assert got["fix"] == expected
    if kind == "toolkit":
        assert "nvidia-ctk runtime configure --runtime=docker" in got["fix"]


def test_lab_clean_run_new_rows():
    """What the lab shows without a fault: SSH both ways, the hub reached, no GPU."""
    by_key, dummy = run()
    for host in HOSTS:
        assert by_key[("gpu_run", host)]["status"] == "skip"
        assert by_key[("hub_reach", host)]["status"] == "pass"
        assert by_key[("ssh_nodes", host)]["status"] == "pass"
        assert by_key[("ssh_containers", host)]["status"] == "pass"


# ------------------------------------------------------------------ a container change left pending
NEW_IMAGE = IMAGE  # the change asked for the plan's image (a run stopped after the recreation)
OLD_IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.4.0rc1"


def pending_record(change_image=NEW_IMAGE + "-sparkops-sshd", kept_image=OLD_IMAGE + "-sparkops-sshd"):
    return json.dumps({
        "schema_version": 1, "name": "trtllm-multinode", "kept_name": "trtllm-multinode-previous",
        "kept_at": "2026-11-24T06:40:00+00:00",
        "container": {"id": "c-old" + "0" * 59, "created": "",
                      "settings": {"image": kept_image, "image_id": "sha256:" + "4" * 64}},
        "change": {"image": change_image, "reference": NEW_IMAGE, "differences": ["image"]},
        "sshd": {"host": "192.168.100.10", "port": 2233, "timeout": 300}})


def pending_fact(kept=(0, json.dumps([{"Id": "c-old" + "0" * 59}]), ""), text=None, error=""):
    return {"record": RECORD_PATH, "present": True, "text": pending_record() if text is None else text, "error": error,
            "kept": None if kept is None else {"rc": kept[0], "stdout": kept[1], "stderr": kept[2]}}


def pending_run(fact, image=IMAGE, env=None):
    plan = copy.deepcopy(PLAN)
    plan["deployment"]["image"] = image
    probes = {h: registered() for h in HOSTS}
    over = {"pending_change": fact}
    if env is not None:
        over["env"] = env
    probes["spark-2"] = registered(user_part(**over))
    by_key, entries = run(probes=probes, plan=plan)
    assert by_key[("pending_change", "spark-1")]["status"] == "pass"
    return by_key[("pending_change", "spark-2")], entries


COMPARED = (" (told from the image names alone, an image and its derived image with sshd counting as one: %s against "
            "the change's %s-sparkops-sshd and the kept container's %s-sparkops-sshd; the deployment compares every "
            "container setting%s)")
REPLACE_INSTEAD = ", so another changed setting makes it replace the new container instead"
NO_CONTAINER = (1, "[]", "Error: No such object: trtllm-multinode")


@pytest.mark.parametrize("image, env, outlook", [
    (IMAGE, None, "the next deployment with %s finishes it: it starts the server in the new container, then removes "
                  "trtllm-multinode-previous once that serves, or gives the node trtllm-multinode-previous back if it "
                  "fails" % IMAGE + COMPARED % (IMAGE, NEW_IMAGE, OLD_IMAGE, REPLACE_INSTEAD)),
    (OLD_IMAGE, None, "the next deployment with %s (the previous image) backs it out: with "
                      "trtllm_container_allow_recreate it removes the new container and gives trtllm-multinode-previous "
                      "its name back (the same container, not a new one)" % OLD_IMAGE
     + COMPARED % (OLD_IMAGE, NEW_IMAGE, OLD_IMAGE, REPLACE_INSTEAD)),
    ("other/image:2", None, "the next deployment with other/image:2 replaces the new container (with "
                            "trtllm_container_allow_recreate) and keeps trtllm-multinode-previous until the new server "
                            "serves" + COMPARED % ("other/image:2", NEW_IMAGE, OLD_IMAGE, "")),
    # No container under its name (the run stopped between the keep and the creation): the deployment creates it.
    ("other/image:2", NO_CONTAINER, "the next deployment with other/image:2 creates trtllm-multinode (there is none) "
                                    "and keeps trtllm-multinode-previous until the new server serves"
     + COMPARED % ("other/image:2", NEW_IMAGE, OLD_IMAGE, "")),
])
def test_pending_change_warns_with_the_kept_container_the_images_since_when_and_the_next_run(image, env, outlook):
    got, entries = pending_run(pending_fact(), image=image, env=env)
    assert got["status"] == "warn"
    assert got["message"] == (
        "a container change to %s-sparkops-sshd is pending since 2026-11-24T06:40:00+00:00: the previous container "
        "(id c-old0000000, image %s-sparkops-sshd) is kept, stopped, as trtllm-multinode-previous; this run asks for "
        "%s: %s" % (NEW_IMAGE, OLD_IMAGE, image, outlook))
    assert got["fix"] == _preflight.FIXES["pending_change"]
    assert _preflight.verdict(entries)[0] is True  # a warning, not a failure


@pytest.mark.parametrize("kept, env, where", [
    ((1, "", "Error: No such object: trtllm-multinode-previous"), None,
     "recorded, but trtllm-multinode-previous is gone"),
    ((0, json.dumps([{"Id": "c-stranger"}]), ""), None, "recorded, but trtllm-multinode-previous is another container"),
    ((1, "", "Error: No such object: trtllm-multinode-previous"),
     (0, json.dumps([dict(json.loads(ENV_OK)[0], Id="c-old" + "0" * 59)]), ""),
     "recorded, but it runs as trtllm-multinode (an interrupted keep or restore)"),
])
def test_pending_change_that_does_not_match_the_containers_says_the_next_run_stops(kept, env, where):
    got, entries = pending_run(pending_fact(kept=kept), env=env)
    assert got["status"] == "warn" and _preflight.verdict(entries)[0] is True
    assert ("(id c-old0000000, image %s-sparkops-sshd) is %s; this run asks for %s: the next deployment stops before "
            "any change" % (OLD_IMAGE, where, IMAGE)) in got["message"]
    assert got["fix"] == ("Look at the containers (docker ps -a); once trtllm-multinode is the container to keep, remove "
                          "%s and re-run." % RECORD_PATH)


def test_pending_change_when_docker_cannot_be_read():
    got, dummy = pending_run(pending_fact(kept=(1, "", "permission denied while trying to connect to the docker")))
    assert got["status"] == "warn"
    assert ("is kept as trtllm-multinode-previous (Docker could not be read); this run asks for %s: Docker could not "
            "be read, so what the next deployment does is unknown" % IMAGE) in got["message"]


@pytest.mark.parametrize("text, error, why", [
    ("not json", "", "unreadable"),
    ("", "cat: %s: Permission denied" % RECORD_PATH, "cat: %s: Permission denied" % RECORD_PATH),
])
def test_an_unreadable_record_warns(text, error, why):
    got, dummy = pending_run(pending_fact(kept=None, text=text, error=error))
    assert got["status"] == "warn"
    assert got["message"] == ("%s is there but is not a container change record of schema 1 (%s): the next deployment "
                              "ignores it and keeps nothing" % (RECORD_PATH, why))
    assert got["fix"] == "Remove %s, or run teardown.yml." % RECORD_PATH


def test_pending_change_skipped_without_its_fact():
    probes = {h: registered() for h in HOSTS}
    del probes["spark-2"]["results"][0]["facts"]["pending_change"]
    by_key, dummy = run(probes=probes)
    assert by_key[("pending_change", "spark-2")]["status"] == "skip"


def _ring_fabric(host, down=()):
    # NVIDIA's manual plan for three Sparks (connect-three-sparks), in the ring's netdev order; both ports Up.
    plan = {"s1": ["192.168.0.1/24", "192.168.1.1/24", "192.168.2.1/24", "192.168.3.1/24"],
            "s2": ["192.168.4.1/24", "192.168.5.1/24", "192.168.0.2/24", "192.168.1.2/24"],
            "s3": ["192.168.2.2/24", "192.168.3.2/24", "192.168.4.2/24", "192.168.5.2/24"]}[host]
    devs = ["enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1"]
    return {"selected_port": 1, "selected_interfaces": devs[2:], "nccl_socket_ifname": ",".join(devs[2:]),
            "interfaces": [{"netdev": d, "speed_mbps": 200000, "state": "down" if d in down else "up",
                            "ipv4": [plan[i]]} for i, d in enumerate(devs)]}


def test_three_sparks_get_the_member_checks_and_a_ring_its_cabling():
    # Issue 24: a deployment of three Sparks (topology spark_cluster) runs the member checks on every node; in a ring
    # the cabling check reads all four logical interfaces of each (module_utils/_layout.cabling_problems).
    plan = copy.deepcopy(PLAN)
    plan["deployment"].update(topology="spark_cluster", members=["s1", "s2", "s3"], head="s1")
    plan["plan"].update(layout="ring", tp_size=1, head="s1")
    hosts = ["s1", "s2", "s3"]
    fabrics = {h: _ring_fabric(h) for h in hosts}
    by_key, entries = run(hosts=hosts, probes={h: registered() for h in hosts}, fabrics=fabrics, plan=plan)
    assert [e["id"] for e in entries] == list(_preflight.CHECK_IDS) * 3
    assert {by_key[("same_port", h)]["status"] for h in hosts} == {"pass"}
    fabrics["s3"] = _ring_fabric("s3", down=("enp1s0f0np0",))
    by_key, entries = run(hosts=hosts, probes={h: registered() for h in hosts}, fabrics=fabrics, plan=plan)
    assert by_key[("same_port", "s1")]["status"] == "fail"
    assert by_key[("same_port", "s1")]["message"] == (
        "s3: enp1s0f0np0 (cable to s1 enp1s0f1np1) not Up; a ring needs all four logical interfaces of every Spark Up: "
        "cable port 0 of each Spark to port 1 of the next (S1->S2->S3->S1).")
