# -*- coding: utf-8 -*-
# Unit tests of the module sparkops.specdec.specdec_status_info: what it reads on a node (docker inspect and top,
# the pid file, a fake /proc, the state files) and the HTTP reads against a loopback llama-server stand-in (health,
# models, /metrics), only for the deployments the node heads; the same result in check mode; its one-line argument
# error; Docker missing. The merge is tested in module_utils/test_status.py.

from __future__ import annotations

import http.server
import json
import os
import threading

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkops.specdec.plugins.modules import specdec_status_info
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils import test_status as ts


class Exit(Exception):
    pass


class Fail(Exception):
    pass


class Node(object):
    """A fake node: programs on PATH and the outputs of the commands run."""

    def __init__(self):
        self.bins = {"docker"}
        self.calls = []
        self.outputs = {}

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        return "/usr/bin/" + arg if arg in self.bins else None

    def run_command(self, args, **kwargs):
        self.calls.append(list(args))
        return self.outputs.get(tuple(args), self.outputs.get(tuple(args[:2]), (0, "", "")))


def _raise(cls):
    def handler(self, **kwargs):
        raise cls(kwargs)
    return handler


KEPT_INSPECT = ("docker", "container", "inspect", "trtllm-multinode-previous")


@pytest.fixture
def node(monkeypatch, tmp_path):
    fake = Node()
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", fake.get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", fake.run_command)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _raise(Exit))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _raise(Fail))
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "uptime").write_text("1311.50 2000.00\n")
    server = ts.proc(4242, 57, start=10 * os.sysconf("SC_CLK_TCK"))
    (proc / "4242" / "status").write_text(server["status"])
    (proc / "4242" / "stat").write_text(server["stat"])
    (proc / "4242" / "cmdline").write_bytes(b"/usr/local/bin/llama-server\0-m\0/models/x.gguf\0")
    monkeypatch.setattr(specdec_status_info, "PROC", str(proc))
    fake.outputs[("docker", "container")] = (0, ts.inspect_json(), "")
    fake.outputs[("docker", "top")] = (0, "PID\n4100\n4242\n", "")
    fake.outputs[KEPT_INSPECT] = (1, "", "Error: No such object: trtllm-multinode-previous")
    return fake


class Server(http.server.BaseHTTPRequestHandler):
    routes = {}
    seen = []
    # Like llama-server with --api-key-file: every path but /health needs "Authorization: Bearer <key>".
    key = None
    auth = []

    def do_GET(self):
        Server.seen.append(self.path)
        Server.auth.append(self.headers.get("Authorization"))
        status, body = Server.routes.get(self.path, (404, "not found"))
        if Server.key and self.path not in ("/health", "/v1/health") and \
                self.headers.get("Authorization") != "Bearer " + Server.key:
            status, body = 401, '{"error": {"message": "Invalid API Key", "code": 401}}'
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Server.seen = []
    Server.key = None
    Server.auth = []
    Server.routes = {"/health": (200, '{"status": "ok"}'),
                     "/v1/models": (200, json.dumps({"object": "list", "data": [{"id": ts.LLAMA_TARGET}]})),
                     "/metrics": (200, ts.fixture("llamacpp-metrics-after.txt"))}
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


def write_state(state_dir, st):
    path = state_dir / "deployments" / ("%s.json" % st["deployment"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(st))
    return str(path)


def call(args, check_mode=False):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises((Exit, Fail)) as info:
            specdec_status_info.main()
    return info.value.args[0]


def test_head_reads_container_process_records_and_its_server(node, server, tmp_path):
    state_dir = tmp_path / "state"
    path = write_state(state_dir, ts.state(port=server, k=2))
    (state_dir / "server.pid").write_text("57\n")
    got = call({"node": "spark-1", "container": "trtllm-multinode", "state_dir": str(state_dir)})
    assert got["changed"] is False
    status = got["status"]
    assert status["node"] == "spark-1" and status["docker_error"] is None
    assert status["container"]["running"] is True and status["container"]["image_id"] == ts.IMAGE_ID
    assert status["server_process"] == {"running": True, "pid": 57, "host_pid": 4242, "command": "llama-server",
                                        "elapsed_seconds": 1301, "reason": None}
    assert [r["path"] for r in status["records"]] == [path] and status["records"][0]["error"] is None
    assert status["records"][0]["state"]["running"]["max_draft_len"] == 2
    assert "never-shown" not in json.dumps(status)
    probe = status["probes"][0]
    assert probe["base_url"] == "http://127.0.0.1:%d" % server and probe["health"] == {"status": 200, "error": None}
    assert probe["models"] == {"ids": [ts.LLAMA_TARGET], "error": None}
    counters = probe["metrics"]["counters"]
    assert probe["metrics"]["path"] == "/metrics" and counters["draft_tokens"] == 540 and counters["accepted_tokens"] == 504
    assert Server.seen == ["/health", "/v1/models", "/metrics"]
    # Read-only: only docker inspect and docker top were run.
    assert node.calls == [["docker", "container", "inspect", "trtllm-multinode"], list(KEPT_INSPECT),
                          ["docker", "top", "trtllm-multinode", "-eo", "pid"]]
    assert status["pending_change"] is None
    # Check mode reads the same (the node clock aside).
    again = call({"node": "spark-1", "container": "trtllm-multinode", "state_dir": str(state_dir)}, check_mode=True)
    assert dict(again["status"], now=None) == dict(status, now=None)


def test_trtllm_head_reads_prometheus_metrics(node, server, tmp_path):
    Server.routes["/prometheus/metrics"] = (200, ts.fixture("trtllm-prometheus-after.txt"))
    Server.routes["/v1/models"] = (200, json.dumps({"data": [{"id": ts.QWEN}]}))
    state_dir = tmp_path / "state"
    write_state(state_dir, ts.state(dep="pair", members=("spark-1", "spark-2"), engine="trtllm", method="eagle3",
                                    target=ts.QWEN, port=server, host="0.0.0.0"))
    probe = call({"node": "spark-1", "state_dir": str(state_dir)})["status"]["probes"][0]
    assert probe["metrics"]["path"] == "/prometheus/metrics" and probe["metrics"]["counters"]["draft_tokens"] == 4200
    assert "/metrics" not in Server.seen


def test_worker_probes_nothing_and_reports_an_unreadable_record(node, server, tmp_path):
    state_dir = tmp_path / "state"
    write_state(state_dir, ts.state(dep="pair", members=("spark-1", "spark-2"), port=server))
    (state_dir / "deployments" / "broken.json").write_text("{not json")
    status = call({"node": "spark-2", "state_dir": str(state_dir)})["status"]
    assert status["probes"] == [] and Server.seen == []
    broken = [r for r in status["records"] if r["path"].endswith("broken.json")][0]
    assert broken["state"] is None and "is not a schema 1 state file" in broken["error"]
    assert status["server_process"]["running"] is False and "no server.pid" in status["server_process"]["reason"]


def test_server_down_and_container_absent(node, tmp_path):
    node.outputs[("docker", "container")] = (1, "[]", "Error: No such container: trtllm-multinode")
    state_dir = tmp_path / "state"
    write_state(state_dir, ts.state(port=1))  # nothing listens on port 1
    status = call({"node": "spark-1", "state_dir": str(state_dir), "timeout": 2})["status"]
    assert status["container"]["exists"] is False
    assert status["server_process"]["reason"] == "the container is absent"
    assert ["docker", "top", "trtllm-multinode", "-eo", "pid"] not in node.calls
    probe = status["probes"][0]
    assert probe["health"]["status"] is None and probe["health"]["error"]
    assert probe["models"]["ids"] is None and probe["metrics"]["counters"] is None


def test_docker_missing_is_reported_not_a_failure(node, tmp_path):
    node.bins.clear()
    status = call({"node": "spark-1", "state_dir": str(tmp_path), "probe": False})["status"]
    assert status["container"]["error"] == "docker: command not found" and node.calls == []
    assert status["records"] == [] and status["probes"] == []


def test_timeout_below_one_is_one_line(node, tmp_path):
    got = call({"node": "spark-1", "state_dir": str(tmp_path), "timeout": 0})
    assert got["msg"].startswith("specdec_status_info: timeout=0 is below 1: set status_http_timeout")


API_KEY = "lab-key-0123456789abcdef"


def test_api_key_is_sent_and_never_returned(node, server, tmp_path):
    Server.key = API_KEY
    state_dir = tmp_path / "state"
    write_state(state_dir, ts.state(port=server, k=2))
    (state_dir / "server.pid").write_text("57\n")
    args = {"node": "spark-1", "state_dir": str(state_dir)}
    # Without the key llama-server refuses the models and the metrics (401), and serves /health.
    probe = call(args)["status"]["probes"][0]
    assert probe["health"]["status"] == 200
    assert probe["models"]["ids"] is None and probe["models"]["error"] == "HTTP 401"
    assert probe["metrics"]["status"] == 401 and probe["metrics"]["counters"] is None
    Server.auth = []
    got = call(dict(args, api_key=API_KEY))
    probe = got["status"]["probes"][0]
    assert probe["models"]["ids"] == [ts.LLAMA_TARGET] and probe["metrics"]["counters"]["draft_tokens"] == 540
    # /health goes without it (exempt): the key travels only where it is needed.
    assert Server.auth == [None, "Bearer " + API_KEY, "Bearer " + API_KEY]
    assert API_KEY not in json.dumps(got)


def test_pending_container_change_is_read_from_the_record_and_the_kept_container(node, tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    record = ts.change_record()
    (state_dir / "container-previous.json").write_text(json.dumps(record))
    node.outputs[KEPT_INSPECT] = (0, json.dumps([{"Id": record["container"]["id"], "Image": ts.OTHER_IMAGE_ID,
                                                  "Config": {"Image": ts.OLD_IMAGE},
                                                  "State": {"Status": "exited", "Running": False}}]), "")
    status = call({"node": "spark-1", "state_dir": str(state_dir), "probe": False})["status"]
    assert status["pending_change"] == {
        "record": str(state_dir / "container-previous.json"), "error": None, "kept_name": "trtllm-multinode-previous",
        "kept_image": ts.OLD_IMAGE, "kept_image_id": ts.OTHER_IMAGE_ID, "requested_image": ts.IMAGE,
        "differences": ["image"], "kept_at": "2026-11-24T04:00:00+00:00", "kept_container": "present"}
    # The kept container gone: still pending (the record says so), but it can no longer be restored.
    node.outputs[KEPT_INSPECT] = (1, "", "Error: No such object: trtllm-multinode-previous")
    status = call({"node": "spark-1", "state_dir": str(state_dir), "probe": False})["status"]
    assert status["pending_change"]["kept_container"] == "absent"


def test_torn_down_record_is_read_but_not_probed(node, server, tmp_path):
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _teardown

    state_dir = tmp_path / "state"
    # Another server answers on the torn-down deployment's old port: it must not be taken for it.
    write_state(state_dir, _teardown.torn_down_state(ts.state(dep="pair-a", port=server), "2026-11-24T08:00:00+00:00"))
    status = call({"node": "spark-1", "state_dir": str(state_dir)})["status"]
    assert status["probes"] == [] and Server.seen == []
    state = status["records"][0]["state"]
    assert state["running"] is None and state["torn_down_at"] == "2026-11-24T08:00:00+00:00"
    assert state["previous"]["port"] == server and state["previous"]["max_draft_len"] == 4
