"""The lab hub's access log (tests/lab/images/hub/hub_server.py --access-log): one JSON object per request.

Molecule scenarios read it from the lab hub container to prove what was (not) downloaded, so its
fields must be right: time, client, method, path, status, body bytes, the token's name (never the
token) and the Range header. The server runs in-process on 127.0.0.1 with a free port.
"""

import importlib.util
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

HUB_DIR = Path(__file__).resolve().parents[2] / "lab" / "images" / "hub"
TOKEN = "hf_labAccessLogToken0123456789abcdefABCD"
REPO = "openai/gpt-oss-120b"


def _load():
    spec = importlib.util.spec_from_file_location("sparkops_lab_hub_server_log", HUB_DIR / "hub_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def served(tmp_path):
    hub = _load()
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: {"name": "alice", "gated_access": []}}))
    log = tmp_path / "log" / "access.jsonl"  # the directory does not exist yet
    state = hub.HubState(str(HUB_DIR / "repos.json"), str(tokens), None, None)
    server = hub.make_server("127.0.0.1", 0, state, str(log))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1], log
    finally:
        server.shutdown()
        server.server_close()
        server.access_log.close()


def _get(url, method="GET", headers=None):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _entries(log, at_least=0, timeout=10.0):
    """The log's entries; with ``at_least``, first wait (up to ``timeout`` s) until it has that many. The hub writes a
    request's line after it has sent the response, so the client can read the file before the last line is there."""
    deadline = time.time() + timeout
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    while len(entries) < at_least and time.time() < deadline:
        time.sleep(0.05)
        entries = [json.loads(line) for line in log.read_text().splitlines()]
    return entries


def test_every_request_is_one_json_line(served):
    url, log = served
    auth = {"Authorization": "Bearer " + TOKEN}
    status, info = _get("%s/api/models/%s" % (url, REPO), headers=auth)
    assert status == 200
    name = [s["rfilename"] for s in json.loads(info)["siblings"] if s["rfilename"].endswith(".json")][0]
    file_url = "%s/%s/resolve/main/%s" % (url, REPO, name)
    assert _get(file_url, "HEAD")[0] == 200
    status, body = _get(file_url, headers=auth)
    assert status == 200 and body
    status, part = _get(file_url, headers={"Range": "bytes=2-5"})
    assert status == 206 and len(part) == 4
    assert _get("%s/%s/resolve/main/no-such-file" % (url, REPO))[0] == 404
    assert _get("%s/api/whoami-v2" % url, headers={"Authorization": "Bearer hf_wrong"})[0] == 401

    entries = _entries(log, at_least=6)
    # One line per request; a handler thread writes its line after its response, so lines of requests in quick
    # succession may swap places: they are matched by what they record, not by their position.
    assert sorted((e["method"], e["status"], e["path"]) for e in entries) == sorted([
        ("GET", 200, "/api/models/%s" % REPO), ("HEAD", 200, "/%s/resolve/main/%s" % (REPO, name)),
        ("GET", 200, "/%s/resolve/main/%s" % (REPO, name)), ("GET", 206, "/%s/resolve/main/%s" % (REPO, name)),
        ("GET", 404, "/%s/resolve/main/no-such-file" % REPO), ("GET", 401, "/api/whoami-v2")])
    by = {(e["method"], e["status"], e["path"].startswith("/api/")): e for e in entries}
    entries = [by[("GET", 200, True)], by[("HEAD", 200, False)], by[("GET", 200, False)], by[("GET", 206, False)],
               by[("GET", 404, False)], by[("GET", 401, True)]]
    assert all(set(e) == {"time", "client", "method", "path", "status", "bytes", "user", "range"} for e in entries)
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", e["time"]) for e in entries)
    assert {e["client"] for e in entries} == {"127.0.0.1"}
    assert entries[0]["path"] == "/api/models/%s" % REPO and entries[0]["user"] == "alice"
    # HEAD sends no body; a GET logs the body bytes it sent, a range GET the range and its 4 bytes.
    assert entries[1]["bytes"] == 0 and entries[1]["user"] == "anonymous"
    assert entries[2]["path"] == "/%s/resolve/main/%s" % (REPO, name) and entries[2]["bytes"] == len(body)
    assert entries[3]["range"] == "bytes=2-5" and entries[3]["bytes"] == 4 and entries[2]["range"] is None
    assert entries[5]["user"] == "<invalid-token>"
    # The token never, in any request.
    assert TOKEN not in log.read_text() and "hf_wrong" not in log.read_text()


def test_log_is_appended_across_restarts(tmp_path):
    hub = _load()
    log = tmp_path / "access.jsonl"
    for done in range(2):
        state = hub.HubState(str(HUB_DIR / "repos.json"), None, None, None)
        server = hub.make_server("127.0.0.1", 0, state, str(log))
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            assert _get("http://127.0.0.1:%d/healthz" % server.server_address[1])[0] == 200
            # Its line is written after the response: let the handler write it before the log is closed.
            assert len(_entries(log, at_least=done + 1)) == done + 1
        finally:
            server.shutdown()
            server.server_close()
            server.access_log.close()
    assert [e["path"] for e in _entries(log)] == ["/healthz", "/healthz"]


def test_no_access_log_by_default(tmp_path):
    hub = _load()
    state = hub.HubState(str(HUB_DIR / "repos.json"), None, None, None)
    server = hub.make_server("127.0.0.1", 0, state)
    try:
        assert server.access_log is None
    finally:
        server.server_close()


def test_aborted_download_is_logged_with_the_bytes_sent(served):
    """A client killed mid-file (as Molecule hf_download does) leaves a line with fewer bytes than the file."""
    url, log = served
    _status, info = _get("%s/api/models/sparkops-lab/bench-large?blobs=true" % url)
    big = max(json.loads(info)["siblings"], key=lambda s: s.get("size", 0))
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("GET /sparkops-lab/bench-large/resolve/main/%s HTTP/1.1\r\nHost: x\r\n\r\n"
                      % big["rfilename"]).encode())
        got = 0
        while got < 1 << 20:
            got += len(sock.recv(65536))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
    # The file's line (the API request's line may be written after it: each handler logs after its response).
    (entry,) = [e for e in _entries(log, at_least=2, timeout=20) if e["path"].endswith("/resolve/main/" + big["rfilename"])]
    assert entry["status"] == 200
    assert (1 << 20) - 65536 <= entry["bytes"] < big["size"]
