# -*- coding: utf-8 -*-
# Unit tests of the module sparkops.specdec.preflight_info: what it runs on a node (argv of the SSH
# attempts, the GPU run only where a GPU and the image are present), what it returns for a missing
# command, the node's own Hub request against a loopback HTTP server (status, refused, bad URL,
# HF_HUB_OFFLINE) and its one-line argument errors. The verdicts are tested in test_preflight.py.

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkops.specdec.plugins.modules import preflight_info
from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils import test_preflight as tp


class Exit(Exception):
    pass


class Fail(Exception):
    pass


class Node(object):
    """A fake node: programs on PATH and the outputs of the commands run."""

    def __init__(self, bins=("docker", "ssh", "timeout", "id", "timedatectl", "du", "ss")):
        self.bins = set(bins)
        self.calls = []
        self.outputs = []  # (predicate on argv, (rc, out, err)), first match wins

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        return "/usr/bin/" + arg if arg in self.bins else None

    def run_command(self, args, **kwargs):
        self.calls.append(list(args))
        for pred, out in self.outputs:
            if pred(args):
                return out
        return 0, "", ""


def _raise(cls):
    def handler(self, **kwargs):
        raise cls(kwargs)
    return handler


@pytest.fixture
def node(monkeypatch):
    fake = Node()
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", fake.get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", fake.run_command)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _raise(Exit))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _raise(Fail))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    return fake


def call(args):
    with patch_module_args(args):
        with pytest.raises((Exit, Fail)) as info:
            preflight_info.main()
    return info.value.args[0]


FABRIC = {"spark-1": tp.fabric(ips=("192.168.100.10/24",)), "spark-2": tp.fabric(ips=("192.168.100.11/24",))}
BASE = {"container": "trtllm-multinode", "image": tp.IMAGE, "node": "spark-1", "fabric": FABRIC,
        "hub_check": False, "state_dir": "/nonexistent-state"}


def test_user_part_ssh_argv_read_only_and_bounded(node):
    result = call(dict(BASE))
    facts = result["facts"]
    assert result["changed"] is False
    targets = [(r["host"], r["address"]) for r in facts["ssh_nodes"]]
    assert targets == [("spark-2", "192.168.100.11"), ("spark-2", "192.168.101.11")]
    ssh = [c for c in node.calls if "ssh" in c]
    assert ssh[0] == ["timeout", "15", "ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o",
                      "StrictHostKeyChecking=yes", "-o", "PasswordAuthentication=no", "-o", "LogLevel=ERROR",
                      "192.168.100.11", "true"]
    assert ssh[2] == ["timeout", "15", "docker", "exec", "trtllm-multinode", "ssh", "-o", "BatchMode=yes", "-o",
                      "ConnectTimeout=5", "-o", "StrictHostKeyChecking=yes", "-o", "PasswordAuthentication=no", "-o",
                      "LogLevel=ERROR", "-p", "2233", "192.168.100.11", "true"]
    assert len(ssh) == 4
    assert facts["hub"]["skipped"] is True
    assert facts["hostfile"]["rc"] == 1 and "openmpi-hostfile" in facts["hostfile"]["stderr"]
    assert facts["disk_free"]["rc"] == 0 and int(facts["disk_free"]["stdout"]) > 0


def test_missing_command_is_rc_127_not_a_failure(node):
    node.bins.discard("timedatectl")
    facts = call(dict(BASE, fabric={}))["facts"]
    assert facts["clock"] == {"rc": 127, "stdout": "", "stderr": "timedatectl: command not found"}
    assert facts["ssh_nodes"] == [] and facts["ssh_containers"] == []


def test_root_part_reads_only_ports_and_our_pids(node):
    facts = call(dict(BASE, part="root"))["facts"]
    assert sorted(facts) == ["listen", "ours"]
    assert node.calls == [["docker", "top", "trtllm-multinode", "-eo", "pid"], ["ss", "-Hltnp"]]


def test_gpu_run_only_with_a_gpu_and_the_image(node, monkeypatch):
    facts = call(dict(BASE, fabric={}))["facts"]
    assert facts["gpu"]["present"] is False and facts["gpu"]["ran"] is False
    assert not [c for c in node.calls if "run" in c]
    node.bins.add("nvidia-smi")
    node.outputs.append((lambda a: "run" in a, (0, tp.GPU_OUT + "\n", "")))
    facts = call(dict(BASE, fabric={}))["facts"]
    run = [c for c in node.calls if "run" in c]
    assert run == [["timeout", "120", "docker", "run", "--rm", "--pull", "never", "--network", "none", "--gpus", "all",
                    "--entrypoint", "nvidia-smi", tp.IMAGE, "-L"]]
    assert facts["gpu"]["ran"] is True and facts["gpu"]["stdout"] == tp.GPU_OUT
    node.calls.clear()
    node.outputs.insert(0, (lambda a: a[:3] == ["docker", "image", "inspect"], (1, "", "Error: No such image")))
    facts = call(dict(BASE, fabric={}))["facts"]
    assert facts["gpu"]["ran"] is False and facts["gpu"]["reason"] == "the image is not on this node"
    assert not [c for c in node.calls if "run" in c]
    facts = call(dict(BASE, fabric={}, gpu_check=False))["facts"]
    assert facts["gpu"]["reason"] == "gpu_check is false"


class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802  (http.server's name)
        self.server.paths.append(self.path)
        self.send_response(self.server.status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def hub():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    server.paths, server.status = [], 200
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.mark.parametrize("status", [200, 401, 503])
def test_hub_status_from_the_node(node, hub, status):
    hub.status = status
    endpoint = "http://127.0.0.1:%d" % hub.server_address[1]
    facts = call(dict(BASE, fabric={}, hub_check=True, hub_endpoint=endpoint + "/", hub_repo="org/name",
                      hub_revision="main"))["facts"]
    assert facts["hub"]["url"] == endpoint + "/api/models/org/name/revision/main"
    assert facts["hub"]["status"] == status and facts["hub"]["error"] is None
    assert hub.paths == ["/api/models/org/name/revision/main"]
    assert tp._preflight.classify_hub(facts["hub"]) == ("http", status)


def test_hub_refused_bad_url_offline_and_hf_endpoint(node, monkeypatch):
    endpoint = "http://127.0.0.1:%d" % _closed_port()
    facts = call(dict(BASE, fabric={}, hub_check=True, hub_endpoint=endpoint, hub_repo="org/name"))["facts"]
    assert facts["hub"]["error"]["type"] == "ConnectionRefusedError"
    assert tp._preflight.classify_hub(facts["hub"])[0] == "refused"
    facts = call(dict(BASE, fabric={}, hub_check=True, hub_endpoint="ftp://mirror", hub_repo="org/name"))["facts"]
    assert tp._preflight.classify_hub(facts["hub"])[0] == "bad_url"
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.invalid")
    assert preflight_info.hub_url("", "org/name", "a/b") == "http://mirror.invalid/api/models/org/name/revision/a%2Fb"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    facts = call(dict(BASE, fabric={}, hub_check=True, hub_endpoint=endpoint, hub_repo="org/name"))["facts"]
    assert facts["hub"]["offline"] == "1" and facts["hub"]["skipped"] is True and facts["hub"]["url"] == ""


@pytest.mark.parametrize("over,text", [
    ({"ssh_timeout": 0}, "preflight_info: ssh_timeout=0 is below 1: set a number of seconds >= 1."),
    ({"container_ssh_port": 70000}, "preflight_info: container_ssh_port=70000 is not a port: set "
                                    "specdec_container_ssh_port to 1-65535."),
])
def test_bad_arguments_one_line(node, over, text):
    result = call(dict(BASE, **over))
    assert result["msg"] == text


def test_pending_change_read_only_when_a_record_is_there(node, tmp_path):
    facts = call(dict(BASE, state_dir=str(tmp_path)))["facts"]
    assert facts["pending_change"] == {"record": str(tmp_path / "container-previous.json"), "present": False,
                                       "text": "", "error": "", "kept": None}
    assert ["docker", "container", "inspect", "trtllm-multinode-previous"] not in node.calls
    (tmp_path / "container-previous.json").write_text('{"schema_version": 1}\n')
    node.outputs.append((lambda argv: argv[-1] == "trtllm-multinode-previous", (0, '[{"Id": "c-old"}]', "")))
    pending = call(dict(BASE, state_dir=str(tmp_path)))["facts"]["pending_change"]
    assert pending["present"] is True and pending["text"] == '{"schema_version": 1}' and pending["error"] == ""
    assert pending["kept"] == {"rc": 0, "stdout": '[{"Id": "c-old"}]', "stderr": ""}
