# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What sparkops.specdec can change on a lab node, as one JSON document (run as root on the node:
``docker exec -i NODE python3 - < snapshot.py``). Two snapshots compare equal when nothing changed:

- containers: id, State.StartedAt, status and image of every container of the node's Docker engine;
- images: the ids of the node's images;
- files: every path under the trees below (sha256 of each file up to 64 MiB, size and mtime above,
  "dir" for directories, the target of links, "log" for logs, which the server appends to); the deploy
  user's Ansible temp files are left out;
- server: the state files' running.started_at, the server's pid and its start tick in the engine
  container (/proc/PID/stat field 22: the same number means the same process), and /health;
- groups: the deploy user's groups; addresses: every IPv4 address of the node.
"""

import glob
import hashlib
import json
import os
import subprocess
import urllib.request

CONTAINER = "trtllm-multinode"
STATE_DIR = "/var/lib/sparkops/specdec"
TREES = ["/var/lib/sparkops", "/opt/sparkops", "/etc/netplan", "/home/spark"]
SKIP = ("/home/spark/.ansible", "/opt/sparkops/hf-venv")
USER = "spark"
BIG = 64 * 1024 * 1024


def run(*argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, check=False)
    return proc.returncode, proc.stdout


def describe(path):
    if os.path.islink(path):
        return "link:" + os.readlink(path)
    if os.path.isdir(path):
        return "dir"
    st = os.stat(path)
    if path.endswith(".log"):
        # The server's own log grows with every request (this snapshot's /health included): present, not hashed.
        return "log"
    if st.st_size > BIG:
        return "size:%d mtime:%d" % (st.st_size, st.st_mtime)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def files():
    out = {}
    for tree in TREES:
        for root, dirs, names in os.walk(tree):
            for name in sorted(dirs + names):
                out[os.path.join(root, name)] = describe(os.path.join(root, name))
            # Listed, not walked: the Ansible temp files of the deploy user, the node image's own virtualenv.
            dirs[:] = sorted(d for d in dirs if os.path.join(root, d) not in SKIP)
    return out


def containers():
    out = {}
    rc, ids = run("docker", "ps", "-aq", "--no-trunc")
    for cid in ids.split() if rc == 0 else []:
        rc, text = run("docker", "inspect", cid)
        if rc != 0:
            continue
        info = json.loads(text)[0]
        out[info["Name"].lstrip("/")] = {"id": info["Id"], "started_at": info["State"]["StartedAt"],
                                         "status": info["State"]["Status"], "image": info["Image"]}
    return out


def server():
    states = {}
    port = None
    newest = ""
    for path in sorted(glob.glob(STATE_DIR + "/deployments/*.json")):
        try:
            with open(path) as handle:
                state = json.load(handle)
        except (OSError, ValueError):
            states[path] = None
            continue
        running = state.get("running") or {}
        states[path] = running.get("started_at")
        # The port of the newest server: an earlier scenario's state file (e.g. molecule/fleet's pair-a.json) stays.
        if (running.get("started_at") or "") >= newest and (running.get("launch") or {}).get("port"):
            newest = running.get("started_at") or ""
            port = running["launch"]["port"]
    pid = None
    try:
        with open(STATE_DIR + "/server.pid") as handle:
            pid = handle.read().strip() or None
    except OSError:
        pass
    tick = None
    if pid and pid.isdigit():
        rc, stat = run("docker", "exec", CONTAINER, "cat", "/proc/%s/stat" % pid)
        if rc == 0:
            tick = stat.rsplit(")", 1)[-1].split()[19]
    health = None
    if port:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % int(port), timeout=5) as resp:
                health = resp.status
        except (OSError, ValueError) as exc:
            health = "no answer: %s" % type(exc).__name__
    return {"started_at": states, "pid": pid, "start_tick": tick, "port": port, "health": health}


def main():
    rc, images = run("docker", "images", "-q", "--no-trunc")
    rc_groups, groups = run("id", "-Gn", USER)
    _rc, addrs = run("ip", "-o", "-4", "addr", "show")
    print(json.dumps({
        "containers": containers(),
        "images": sorted(set(images.split())) if rc == 0 else None,
        "files": files(),
        "server": server(),
        "groups": sorted(groups.split()) if rc_groups == 0 else None,
        "addresses": sorted(" ".join(line.split()[1:4]) for line in addrs.splitlines()),
    }, sort_keys=True))


main()
