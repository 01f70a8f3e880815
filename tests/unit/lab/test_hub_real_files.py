"""The lab hub (tests/lab/images/hub/hub_server.py) serving REAL files from --files-dir.

A small temporary file stands in for the GGUFs: repo info / tree with LFS metadata (sha256 oid from
repos.json, not re-hashed), HEAD/GET with ETag, X-Linked-*, Content-Length and Range (206/416), the
repo left out (and the others still served) when the file is missing or its size or stamp disagrees.
The server runs in-process on 127.0.0.1 with a free port.
"""

import hashlib
import importlib.util
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

HUB_SERVER = Path(__file__).resolve().parents[2] / "lab" / "images" / "hub" / "hub_server.py"
REPO = "sparkops-lab/Real-Tiny-GGUF"
NAME = "tiny-q4_k_m.gguf"
DATA = b"GGUF" + bytes(range(256)) * 40  # 10244 bytes


def _load():
    spec = importlib.util.spec_from_file_location("sparkops_lab_hub_server_real", HUB_SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hub_mod():
    return _load()


def _write_repos(tmp_path, sha256=None, size=None):
    entry = {"name": NAME, "path": "gguf/" + NAME, "sha256": sha256 or hashlib.sha256(DATA).hexdigest()}
    if size is not None:
        entry["size"] = size
    spec = {"format": 1, "repos": [
        {"id": REPO, "license": "apache-2.0", "library_name": "gguf", "files": [entry]},
        {"id": "sparkops-lab/generated", "config": {"architectures": ["X"], "model_type": "x"},
         "weights": [{"size": 4096, "seed": "g"}]},
    ]}
    path = tmp_path / "repos.json"
    path.write_text(json.dumps(spec))
    return str(path)


@pytest.fixture
def files_dir(tmp_path):
    d = tmp_path / "files"
    (d / "gguf").mkdir(parents=True)
    (d / "gguf" / NAME).write_bytes(DATA)
    return str(d)


@pytest.fixture
def served(hub_mod, tmp_path, files_dir):
    state = hub_mod.HubState(_write_repos(tmp_path, size=len(DATA)), None, None, files_dir)
    server = hub_mod.make_server("127.0.0.1", 0, state)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1], state
    finally:
        server.shutdown()
        server.server_close()


def _get(url, method="GET", headers=None):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_info_and_tree_carry_lfs_metadata(served):
    url, _state = served
    sha = hashlib.sha256(DATA).hexdigest()
    status, _h, body = _get("%s/api/models/%s?blobs=true" % (url, REPO))
    assert status == 200
    info = json.loads(body)
    sib = {s["rfilename"]: s for s in info["siblings"]}
    assert set(sib) == {".gitattributes", "README.md", NAME}  # no generated stand-in JSON
    assert sib[NAME]["size"] == len(DATA)
    assert sib[NAME]["lfs"] == {"sha256": sha, "size": len(DATA), "pointerSize": sib[NAME]["lfs"]["pointerSize"]}
    pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (sha, len(DATA))).encode()
    assert sib[NAME]["blobId"] == hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
    assert info["library_name"] == "gguf" and "sparkops-lab-standin" not in info["tags"]
    status, _h, body = _get("%s/api/models/%s/tree/main" % (url, REPO))
    entry = [e for e in json.loads(body) if e["path"] == NAME][0]
    assert entry["lfs"]["oid"] == sha and entry["size"] == len(DATA)


def test_download_head_and_ranges(served):
    url, state = served
    sha = hashlib.sha256(DATA).hexdigest()
    commit = state.repos[("model", REPO)].sha
    file_url = "%s/%s/resolve/main/%s" % (url, REPO, NAME)
    status, headers, body = _get(file_url, "HEAD")
    assert status == 200 and body == b""
    assert headers["Content-Length"] == str(len(DATA)) and headers["X-Linked-Size"] == str(len(DATA))
    assert headers["ETag"] == headers["X-Linked-Etag"] == '"%s"' % sha
    assert headers["X-Repo-Commit"] == commit and headers["Accept-Ranges"] == "bytes"
    assert "X-Sparkops-Lab-Standin" not in headers  # a real file, not a stand-in
    status, _h, body = _get(file_url)
    assert status == 200 and body == DATA
    status, headers, body = _get(file_url, headers={"Range": "bytes=4-99"})
    assert status == 206 and body == DATA[4:100] and headers["Content-Range"] == "bytes 4-99/%d" % len(DATA)
    status, _h, body = _get(file_url, headers={"Range": "bytes=10000-"})
    assert status == 206 and body == DATA[10000:]
    status, _h, body = _get(file_url, headers={"Range": "bytes=-4"})
    assert status == 206 and body == DATA[-4:]
    status, headers, _b = _get(file_url, headers={"Range": "bytes=%d-" % len(DATA)})
    assert status == 416 and headers["Content-Range"] == "bytes */%d" % len(DATA)
    status, _h, body = _get("%s/sparkops-lab/generated/resolve/main/model.safetensors" % url)
    assert status == 200 and len(body) == 4096


def test_declared_sha256_is_trusted_not_rehashed(hub_mod, tmp_path, files_dir):
    # The verified digest comes from repos.json (fetch-gguf.py checked it): start-up does not read the file.
    fake = "ab" * 32
    state = hub_mod.HubState(_write_repos(tmp_path, sha256=fake), None, None, files_dir)
    assert state.repos[("model", REPO)].files[NAME].sha256 == fake


@pytest.mark.parametrize("case", ["no_files_dir", "missing", "size", "stamp"])
def test_repo_left_out_others_served(hub_mod, tmp_path, files_dir, case):
    size = len(DATA) + 1 if case == "size" else len(DATA)
    repos = _write_repos(tmp_path, size=size)
    if case == "missing":
        (Path(files_dir) / "gguf" / NAME).unlink()
    if case == "stamp":
        (Path(files_dir) / "gguf" / (NAME + ".sha256")).write_text("%s  %s\n" % ("0" * 64, NAME))
    state = hub_mod.HubState(repos, None, None, None if case == "no_files_dir" else files_dir)
    assert state.left_out == [REPO]
    assert set(state.repos) == {("model", "sparkops-lab/generated")}


def test_matching_stamp_is_accepted(hub_mod, tmp_path, files_dir):
    (Path(files_dir) / "gguf" / (NAME + ".sha256")).write_text("%s  %s\n" % (hashlib.sha256(DATA).hexdigest(), NAME))
    state = hub_mod.HubState(_write_repos(tmp_path), None, None, files_dir)
    assert state.left_out == [] and ("model", REPO) in state.repos
