# -*- coding: utf-8 -*-
"""tests/bench: the generated Spark-sized model of sparse files (sparse_repo.py, laid out as converge_bench.py's
sparse_layout says) is registered as complete the way hf_download registers a download, and the models' no-op of a
pair (the head's offline look and its list, the worker's look against that list) finds it complete without reading
its weights: only the 4 KiB config.json (not an LFS file) is hashed for the list."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

from ansible_collections.sparkops.specdec.plugins.module_utils import _hf, _peer_copy

ROOT = pathlib.Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("converge_bench", ROOT / "tests" / "bench" / "converge_bench.py")
converge_bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(converge_bench)
GB = 100


def lay_out(home):
    layout = converge_bench.sparse_layout(str(ROOT), GB)
    env = dict(os.environ, HOME=str(home))
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "bench" / "sparse_repo.py"), json.dumps(layout)],
                         env=env, capture_output=True, text=True, check=True)
    return layout, json.loads(out.stdout)


def test_the_sparse_model_is_a_complete_download_that_the_no_op_does_not_read(tmp_path):
    head, worker = tmp_path / "head", tmp_path / "worker"
    layout, laid = lay_out(head)
    lay_out(worker)
    assert laid["bytes"] == GB * 10 ** 9 + 4096 and laid["blocks"] == 0  # sparse: no data block
    cache = str(head / ".cache" / "huggingface" / "hub")
    look = _hf.run({"repo_id": converge_bench.SPARSE_REPO, "revision": "main", "cache_dir": cache, "offline": True},
                   check_mode=True)
    assert look["changed"] is False and look["fetched_files"] == [] and look["files"] == len(layout["files"])
    assert look["commit"] == layout["commit"] and look["bytes_total"] == laid["bytes"]

    hashed = []

    def hasher(path):
        hashed.append(os.path.basename(os.path.realpath(path)))
        return _peer_copy.sha256_file(path)

    target = _hf.Target(converge_bench.SPARSE_REPO, "model", cache_dir=cache)
    manifest = _peer_copy.sender_manifest(target, converge_bench.SPARSE_REPO, look["commit"], hasher=hasher)
    config = [f for f in layout["files"] if f["path"] == "config.json"][0]
    assert manifest["complete"] is True and hashed == [config["etag"]]  # the weights' sha256 is the Hub's record

    receiver = _hf.Target(converge_bench.SPARSE_REPO, "model", cache_dir=str(worker / ".cache" / "huggingface" / "hub"))
    got = _peer_copy.receive(receiver, converge_bench.SPARSE_REPO, "main", manifest, transport=None,
                             source_name="head", check_mode=True)
    assert got["copied_files"] == [] and got["linked_files"] == [] and got["changed"] is False
