# -*- coding: utf-8 -*-
# Unit tests of module_utils/_status.py (fleet status): the node-side readings (docker inspect, the server process
# through /proc, the probed URL, the engines' counters through the benchmark's adapters) and the controller-side
# merge into one row per deployment, on synthetic inputs: a serving single Spark, a pair with an unreachable worker
# or head, a stale state file, a TensorRT-LLM pair with a stand-in TensorRT-LLM metrics text, and the table.

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _status

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "bench")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


LLAMA_TARGET = "sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF"
QWEN = "nvidia/Qwen3-235B-A22B-FP4"
IMAGE_ID = "sha256:" + "a" * 64
OTHER_IMAGE_ID = "sha256:" + "b" * 64
IMAGE = "sparkops-lab/llamacpp-server:b1"


# ---------------------------------------------------------------------------- node side
def test_parse_time_docker_nanoseconds_and_zero_time():
    when = _status.parse_time("2026-11-23T18:20:11.123456789Z")
    assert when.isoformat() == "2026-11-23T18:20:11.123456+00:00"
    assert _status.parse_time("2026-11-23T18:20:11+00:00").hour == 18
    assert _status.parse_time("0001-01-01T00:00:00Z") is None
    assert _status.parse_time("yesterday") is None and _status.parse_time(None) is None


def inspect_json(running=True, status="running", image_id=IMAGE_ID, started="2026-11-23T18:00:00.5Z", image=IMAGE):
    return json.dumps([{"Id": "c0ffee", "Image": image_id, "RestartCount": 0,
                        "Config": {"Image": image},
                        "State": {"Running": running, "Status": status, "StartedAt": started}}])


def test_container_facts_running_absent_and_docker_error():
    got = _status.container_facts(0, inspect_json(), "", "trtllm-multinode")
    assert got == {"name": "trtllm-multinode", "exists": True, "running": True, "status": "running",
                   "image": "sparkops-lab/llamacpp-server:b1", "image_id": IMAGE_ID,
                   "started_at": "2026-11-23T18:00:00.5Z", "restart_count": 0, "error": None}
    absent = _status.container_facts(1, "[]", "Error: No such container: trtllm-multinode", "trtllm-multinode")
    assert absent["exists"] is False and absent["status"] == "absent" and absent["error"] is None
    denied = _status.container_facts(1, "", "permission denied while trying to connect to the Docker daemon socket",
                                     "trtllm-multinode")
    assert denied["status"] == "unknown" and denied["error"].startswith("permission denied")
    exited = _status.container_facts(0, inspect_json(running=False, status="exited", started="0001-01-01T00:00:00Z"),
                                     "", "c")
    assert exited["running"] is False and exited["status"] == "exited" and exited["started_at"] is None


STAT_TAIL = " ".join(["0"] * 12)  # fields 10-21 of proc(5); starttime is field 22


def proc(host_pid, nspid, state="S", start=1000, argv=("/usr/local/bin/llama-server", "-m", "x")):
    # comm with a space and a parenthesis, as a process may name itself.
    stat = "%d (llama server)) %s 1 1 1 0 -1 4194560 %s %d 0" % (host_pid, state, STAT_TAIL, start)
    return {"host_pid": host_pid, "status": "Name:\tllama-server\nNSpid:\t%d\t%d\n" % (host_pid, nspid),
            "stat": stat, "cmdline": list(argv)}


def test_parse_proc_stat_and_nspid():
    assert _status.parse_proc_stat(proc(4242, 57)["stat"]) == ("S", 1000)
    assert _status.parse_proc_stat("garbage") == (None, None)
    assert _status.parse_nspid("Name:\tx\nNSpid:\t4242\t57\n") == 57
    assert _status.parse_nspid("Name:\tx\nNSpid:\t4242\n") == 4242
    assert _status.parse_nspid("Name:\tx\n") is None


def test_server_process_found_by_its_container_pid_with_its_age():
    procs = [proc(4100, 1, argv=("bash", "/var/lib/sparkops/specdec/entrypoint.sh")), proc(4242, 57, start=1000)]
    got = _status.server_process("57\n", procs, "1311.50 2000.0", 100)
    # /proc/uptime 1311.5 s, started 1000 ticks = 10 s after boot: 1301 s.
    assert got == {"running": True, "pid": 57, "host_pid": 4242, "command": "llama-server", "elapsed_seconds": 1301,
                   "reason": None}


@pytest.mark.parametrize("pidfile,procs,reason", [
    ("", [], "no server.pid"),
    ("abc", [], "not a pid"),
    ("57", [proc(4242, 58)], "no process 57 in the container"),
    ("57", [proc(4242, 57, state="Z")], "is a zombie"),
])
def test_server_process_not_running(pidfile, procs, reason):
    got = _status.server_process(pidfile, procs, "100.0 1.0", 100)
    assert got["running"] is False and reason in got["reason"] and got["elapsed_seconds"] is None


def state(dep="spark-1", members=("spark-1",), engine="llamacpp", method="draft_target", k=4, target=LLAMA_TARGET,
          port=8080, host="localhost", fingerprint="fp1", image_id=IMAGE_ID, updated="2026-11-23T18:00:00+00:00",
          topology=None):
    """A state file as new_state writes it (schema 1), with argv and environment that the status must drop."""
    members = list(members)
    return {
        "schema_version": 1, "deployment": dep, "engine": engine,
        "desired": {"topology": topology or ("two_sparks" if len(members) > 1 else "single_spark"), "members": members,
                    "head": members[0], "image": IMAGE, "preset": "p", "method": method, "target_model": target,
                    "draft_model": None if method == "none" else "draft/model", "max_draft_len": k, "tp_size": len(members),
                    "host": host, "port": port, "models": [], "trtllm_version": None, "version_source": None},
        "running": {"fingerprint": fingerprint, "config_text": "", "endpoint": "http://127.0.0.1:%s/v1" % port,
                    "target_model": target, "method": method, "max_draft_len": k, "started_at": updated,
                    "launch": {"argv": ["llama-server", "--api-key", "never-shown"], "env": {"SECRET_ENV": "x"},
                               "config_sha256": "0", "image_id": image_id, "models": {}, "port": port,
                               "members": members}},
        "previous": None, "tuned": {"method": method, "max_draft_len": k, "engine": engine, "measured_at": "t"},
        "created_at": updated, "updated_at": updated,
    }


def test_trim_state_drops_argv_environment_and_config():
    trimmed = _status.trim_state(state())
    text = json.dumps(trimmed)
    assert "never-shown" not in text and "SECRET_ENV" not in text and "config_text" not in text
    assert trimmed["running"]["image_id"] == IMAGE_ID and trimmed["running"]["members"] == ["spark-1"]
    assert trimmed["running"]["max_draft_len"] == 4 and trimmed["tuned"] == {"method": "draft_target", "max_draft_len": 4}
    assert _status.head_of(trimmed) == "spark-1" and _status.members_of(trimmed) == ["spark-1"]
    assert _status.trim_state("not a dict") is None


@pytest.mark.parametrize("host,port,url", [
    ("localhost", 8080, "http://127.0.0.1:8080"),
    ("0.0.0.0", 8355, "http://127.0.0.1:8355"),
    ("10.0.0.5", 8000, "http://10.0.0.5:8000"),
    ("fd00::5", 8000, "http://[fd00::5]:8000"),
    ("localhost", None, None),
])
def test_probe_base(host, port, url):
    trimmed = _status.trim_state(state(host=host, port=port))
    if port is None:
        trimmed["desired"]["port"] = None
    assert _status.probe_base(trimmed) == url


def test_model_ids():
    assert _status.model_ids('{"object": "list", "data": [{"id": "a"}, {"id": "b"}]}') == ["a", "b"]
    assert _status.model_ids("<html>") is None and _status.model_ids('{"data": 3}') is None


def test_metrics_counters_llamacpp_cumulative():
    got = _status.metrics_counters("llamacpp", fixture("llamacpp-metrics-after.txt"))
    assert got["present"] is True and got["standin"] is False and got["error"] is None
    assert (got["draft_tokens"], got["accepted_tokens"], got["drafts"]) == (540.0, 504.0, 138.0)


def test_metrics_counters_trtllm_text():
    # A stand-in TensorRT-LLM /prometheus/metrics text (built from TensorRT-LLM's MetricsCollector, see its header).
    got = _status.metrics_counters("trtllm", fixture("trtllm-prometheus-after.txt"))
    assert (got["draft_tokens"], got["accepted_tokens"], got["drafts"]) == (4200.0, 2530.0, 1400.0)
    assert got["acceptance_length_gauge"] == pytest.approx(2.81)


def test_metrics_counters_lab_standin_and_errors():
    assert _status.metrics_counters("trtllm", fixture("standin-prometheus.txt"))["standin"] is True
    bad = _status.metrics_counters("llamacpp", "llamacpp:spec_decode_num_draft_tokens_total twelve\n")
    assert bad["present"] is False and "not a number" in bad["error"]
    assert "no known" in _status.metrics_counters("sglang", "x 1\n")["error"]
    none = _status.metrics_counters("trtllm", "trtllm_generation_tokens_total 5\n")
    assert none["present"] is False and none["draft_tokens"] is None


# ---------------------------------------------------------------------------- controller side
def probe_of(st, health=200, models=None, metrics_text=None, metrics_status=200, path=None):
    engine = st["engine"]
    counters = None
    if metrics_text is not None and metrics_status == 200:
        counters = _status.metrics_counters(engine, metrics_text)
    return {"deployment": st["deployment"], "engine": engine,
            "base_url": _status.probe_base(_status.trim_state(st)),
            "health": {"status": health, "error": None if health else "[Errno 111] Connection refused"},
            "models": {"ids": [st["running"]["target_model"]] if models is None else models, "error": None},
            "metrics": {"path": path or _status.METRICS_PATHS[engine], "status": metrics_status,
                        "error": None if metrics_status == 200 else "HTTP %s" % metrics_status, "counters": counters}}


NO_PIDFILE = "no server.pid (the server was never started, or server.sh stopped it)"


def node_fact(host, states=(), probes=(), running=True, image_id=IMAGE_ID, process=True, elapsed=600, image=IMAGE):
    return {"changed": False, "status": {
        "node": host, "now": "2026-11-23T18:30:00+00:00",
        "container": _status.container_facts(0, inspect_json(running=running, status="running" if running else "exited",
                                                             image_id=image_id, image=image), "", "trtllm-multinode"),
        "server_process": {"running": process, "pid": 57 if process else None, "host_pid": 4242 if process else None,
                           "command": "llama-server" if process else None,
                           "elapsed_seconds": elapsed if process else None,
                           "reason": None if process else NO_PIDFILE},
        "records": [{"path": "/var/lib/sparkops/specdec/deployments/%s.json" % s["deployment"], "error": None,
                     "state": _status.trim_state(s)} for s in states],
        "probes": list(probes), "docker_error": None}}


UNREACHABLE = {"unreachable": True, "changed": False,
               "msg": "Task failed: Failed to connect to the host via ssh: ssh: connect to host 192.168.250.12 port 22: "
                      "No route to host"}


def test_single_spark_serving_llamacpp():
    st = state(k=2)
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, metrics_text=fixture("llamacpp-metrics-after.txt"))])}
    rows = _status.build_rows(["spark-1"], ["spark-1"], facts)
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == "serving" and row["serving"] and row["reachable"] and row["problems"] == []
    assert row["server"]["method"] == "draft_target" and row["server"]["max_draft_len"] == 2
    assert row["server"]["uptime_seconds"] == 600 and row["server"]["process"] == "llama-server"
    assert row["nodes"]["spark-1"]["container"]["uptime_seconds"] == 1799
    assert row["nodes"]["spark-1"]["state_record"] == "current"
    acc = row["acceptance"]
    assert acc["available"] and acc["rate"] == pytest.approx(504 / 540, abs=1e-4)
    assert (acc["draft_tokens"], acc["accepted_tokens"], acc["drafts"]) == (540, 504, 138)
    assert acc["mean_accepted_length"] == pytest.approx(1 + 504 / 138, abs=1e-4)
    assert acc["since"].startswith("server start") and acc["source"] == "/metrics"
    assert row["missing"] == {}
    summary = _status.summary(rows)
    assert summary["serving"] == ["spark-1"] and summary["not_serving"] == []
    assert summary["deployments"]["spark-1"]["acceptance_rate"] == acc["rate"]
    assert summary["deployments"]["spark-1"]["max_draft_len"] == 2
    assert _status.verdict(rows) == (True, "1 deployment(s) serving: spark-1.")


def test_pair_with_unreachable_worker_is_a_row_not_an_abort():
    st = state(dep="spark-1", members=("spark-1", "spark-2"), engine="trtllm", method="eagle3", k=3, target=QWEN,
               port=8355, host="0.0.0.0")
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, metrics_text=fixture("trtllm-prometheus-after.txt"))]),
             "spark-2": UNREACHABLE}
    rows = _status.build_rows(["spark-1", "spark-2"], ["spark-1", "spark-2"], facts)
    assert len(rows) == 1
    row = rows[0]
    # The head still answers, but a TP=2 server without its worker is not healthy: degraded, not serving.
    assert row["status"] == "degraded" and row["serving"] is False and row["reachable"] is False
    assert row["nodes"]["spark-2"]["reachable"] is False and row["nodes"]["spark-2"]["role"] == "worker"
    assert row["nodes"]["spark-2"]["error"].startswith("unreachable: Failed to connect")
    assert row["nodes"]["spark-1"]["reachable"] is True
    assert any(p.startswith("spark-2 (worker): unreachable") for p in row["problems"])
    # TensorRT-LLM counters: accepted / drafted since the server started.
    assert row["acceptance"]["rate"] == pytest.approx(2530 / 4200, abs=1e-4)
    assert row["acceptance"]["source"] == "/prometheus/metrics"
    assert row["acceptance"]["mean_accepted_length"] == pytest.approx(1 + 2530 / 1400, abs=1e-4)
    summary = _status.summary(rows)
    assert summary["unreachable_nodes"] == ["spark-2"] and summary["not_serving"] == ["spark-1"]
    ok, msg = _status.verdict(rows)
    assert ok is False and msg.startswith("1 of 1 deployment(s) not serving: spark-1 degraded (spark-2 (worker)")


def test_pair_with_unreachable_head_known_from_the_worker():
    st = state(dep="pair-a", members=("spark-1", "spark-2"), engine="trtllm", method="eagle3", k=3, target=QWEN)
    facts = {"spark-1": UNREACHABLE, "spark-2": node_fact("spark-2", [st], [], process=False)}
    row = _status.build_rows(["spark-1", "spark-2"], ["spark-1", "spark-2"], facts)[0]
    assert row["deployment"] == "pair-a" and row["status"] == "down" and row["head"] == "spark-1"
    assert row["missing"]["health"] == "the head spark-1 is not reachable"
    assert row["missing"]["uptime"] == "the head spark-1 is not reachable"
    assert row["server"]["process_running"] is None and row["acceptance"] is None
    assert row["nodes"]["spark-2"]["state_record"] == "current"


def test_host_that_left_the_play_is_unreachable():
    st = state()
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, metrics_text=fixture("llamacpp-metrics-after.txt"))])}
    rows = _status.build_rows(["spark-1", "spark-3"], ["spark-1"], facts)
    assert [r["status"] for r in rows] == ["serving", "unreachable"]
    node = rows[1]
    assert node["kind"] == "node" and node["deployment"] is None and node["reachable"] is False
    assert "left the play" in node["nodes"]["spark-3"]["error"]
    assert _status.summary(rows)["nodes_without_deployment"] == {
        "spark-3": {"status": "unreachable", "reachable": False, "pending_change": False}}


def test_stale_pair_record_on_the_old_worker_after_a_single_spark_deploy():
    old = state(dep="spark-1", members=("spark-1", "spark-2"), engine="trtllm", fingerprint="old",
                updated="2026-11-22T10:00:00+00:00")
    new = state(dep="spark-1", members=("spark-1",), fingerprint="new", updated="2026-11-23T18:00:00+00:00")
    facts = {"spark-1": node_fact("spark-1", [new], [probe_of(new, metrics_text=fixture("llamacpp-metrics-after.txt"))]),
             "spark-2": node_fact("spark-2", [old], [], running=False, process=False)}
    rows = _status.build_rows(["spark-1", "spark-2"], None, facts)
    dep, node = rows
    assert dep["deployment"] == "spark-1" and dep["members"] == ["spark-1"] and dep["status"] == "serving"
    assert dep["engine"] == "llamacpp" and dep["stale_records_on"] == ["spark-2"]
    assert node["kind"] == "node" and node["status"] == "not_deployed" and node["reachable"] is True
    assert node["problems"] == ["spark-2: holds an older state file of deployment spark-1, whose newest record does "
                                "not name it"]


def test_member_with_other_record_and_other_image_degrades():
    st = state(dep="pair-a", members=("spark-1", "spark-2"), engine="trtllm", method="eagle3", k=3, target=QWEN)
    other = copy.deepcopy(st)
    other["running"]["fingerprint"] = "older"
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, metrics_text=fixture("trtllm-prometheus-after.txt"))]),
             "spark-2": node_fact("spark-2", [other], [], image_id=OTHER_IMAGE_ID, process=False)}
    row = _status.build_rows(["spark-1", "spark-2"], None, facts)[0]
    assert row["status"] == "degraded"
    assert row["nodes"]["spark-2"]["state_record"] == "differs"
    joined = " | ".join(row["problems"])
    assert "spark-2: the container runs image sha256:bbbbbbbbbbbb, the server was launched from sha256:aaaaaaaaaaaa" in joined
    assert "spark-2: its state file records another launch" in joined
    assert "the members run different images" in joined


def test_pair_running_the_derived_sshd_image_serves():
    # Two Sparks run <image>-sparkops-sshd (built FROM the image): another id than the launch's image id. Each node
    # builds its own, so their ids may differ: what must match is the image each node's server was launched from.
    st = state(dep="pair-a", members=("spark-1", "spark-2"), engine="trtllm", method="eagle3", k=3, target=QWEN)
    derived = IMAGE + "-sparkops-sshd"
    probes = [probe_of(st, metrics_text=fixture("trtllm-prometheus-after.txt"))]
    facts = {"spark-1": node_fact("spark-1", [st], probes, image_id=OTHER_IMAGE_ID, image=derived),
             "spark-2": node_fact("spark-2", [st], [], image_id=OTHER_IMAGE_ID, image=derived, process=False)}
    row = _status.build_rows(["spark-1", "spark-2"], None, facts)[0]
    assert row["status"] == "serving" and row["problems"] == []
    facts["spark-2"] = node_fact("spark-2", [st], [], image_id="sha256:" + "c" * 64, image=derived, process=False)
    row = _status.build_rows(["spark-1", "spark-2"], None, facts)[0]
    assert row["status"] == "serving" and row["problems"] == []
    # The worker's server was launched from another engine image (its own state file says so).
    other = copy.deepcopy(st)
    other["running"]["launch"]["image_id"] = "sha256:" + "d" * 64
    facts["spark-2"] = node_fact("spark-2", [other], [], image_id="sha256:" + "c" * 64, image=derived, process=False)
    row = _status.build_rows(["spark-1", "spark-2"], None, facts)[0]
    assert row["status"] == "degraded"
    assert "the members run different images (sha256:aaaaaaaaaaaa, sha256:dddddddddddd)" in row["problems"]


@pytest.mark.parametrize("health,models,problem", [
    (503, None, "/health answered 503"),
    (None, None, "/health did not answer ([Errno 111] Connection refused)"),
    (200, ["other/model"], "/v1/models lists ['other/model'], not " + LLAMA_TARGET),
])
def test_server_not_answering_is_down(health, models, problem):
    st = state()
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, health=health, models=models)], process=health == 200)}
    row = _status.build_rows(["spark-1"], None, facts)[0]
    assert row["status"] == "down" and row["serving"] is False
    assert any(problem in p for p in row["problems"]), row["problems"]
    assert row["acceptance"] is None and row["missing"]["acceptance"] == "the server does not serve"


def test_acceptance_reasons():
    st = state(engine="trtllm", target=QWEN, method="eagle3")
    no_perf = probe_of(st, metrics_text=None, metrics_status=404)
    got = _status.acceptance("eagle3", dict(no_perf, engine="trtllm"))
    assert got["available"] is False and got["reason"] == "/prometheus/metrics: HTTP 404"
    empty = probe_of(st, metrics_text="trtllm_generation_tokens_total 5\n")
    got = _status.acceptance("eagle3", dict(empty, engine="trtllm"))
    assert "set specdec_server_return_perf_metrics: true" in got["reason"]
    standin = probe_of(st, metrics_text=fixture("standin-prometheus.txt"))
    assert "stand-in" in _status.acceptance("eagle3", dict(standin, engine="trtllm"))["reason"]
    zero = probe_of(state(), metrics_text="llamacpp:spec_decode_num_draft_tokens_total 0\n"
                                          "llamacpp:spec_decode_num_accepted_tokens_total 0\n")
    got = _status.acceptance("draft_target", dict(zero, engine="llamacpp"))
    assert got["available"] is False and got["draft_tokens"] == 0 and "no token drafted" in got["reason"]
    assert _status.acceptance("none", None)["reason"] == "no speculation (method none)"


def test_method_none_serves_without_acceptance():
    st = state(method="none", k=None)
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, metrics_text="llamacpp:tokens_predicted_total 9\n")])}
    row = _status.build_rows(["spark-1"], None, facts)[0]
    assert row["status"] == "serving" and row["missing"] == {"acceptance": "no speculation (method none)"}


def test_failed_module_and_skipped_node():
    facts = {"spark-1": {"failed": False, "msg": "MODULE FAILURE: /usr/bin/python3: not found"},
             "spark-2": {"skipped": True, "skip_reason": "Conditional result was False"}}
    rows = _status.build_rows(["spark-1", "spark-2"], None, facts)
    assert rows[0]["status"] == "unknown" and rows[0]["reachable"] is True
    assert rows[0]["nodes"]["spark-1"]["error"] == "no status read: MODULE FAILURE: /usr/bin/python3: not found"
    assert rows[0]["problems"] == ["spark-1: no status read: MODULE FAILURE: /usr/bin/python3: not found"]
    assert rows[1]["status"] == "unreachable" and rows[1]["nodes"]["spark-2"]["error"].startswith("skipped")
    assert _status.verdict(rows)[0] is False and _status.verdict(rows)[1].startswith("No deployment found")


def test_table_one_line_per_row_aligned():
    st = state(k=2)
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, metrics_text=fixture("llamacpp-metrics-after.txt"))]),
             "spark-2": UNREACHABLE}
    lines = _status.table(_status.build_rows(["spark-1", "spark-2"], None, facts))
    assert len(lines) == 3
    header, dep, node = lines
    assert header.split() == list(_status.TABLE_COLUMNS)
    assert dep.split() == ["spark-1", "serving", "spark-1", "running", "llamacpp", "draft_target", "2", "200",
                           LLAMA_TARGET, "a" * 12, "10m00s", "0.93", "(504/540)"]
    assert node.split()[:3] == ["-", "unreachable", "spark-2(unreachable)"]
    # Columns line up: each row's status starts where the header's STATUS does.
    assert dep.index("serving") == header.index("STATUS") == node.index("unreachable")


def test_document_has_the_summary_and_every_row():
    st = state()
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, metrics_text=fixture("llamacpp-metrics-after.txt"))])}
    rows = _status.build_rows(["spark-1"], None, facts)
    doc = _status.document(rows, "2026-11-23T18:30:00+00:00")
    assert doc["schema_version"] == 1 and doc["deployments"] == rows and doc["summary"] == _status.summary(rows)
    assert "since the server process started" in doc["acceptance_definition"]
    json.dumps(doc)  # serialisable as it is


def test_docker_not_readable_on_a_node_is_a_problem_with_its_fix():
    denied = ("permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: "
              "Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.24/containers/trtllm-multinode/json\": dial unix "
              "/var/run/docker.sock: connect: permission denied")
    fact = node_fact("spark-2")
    fact["status"]["container"] = _status.container_facts(1, "", denied, "trtllm-multinode")
    row = _status.build_rows(["spark-2"], None, {"spark-2": fact})[0]
    assert row["status"] == "not_deployed" and len(row["problems"]) == 1
    problem = row["problems"][0]
    assert problem.startswith("spark-2: Docker could not be read: permission denied while trying to connect")
    assert problem.endswith("or read as root with -e status_become=true)")
    other = _status.docker_problem("spark-1", "Cannot connect to the Docker daemon. Is the docker daemon running?")
    assert other == "spark-1: Docker could not be read: Cannot connect to the Docker daemon. Is the docker daemon running?"


def test_member_whose_status_could_not_be_read():
    st = state(dep="pair-a", members=("spark-1", "spark-2"), engine="trtllm", method="eagle3", k=3, target=QWEN)
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, metrics_text=fixture("trtllm-prometheus-after.txt"))]),
             "spark-2": {"failed": False, "msg": "specdec_status_info: timeout=0 is below 1: set status_http_timeout "
                                                 "to a number of seconds >= 1."}}
    row = _status.build_rows(["spark-1", "spark-2"], None, facts)[0]
    assert row["status"] == "degraded" and row["nodes"]["spark-2"]["reachable"] is True
    assert row["problems"] == ["spark-2: no status read: specdec_status_info: timeout=0 is below 1: set "
                               "status_http_timeout to a number of seconds >= 1."]


# ---------------------------------------------------------------- a pending container change
OLD_IMAGE = "sparkops-lab/llamacpp-server:b0"
KEPT_ID = "f" * 64
RECORD = "/var/lib/sparkops/specdec/container-previous.json"


def change_record(name="trtllm-multinode", container_id=KEPT_ID):
    """A record as module_utils/_container_change.new_record writes it: OLD_IMAGE kept for a change to IMAGE."""
    return {"schema_version": 1, "name": name, "kept_name": name + "-previous", "kept_at": "2026-11-24T04:00:00+00:00",
            "container": {"id": container_id, "created": "",
                          "settings": {"image": OLD_IMAGE, "image_id": OTHER_IMAGE_ID}},
            "change": {"image": IMAGE, "reference": IMAGE, "differences": ["image"]}, "sshd": {}}


def kept_inspect(container_id=KEPT_ID):
    return json.dumps([{"Id": container_id, "Image": OTHER_IMAGE_ID, "Config": {"Image": OLD_IMAGE},
                        "State": {"Status": "exited", "Running": False}}])


def pending(container_id=KEPT_ID, kept=(0, None, "")):
    rc, out, err = kept
    facts = _status.kept_facts(rc, kept_inspect(container_id) if out is None else out, err, "trtllm-multinode-previous")
    return _status.pending_change(json.dumps(change_record()), facts, RECORD)


def test_pending_change_names_the_kept_and_the_requested_image():
    assert _status.pending_change(None, None, RECORD) is None
    assert pending() == {"record": RECORD, "error": None, "kept_name": "trtllm-multinode-previous",
                         "kept_image": OLD_IMAGE, "kept_image_id": OTHER_IMAGE_ID, "requested_image": IMAGE,
                         "differences": ["image"], "kept_at": "2026-11-24T04:00:00+00:00", "kept_container": "present"}
    assert pending(container_id="a" * 64)["kept_container"] == "other"
    assert pending(kept=(1, "", "Error: No such object: trtllm-multinode-previous"))["kept_container"] == "absent"
    assert pending(kept=(1, "", "Cannot connect to the Docker daemon"))["kept_container"] == "unknown"
    bad = _status.pending_change("{not json", None, RECORD)
    assert bad["error"] == "not a container change record of schema 1" and bad["kept_name"] is None


def test_pending_problem_lines():
    assert _status.pending_problem("spark-1", None) is None
    assert _status.pending_problem("spark-1", pending()) == (
        "spark-1: a container change to %s is pending since 2026-11-24T04:00:00+00:00: the previous container (image "
        "%s) is kept, stopped, as trtllm-multinode-previous; re-run the deployment with the change's settings to "
        "finish it (trtllm-multinode-previous goes once the new server serves, or comes back if it fails), or with "
        "the previous image (%s) and settings and -e trtllm_container_allow_recreate=true to back it out (the new "
        "container goes and trtllm-multinode-previous gets its name back)" % (IMAGE, OLD_IMAGE, OLD_IMAGE))
    # Docker could not be read: the same two ways out (the record says the container was kept).
    assert _status.pending_problem("spark-1", pending(kept=(1, "", "Cannot connect to the Docker daemon"))).endswith(
        "is kept as trtllm-multinode-previous (Docker could not be read); re-run the deployment with the change's "
        "settings to finish it (trtllm-multinode-previous goes once the new server serves, or comes back if it fails), "
        "or with the previous image (%s) and settings and -e trtllm_container_allow_recreate=true to back it out (the "
        "new container goes and trtllm-multinode-previous gets its name back)" % OLD_IMAGE)
    # Gone, or another container under its name: neither way works; the deployment stops until the record goes.
    for kept, where in (((1, "", "No such object"), "trtllm-multinode-previous is gone (it cannot be restored)"),
                        ((0, None, ""), "trtllm-multinode-previous is another container (it cannot be restored)")):
        change = pending(kept=kept) if kept[0] else pending(container_id="a" * 64)
        assert _status.pending_problem("spark-1", change).endswith(
            "is recorded, but %s; the next deployment stops before any change (the record does not match the "
            "containers): look at them (docker ps -a) and, once trtllm-multinode is the container to keep, remove %s "
            "and re-run" % (where, RECORD))
    assert _status.pending_problem("spark-1", _status.pending_change("[]", None, RECORD)) == (
        "spark-1: the container change record %s cannot be read (not a container change record of schema 1): remove "
        "it, or run teardown.yml" % RECORD)


def test_deployment_with_a_pending_change_is_degraded_with_its_line_in_the_table():
    st = state(k=2)
    fact = node_fact("spark-1", [st], [probe_of(st, metrics_text=fixture("llamacpp-metrics-after.txt"))])
    fact["status"]["pending_change"] = pending()
    rows = _status.build_rows(["spark-1"], ["spark-1"], {"spark-1": fact})
    row = rows[0]
    assert row["status"] == "degraded" and row["nodes"]["spark-1"]["pending_change"] == pending()
    assert row["problems"] == [_status.pending_problem("spark-1", pending())]
    assert _status.summary(rows)["deployments"]["spark-1"]["pending_changes"] == ["spark-1"]
    lines = _status.table(rows)
    assert len(lines) == 3 and lines[1].split()[3] == "running+pending"
    assert lines[2] == "PENDING " + _status.pending_problem("spark-1", pending())
    # Without a record the same node serves and the table has no PENDING line.
    del fact["status"]["pending_change"]
    rows = _status.build_rows(["spark-1"], ["spark-1"], {"spark-1": fact})
    assert rows[0]["status"] == "serving" and rows[0]["nodes"]["spark-1"]["pending_change"] is None
    assert len(_status.table(rows)) == 2


def test_node_without_deployment_reports_its_pending_change():
    fact = node_fact("spark-2")
    fact["status"]["pending_change"] = pending()
    rows = _status.build_rows(["spark-2"], None, {"spark-2": fact})
    assert rows[0]["status"] == "not_deployed"
    assert rows[0]["problems"] == [_status.pending_problem("spark-2", pending())]
    assert _status.summary(rows)["nodes_without_deployment"]["spark-2"]["pending_change"] is True


# ---------------------------------------------------------------------------- torn down and retired deployments
TORN_AT = "2026-11-24T08:00:00+00:00"


def torn(st, when=TORN_AT):
    """The state file as teardown.yml leaves it (module_utils/_teardown.torn_down_state)."""
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _teardown
    return _teardown.torn_down_state(st, when)


def absent_node(host, states=()):
    """A node after teardown: no container, no server process, its state files."""
    fact = node_fact(host, states, [], running=False, process=False)
    fact["status"]["container"] = _status.container_facts(1, "[]", "Error: No such container: trtllm-multinode",
                                                          "trtllm-multinode")
    return fact


def test_trim_state_keeps_torn_down_at_and_the_previous_launch():
    trimmed = _status.trim_state(torn(state(k=2)))
    assert trimmed["running"] is None and trimmed["torn_down_at"] == TORN_AT
    assert trimmed["previous"]["max_draft_len"] == 2 and trimmed["previous"]["port"] == 8080
    assert "never-shown" not in json.dumps(trimmed)
    assert _status.torn_down(trimmed) and not _status.torn_down(_status.trim_state(state()))
    # No server recorded, but no teardown either (not written by teardown.yml): not torn down.
    assert not _status.torn_down(dict(trimmed, torn_down_at=None))


def test_torn_down_deployment_is_not_a_deployment_that_is_down():
    st = torn(state(dep="pair-a", members=("spark-1", "spark-2"), engine="trtllm", method="eagle3", k=3, target=QWEN))
    facts = {"spark-1": absent_node("spark-1", [st]), "spark-2": absent_node("spark-2", [st])}
    assigned = {"spark-1": ["pair-a"], "spark-2": ["pair-a"]}
    rows = _status.build_rows(["spark-1", "spark-2"], None, facts, assigned)
    dep = rows[0]
    assert dep["deployment"] == "pair-a" and dep["status"] == "torn_down" and dep["serving"] is False
    assert dep["problems"] == [] and dep["missing"] == {} and dep["in_inventory"] is True
    assert dep["torn_down_at"] == TORN_AT and dep["last_launch"]["target_model"] == QWEN
    # Its nodes serve nothing now: each is a row of its own.
    assert [(r["kind"], r["status"], r["members"]) for r in rows[1:]] == [
        ("node", "not_deployed", ["spark-1"]), ("node", "not_deployed", ["spark-2"])]
    summary = _status.summary(rows)
    assert summary["not_serving"] == [] and summary["serving"] == [] and summary["retired"] == []
    assert summary["torn_down"] == ["pair-a"]
    assert summary["deployments"]["pair-a"]["status"] == "torn_down"
    assert summary["deployments"]["pair-a"]["torn_down_at"] == TORN_AT
    assert sorted(summary["nodes_without_deployment"]) == ["spark-1", "spark-2"]
    assert _status.verdict(rows) == (False, "No deployment is deployed. Torn down: pair-a.")
    line = _status.table(rows)[1].split()
    # The status column, and what served last.
    assert line[:2] == ["pair-a", "torn_down"] and line[5:9] == ["eagle3", "3", "-", QWEN]


def test_torn_down_next_to_a_serving_deployment_keeps_all_serving():
    live = state(k=2, updated="2026-11-24T09:00:00+00:00")
    old = torn(state(dep="pair-a", members=("spark-1", "spark-2"), fingerprint="old"))
    facts = {"spark-1": node_fact("spark-1", [old, live],
                                  [probe_of(live, metrics_text=fixture("llamacpp-metrics-after.txt"))]),
             "spark-2": absent_node("spark-2", [old])}
    rows = _status.build_rows(["spark-1", "spark-2"], None, facts)
    assert [(r["deployment"], r["status"]) for r in rows] == [("pair-a", "torn_down"), ("spark-1", "serving"),
                                                              (None, "not_deployed")]
    # Without the inventory nothing is said about it.
    assert [r["in_inventory"] for r in rows] == [None, None, None]
    summary = _status.summary(rows)
    assert summary["serving"] == ["spark-1"] and summary["not_serving"] == [] and summary["torn_down"] == ["pair-a"]
    assert _status.verdict(rows) == (True, "1 deployment(s) serving: spark-1. Torn down: pair-a.")


def test_members_of_an_ended_deployment_outside_the_play_are_not_unreachable():
    # molecule/layouts: switch-a (spark-1..4) torn down, spark-3 and spark-4 removed from the inventory afterwards;
    # spark-1 keeps the torn-down record. The run never tried spark-3 or spark-4: they are not unreachable nodes.
    old = torn(state(dep="switch-a", members=("spark-1", "spark-2", "spark-3", "spark-4"), fingerprint="old"))
    live = state(k=2, updated="2026-11-24T09:00:00+00:00")
    facts = {"spark-1": node_fact("spark-1", [old, live],
                                  [probe_of(live, metrics_text=fixture("llamacpp-metrics-after.txt"))]),
             "spark-2": absent_node("spark-2", [old])}
    rows = _status.build_rows(["spark-1", "spark-2"], None, facts)
    assert ("switch-a", "torn_down") in [(r["deployment"], r["status"]) for r in rows]
    assert _status.summary(rows)["unreachable_nodes"] == []
    # A node of the play that Ansible could not reach still is, whatever its deployments' status.
    facts["spark-2"] = {"unreachable": True, "msg": "ssh: connect to host spark-2 port 22: No route to host"}
    assert _status.summary(_status.build_rows(["spark-1", "spark-2"], None, facts))["unreachable_nodes"] == ["spark-2"]
    # A live deployment whose member is not in this run (--limit) names it, as before.
    pair = state(dep="pair-a", members=("spark-1", "spark-9"), updated="2026-11-24T10:00:00+00:00")
    facts = {"spark-1": node_fact("spark-1", [pair], [probe_of(pair)])}
    assert _status.summary(_status.build_rows(["spark-1"], None, facts))["unreachable_nodes"] == ["spark-9"]


def test_record_of_an_id_the_inventory_no_longer_assigns_is_retired():
    # molecule/fleet left pair-a.json on spark-1 and spark-2; the lab inventory now deploys spark-1 as "spark-1".
    live = state(k=2, updated="2026-11-24T09:00:00+00:00")
    old = state(dep="pair-a", members=("spark-1", "spark-2"), engine="trtllm", method="eagle3", k=3, target=QWEN,
                fingerprint="old", port=8355)
    facts = {"spark-1": node_fact("spark-1", [old, live],
                                  [probe_of(live, metrics_text=fixture("llamacpp-metrics-after.txt")),
                                   dict(probe_of(old, health=None, models=[]), models={"ids": None, "error": "x"})]),
             "spark-2": absent_node("spark-2", [old])}
    assigned = {"spark-1": ["spark-1"], "spark-2": ["spark-1", "spark-2"]}
    rows = _status.build_rows(["spark-1", "spark-2"], None, facts, assigned)
    by_id = {r["deployment"]: r for r in rows}
    retired = by_id["pair-a"]
    assert retired["status"] == "retired" and retired["in_inventory"] is False and retired["serving"] is False
    assert len(retired["problems"]) == 1
    assert retired["problems"][0].startswith("pair-a: the inventory no longer assigns deployment pair-a and it does "
                                             "not serve: remove its state file /var/lib/sparkops/specdec/deployments/"
                                             "pair-a.json on spark-1, spark-2")
    assert "teardown.yml -e confirm=yes -e teardown_remove_state=true --limit spark-1,spark-2" in retired["problems"][0]
    assert by_id["spark-1"]["status"] == "serving" and by_id["spark-1"]["in_inventory"] is True
    # spark-2 serves nothing the inventory knows: a row of its own.
    assert by_id[None]["members"] == ["spark-2"] and by_id[None]["status"] == "not_deployed"
    summary = _status.summary(rows)
    assert summary["retired"] == ["pair-a"] and summary["not_serving"] == [] and summary["serving"] == ["spark-1"]
    assert summary["deployments"]["pair-a"]["in_inventory"] is False
    assert _status.verdict(rows) == (True, "1 deployment(s) serving: spark-1. Retired: pair-a.")
    lines = _status.table(rows)
    assert [line.split("  ")[0] for line in lines[1:3]] == ["pair-a (not in inventory)", "spark-1"]
    assert lines[-1] == "INVENTORY " + retired["problems"][0]


def test_deployment_that_serves_outside_the_inventory_keeps_its_status_with_a_problem():
    st = state(dep="pair-a", k=2)
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, metrics_text=fixture("llamacpp-metrics-after.txt"))])}
    rows = _status.build_rows(["spark-1"], None, facts, {"spark-1": ["spark-1"]})
    row = rows[0]
    assert row["status"] == "serving" and row["in_inventory"] is False
    assert row["problems"] == [_status.not_in_inventory_problem("pair-a", ["spark-1"])]
    assert "not in the inventory" in row["problems"][0] and "--limit spark-1" in row["problems"][0]
    assert _status.summary(rows)["serving"] == ["pair-a"] and _status.verdict(rows)[0] is True
    assert _status.table(rows)[-1] == "INVENTORY " + row["problems"][0]
    # A torn-down record outside the inventory stays torn_down (teardown ended it; nothing to fix).
    old = torn(state(dep="pair-a"))
    rows = _status.build_rows(["spark-1"], None, {"spark-1": absent_node("spark-1", [old])}, {"spark-1": ["spark-1"]})
    assert rows[0]["status"] == "torn_down" and rows[0]["in_inventory"] is False and rows[0]["problems"] == []
    assert not [line for line in _status.table(rows) if line.startswith("INVENTORY")]


# ---------------------------------------------------------------------------- the supervisor gave up
GAVE_UP = {"key": "spark-1/f/s", "at": "2026-11-27T10:00:00Z", "failed_starts": 3, "max_failed_starts": 3,
           "last_failure": "exited before /health answered 200 (started at 2026-11-27T09:59:50Z)"}


def test_a_supervisor_give_up_is_a_problem_with_its_line_in_the_table():
    st = dict(state(k=2), supervisor_gave_up=GAVE_UP)
    trimmed = _status.trim_state(st)
    assert trimmed["supervisor_gave_up"] == {k: GAVE_UP[k] for k in ("at", "failed_starts", "max_failed_starts",
                                                                     "last_failure")}
    facts = {"spark-1": node_fact("spark-1", [st], [probe_of(st, health=None)], process=False)}
    rows = _status.build_rows(["spark-1"], ["spark-1"], facts)
    row = rows[0]
    assert row["status"] == "down" and row["supervisor_gave_up"] == trimmed["supervisor_gave_up"]
    line = _status.gave_up_problem("spark-1", trimmed["supervisor_gave_up"])
    assert line in row["problems"] and "after 3 consecutive failed starts" in line and "deploy playbook" in line
    assert _status.table(rows)[-1] == "SUPERVISOR " + line
    # Without the key (a start by the role rewrote the state file): no such problem, no line.
    st = state(k=2)
    rows = _status.build_rows(["spark-1"], ["spark-1"], {"spark-1": node_fact("spark-1", [st], [probe_of(st)])})
    assert rows[0]["supervisor_gave_up"] is None and _status.trim_state(st)["supervisor_gave_up"] is None
    assert not [x for x in _status.table(rows) if x.startswith("SUPERVISOR")]


# ---------------------------------------------------------------------------- the supervisor's liveness probe
def test_a_refused_liveness_probe_and_a_boot_loop_give_up_are_problems():
    guard = {"schema_version": 1, "key": "k", "unstable_boots": ["a", "b"],
             "liveness": {"at": "2026-12-07T21:00:00Z", "result": "unauthorized", "seconds": 0.01, "failures": 0,
                          "unauthorized": True, "restarts": 0, "last_restart": None}}
    facts_of = _status.supervisor_facts(json.dumps(guard))
    assert facts_of == {"key": "k", "liveness": guard["liveness"], "unstable_boots": 2}
    assert _status.supervisor_facts("not json") is None and _status.supervisor_facts(None) is None
    st = state(k=2)
    fact = node_fact("spark-1", [st], [probe_of(st)])
    fact["status"]["supervisor"] = facts_of
    row = _status.build_rows(["spark-1"], ["spark-1"], {"spark-1": fact})[0]
    assert row["status"] == "degraded" and row["supervisor"] == facts_of
    assert [p for p in row["problems"] if "liveness probe was refused (HTTP 401/403)" in p]
    # An answering probe is no problem.
    fact["status"]["supervisor"] = dict(facts_of, liveness=dict(guard["liveness"], result="ok", unauthorized=False))
    row = _status.build_rows(["spark-1"], ["spark-1"], {"spark-1": fact})[0]
    assert row["status"] == "serving" and row["problems"] == []
    entry = {"kind": "boot_loop", "key": "k", "at": "2026-12-07T21:00:00Z", "unstable_boots": ["a", "b", "c"],
             "reason": "a boot loop (specdec_server_boot_loop_starts 3); autostart disarmed"}
    trimmed = _status.trim_state(dict(st, supervisor_gave_up=entry))
    assert trimmed["supervisor_gave_up"] == {"at": entry["at"], "kind": "boot_loop", "reason": entry["reason"]}
    line = _status.gave_up_problem("spark-1", trimmed["supervisor_gave_up"])
    assert line.startswith("spark-1: the supervisor gave up at 2026-12-07T21:00:00Z (boot_loop): a boot loop")
