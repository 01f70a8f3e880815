"""tests/lab/drop-stale-images.py against a fake `docker` (a node's images in a JSON file)."""

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "lab" / "drop-stale-images.py"

FAKE_DOCKER = r'''#!/usr/bin/env python3
import json, os, sys
state_file = os.environ["FAKE_DOCKER_STATE"]
state = json.load(open(state_file))
args = sys.argv[1:]
assert args[0] == "exec"
node, cmd = args[1], args[3:]
images = state.setdefault(node, {})
if cmd[0] == "info":
    print("ID"); sys.exit(0)
if cmd[:2] == ["image", "inspect"]:
    tag = cmd[-1]
    if tag not in images:
        sys.exit(1)
    print(images[tag]); sys.exit(0)
if cmd[:2] == ["image", "rm"]:
    images.pop(cmd[-1])
    json.dump(state, open(state_file, "w")); sys.exit(0)
sys.exit(3)
'''


def tarball(path, tags, image_id):
    data = json.dumps([{"Config": "x.json", "RepoTags": tags, "Layers": []}]).encode()
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    Path(str(path) + ".id").write_text(image_id + "\n")


def test_only_stale_tags_are_removed_from_each_node(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    tarball(images / "standin.tar", ["lab/standin:1"], "sha256:new1")
    tarball(images / "other.tar", ["lab/other:2"], "sha256:same2")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "docker").write_text(FAKE_DOCKER)
    (bindir / "docker").chmod(0o755)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({
        "node-a": {"lab/standin:1": "sha256:old1", "lab/other:2": "sha256:same2", "user/own:1": "sha256:u"},
        "node-b": {"lab/other:2": "sha256:same2"},
    }))
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]), FAKE_DOCKER_STATE=str(state))
    out = subprocess.run([sys.executable, str(SCRIPT), str(images), "node-a", "node-b"], env=env,
                         capture_output=True, text=True, check=False, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["changed lab/standin:1 on node-a: sha256:old1 -> sha256:new1"]
    after = json.loads(state.read_text())
    assert after["node-a"] == {"lab/other:2": "sha256:same2", "user/own:1": "sha256:u"}
    assert after["node-b"] == {"lab/other:2": "sha256:same2"}
    # A second run changes nothing.
    again = subprocess.run([sys.executable, str(SCRIPT), str(images), "node-a", "node-b"], env=env,
                           capture_output=True, text=True, check=False, timeout=60)
    assert again.returncode == 0 and again.stdout == ""
