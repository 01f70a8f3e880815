"""sparkops lab: a small Hugging Face Hub compatible HTTP server (Python stdlib only).

It serves generated stand-in repositories (declared in repos.json: sizes and seeds, no model data)
under real model ids, so that huggingface_hub clients (``HF_ENDPOINT=http://host:port``) and the
``sparkops.specdec.hf_download`` module can be exercised without Internet access.

Behaviour copied from the real Hub, as consumed by huggingface_hub (file_download.py, hf_api.py,
utils/_http.py:hf_raise_for_status):

* ``GET /api/{models,datasets}/{repo}[/revision/{rev}]`` repo info (``sha`` = commit, ``siblings``;
  with ``?blobs=true`` sizes, blob ids and LFS info).
* ``GET /api/{models,datasets}/{repo}/tree/{rev}[/{path}]?recursive=&cursor=`` tree listing
  (``type``/``oid``/``size``/``path``/``lfs``; paginated by 1000 with a ``Link: rel="next"`` header).
* ``GET /api/{models,datasets}/{repo}/refs`` and ``GET /api/whoami-v2``.
* ``HEAD|GET /{repo}/resolve/{rev}/{path}`` (``/datasets/{repo}/resolve/...`` for datasets) with
  ``X-Repo-Commit``, ``ETag`` (git blob id, or sha256 for LFS files), ``X-Linked-Etag`` and
  ``X-Linked-Size`` for LFS files, ``Content-Length``, ``Accept-Ranges`` and ``Range`` (206/416) so
  interrupted downloads resume. No ``X-Xet-*`` headers and no ``xetHash`` are sent, so clients
  always use plain HTTP downloads (no Xet storage).
* Errors carry ``X-Error-Code`` / ``X-Error-Message`` and a JSON ``{"error": ...}`` body:
  unknown repo -> 404 ``RepoNotFound``; unknown revision -> 404 ``RevisionNotFound``; unknown file ->
  404 ``EntryNotFound``; gated repo file without token -> 401 ``GatedRepo``, with a token that has
  no access -> 403 ``GatedRepo``; any request with an unknown token -> 401 with the message
  ``Invalid credentials in Authorization header`` (no X-Error-Code, like the real Hub).
  Gated repos' info and tree listing stay readable anonymously, as on the real Hub.
* Revisions: ``main`` and the full commit SHA (sha1, deterministic from the content).
* ``GET /encodings/{o200k_base,cl100k_base}.tiktoken``: generated tiktoken stand-ins (valid
  ``<base64 token> <rank>`` format, labelled by their first non-byte token and by the
  ``X-Sparkops-Lab-Standin`` header) for ``TIKTOKEN_ENCODINGS_BASE``. Not real encodings.
* ``GET /healthz``.

One line per request is logged to stderr: client, method, path, status, bytes and the token's
*name* (never the token). With ``--access-log FILE`` the same request is also appended to FILE as one JSON
object per line (``time`` UTC with milliseconds, ``client``, ``method``, ``path``, ``status``, ``bytes`` of
body sent, ``user`` = the token's name, ``range`` = the Range header or null), which tests read to prove
what was downloaded (file bodies are ``GET .../resolve/...``). In the lab container it is
``/var/log/sparkops-lab-hub/access.jsonl`` (``docker exec sparklab-hf-hub cat ...``). Usage::

    python3 hub_server.py --port 8080 [--host 0.0.0.0] --repos repos.json --tokens tokens.json [--data-dir DIR]
        [--files-dir DIR] [--access-log FILE]

Tokens file: ``{"<token>": {"name": "alice", "gated_access": ["org/repo", ...]}}``.
``--port 0`` picks a free port; the first stdout line is ``READY http://<host>:<port>``.
With ``--data-dir`` the generated files are written there once (and served from disk) instead of
being kept in memory.

Large files (weights marked ``"stream": true`` in repos.json, e.g. the 256 MiB ``sparkops-lab/bench-large``
used by tests/bench) are never held in memory nor written to ``--data-dir``: their bytes are generated
on the fly for each request, block by block (see ``StreamedFile``), so start-up stays fast. Their sha256
(LFS oid / ETag) is computed on the first request that needs it (repo info with blobs, tree listing,
file HEAD/GET), which takes about a second per 256 MiB; the commit SHA does not depend on it.

Real files (``"files"`` in repos.json, e.g. the lab's Qwen2.5-Coder GGUFs under ``sparkops-lab/...-GGUF``) are
served from a directory given with ``--files-dir`` (read-only; in the lab container a mount of ``.lab/gguf``),
as ``DiskFile``: size from the file, LFS sha256 from repos.json (verified by tests/lab/fetch-gguf.py, so
nothing is hashed at start-up; a ``<file>.sha256`` stamp beside it must agree), Range support as for
generated files. A repo whose files are missing (no ``--files-dir``, file absent, size not the declared one)
is left out with a note on stderr, so the other repos are served as usual. Such repos get no generated
config/tokenizer JSON unless repos.json declares it.

A repo with ``"rate_bytes_per_second": N`` sends file bodies at most N bytes per second per request
(e.g. ``sparkops-lab/slow-resume``), so that tests can kill a client in the middle of a file.
"""

import argparse
import base64
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".tiktoken", ".model")
GITATTRIBUTES = (
    "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    "*.bin filter=lfs diff=lfs merge=lfs -text\n"
    "*.model filter=lfs diff=lfs merge=lfs -text\n"
)
GITATTRIBUTES_REAL = "*.gguf filter=lfs diff=lfs merge=lfs -text\n"
TREE_PAGE_SIZE = 1000
CHUNK = 256 * 1024
STREAM_BLOCK = CHUNK  # streamed files: payload block size (8-byte block index + a window of the pool)
STREAM_POOL = 1024 * 1024  # streamed files: bytes of SHAKE-256(seed) the blocks are cut from
STREAM_GENERATOR = "stream-v1"  # part of the commit SHA of repos with streamed files: bump if the bytes change
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
STANDIN_LABEL = "sparkops lab stand-in, not a real model"


# --------------------------------------------------------------------------- content generation


def _json_bytes(obj):
    return (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode("utf-8")


def _pseudo_random(seed, size):
    return hashlib.shake_256(("sparkops-lab:" + seed).encode("utf-8")).digest(size)


def _safetensors_header(size, seed, tensor_name):
    """(prefix, payload_size): the 8-byte length + JSON header of a safetensors file of exactly ``size``
    bytes holding one U8 tensor of ``payload_size`` bytes."""
    meta = {"sparkops_lab_standin": "true", "seed": seed, "format": "pt"}
    payload = 0
    for dummy in range(4):  # header length depends on payload length digits; converge
        header = {"__metadata__": meta, tensor_name: {"dtype": "U8", "shape": [payload], "data_offsets": [0, payload]}}
        hdr = json.dumps(header, separators=(",", ":")).encode("utf-8")
        hdr += b" " * ((8 - len(hdr) % 8) % 8)
        new_payload = size - 8 - len(hdr)
        if new_payload < 0:
            raise ValueError("size %d too small for a safetensors header (seed %s)" % (size, seed))
        if new_payload == payload:
            break
        payload = new_payload
    header = {"__metadata__": meta, tensor_name: {"dtype": "U8", "shape": [payload], "data_offsets": [0, payload]}}
    hdr = json.dumps(header, separators=(",", ":")).encode("utf-8")
    pad = size - 8 - len(hdr) - payload
    if pad < 0:
        raise ValueError("cannot fit safetensors header for seed %s" % seed)
    hdr += b" " * pad
    return len(hdr).to_bytes(8, "little") + hdr, payload


def _safetensors_blob(size, seed, tensor_name):
    """A valid safetensors file of exactly ``size`` bytes: header + pseudo-random U8 payload."""
    prefix, payload = _safetensors_header(size, seed, tensor_name)
    blob = prefix + _pseudo_random(seed, payload)
    assert len(blob) == size
    return blob


def _weight(w, default_path, tensor_name):
    """bytes of one weights entry of repos.json, or a StreamedFile if it has ``"stream": true``."""
    path = w.get("path", default_path)
    if w.get("stream"):
        return StreamedFile(path, w["size"], w["seed"], tensor_name)
    return _safetensors_blob(w["size"], w["seed"], tensor_name)


def _readme(repo_id, spec):
    lines = [
        "---",
        "tags:",
        "- sparkops-lab-standin",
        "---",
        "# %s (sparkops lab stand-in)" % repo_id,
        "",
        "This repository is a **lab stand-in** served by the sparkops `hub_server.py` test server.",
        "It only mimics the file layout of `%s`: the JSON files are small plausible configs" % repo_id,
        "marked with `\"sparkops_lab_standin\": true` and the `*.safetensors` files contain",
        "pseudo-random bytes generated from a seed. It is not the real model and cannot be run.",
        "",
    ]
    if spec.get("gated"):
        lines += ["Access is gated (like the real repository): a token with access is required.", ""]
    return ("\n".join(lines)).encode("utf-8")


def _readme_real(repo_id, spec):
    lines = [
        "---",
        "tags:",
        "- sparkops-lab",
        "- gguf",
    ]
    if spec.get("license"):
        lines.append("license: %s" % spec["license"])
    lines += [
        "---",
        "# %s (sparkops lab)" % repo_id,
        "",
        "Served by the sparkops lab hub (`hub_server.py`). The files listed below are **real** files, not",
        "generated stand-ins:",
        "",
    ]
    for f in spec["files"]:
        lines.append("- `%s`: sha256 `%s`" % (f["name"], f.get("sha256", "?")))
    if spec.get("description"):
        lines += ["", spec["description"]]
    lines.append("")
    return ("\n".join(lines)).encode("utf-8")


def generate_repo_files(spec):
    """Return an ordered dict path -> bytes (or StreamedFile, for streamed weights) for one repo spec."""
    repo_id = spec["id"]
    files = {}
    real = bool(spec.get("files"))
    files[".gitattributes"] = (GITATTRIBUTES + (GITATTRIBUTES_REAL if real else "")).encode("utf-8")
    files["README.md"] = _readme_real(repo_id, spec) if real else _readme(repo_id, spec)
    for name in ("config", "generation_config", "tokenizer_config"):
        if real and name not in spec:
            continue
        obj = dict(spec.get(name) or {})
        obj["sparkops_lab_standin"] = True
        files[name + ".json"] = _json_bytes(obj)
    for path, obj in sorted((spec.get("json_files") or {}).items()):
        obj = dict(obj)
        obj["sparkops_lab_standin"] = True
        files[path] = _json_bytes(obj)
    weights = spec.get("weights") or []
    if len(weights) == 1:
        w = weights[0]
        files[w.get("path", "model.safetensors")] = _weight(w, "model.safetensors", "standin.weight")
    elif len(weights) > 1:
        weight_map = {}
        total = 0
        for i, w in enumerate(weights, start=1):
            path = w.get("path", "model-%05d-of-%05d.safetensors" % (i, len(weights)))
            tensor = "standin.shard%d.weight" % i
            files[path] = _weight(w, path, tensor)
            weight_map[tensor] = path
            total += w["size"]
        files["model.safetensors.index.json"] = _json_bytes(
            {"metadata": {"total_size": total, "sparkops_lab_standin": True}, "weight_map": weight_map}
        )
    bulk = spec.get("bulk")
    if bulk:
        for index in range(int(bulk["count"])):
            path = bulk["name"].format(index=index)
            files[path] = _safetensors_blob(int(bulk["size"]), "%s#%d" % (bulk["seed"], index), "standin.part%d" % index)
    return files


def _git_blob_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _lfs_pointer(sha256, size):
    return ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (sha256, size)).encode("ascii")


class _FileApi(object):
    """What the HTTP handler uses of a file (RepoFile or StreamedFile)."""

    __slots__ = ()

    @property
    def etag(self):
        return self.sha256 if self.lfs else self.oid

    def tree_entry(self):
        entry = {"type": "file", "oid": self.oid, "size": self.size, "path": self.path}
        if self.lfs:
            entry["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": self.pointer_size}
        return entry

    def sibling(self, blobs):
        entry = {"rfilename": self.path}
        if blobs:
            entry["blobId"] = self.oid
            entry["size"] = self.size
            if self.lfs:
                entry["lfs"] = {"sha256": self.sha256, "size": self.size, "pointerSize": self.pointer_size}
        return entry


class RepoFile(_FileApi):
    __slots__ = ("path", "size", "oid", "sha256", "lfs", "pointer_size", "data", "disk_path")

    def __init__(self, path, data, disk_path=None):
        self.path = path
        self.size = len(data)
        self.lfs = path.endswith(LFS_SUFFIXES)
        self.sha256 = hashlib.sha256(data).hexdigest()
        if self.lfs:
            pointer = _lfs_pointer(self.sha256, self.size)
            self.oid = _git_blob_oid(pointer)
            self.pointer_size = len(pointer)
        else:
            self.oid = _git_blob_oid(data)
            self.pointer_size = None
        self.disk_path = disk_path
        self.data = None if disk_path else data

    @property
    def commit_key(self):
        """What the commit SHA of the repo hashes for this file."""
        return self.oid

    def read(self, start, end):
        """Bytes [start, end) as an iterator of chunks."""
        if self.data is not None:
            for pos in range(start, end, CHUNK):
                yield self.data[pos:min(end, pos + CHUNK)]
            return
        with open(self.disk_path, "rb") as f:
            f.seek(start)
            remaining = end - start
            while remaining > 0:
                chunk = f.read(min(CHUNK, remaining))
                if not chunk:
                    break
                remaining -= len(chunk)
                yield chunk


class StreamedFile(_FileApi):
    """A large safetensors file whose bytes are generated on demand, never held in memory.

    Content: the safetensors header of ``_safetensors_header`` then the payload, cut in blocks of
    STREAM_BLOCK bytes; block ``k`` is ``k`` (8 bytes, little-endian) followed by a window of a
    STREAM_POOL-byte SHAKE-256(seed) pool starting at a ``k``-dependent offset (the last block is
    truncated). So the bytes are deterministic, cost one slice per block to produce, and no two
    blocks are equal. The sha256 is computed once, on first use, by streaming the content.
    """

    lfs = True
    data = None
    disk_path = None

    def __init__(self, path, size, seed, tensor_name):
        if not path.endswith(LFS_SUFFIXES):
            raise ValueError("streamed file %s must have an LFS suffix %s" % (path, LFS_SUFFIXES))
        self.path = path
        self.size = int(size)
        self.seed = seed
        self.prefix, self.payload_size = _safetensors_header(self.size, seed, tensor_name)
        self.pointer_size = len(_lfs_pointer("0" * 64, self.size))
        self._pool = None
        self._sha256 = None
        self._lock = threading.Lock()

    @property
    def commit_key(self):
        # Not the content hash: the commit SHA must be known without reading 100s of MiB at start-up.
        return "%s:%d:%s" % (STREAM_GENERATOR, self.size, self.seed)

    @property
    def sha256(self):
        with self._lock:
            if self._sha256 is None:
                started = time.time()
                h = hashlib.sha256()
                for chunk in self.read(0, self.size):
                    h.update(chunk)
                self._sha256 = h.hexdigest()
                sys.stderr.write("hub_server: sha256 of streamed %s (%d bytes) computed in %.2fs\n"
                                 % (self.path, self.size, time.time() - started))
                sys.stderr.flush()
            return self._sha256

    @property
    def oid(self):
        return _git_blob_oid(_lfs_pointer(self.sha256, self.size))

    def _block(self, k):
        if self._pool is None:
            pool = _pseudo_random("stream:" + self.seed, STREAM_POOL)
            self._pool = pool + pool[:STREAM_BLOCK]  # windows may wrap around the end of the pool
        offset = (k * 40503 * 8) % STREAM_POOL
        block = k.to_bytes(8, "little") + self._pool[offset:offset + STREAM_BLOCK - 8]
        return block[:max(0, min(STREAM_BLOCK, self.payload_size - k * STREAM_BLOCK))]

    def read(self, start, end):
        """Bytes [start, end) as an iterator of chunks (at most STREAM_BLOCK bytes each)."""
        plen = len(self.prefix)
        if start < plen:
            yield self.prefix[start:min(end, plen)]
            start = plen
        while start < end:
            k, within = divmod(start - plen, STREAM_BLOCK)
            chunk = self._block(k)[within:within + (end - start)]
            if not chunk:
                break
            start += len(chunk)
            yield chunk


class MissingRealFile(Exception):
    """A real file of a repo (``"files"`` in repos.json) is not available: the repo is left out."""


class DiskFile(_FileApi):
    """A real file served from disk (``"files"`` in repos.json), never read at start-up.

    ``sha256`` comes from repos.json (tests/lab/fetch-gguf.py verified the file against it); when
    repos.json gives none, the file is hashed at start-up (meant for small files only).
    """

    data = None

    def __init__(self, path, disk_path, sha256=None, size=None):
        self.path = path
        self.disk_path = disk_path
        try:
            self.size = os.stat(disk_path).st_size
        except OSError as exc:
            raise MissingRealFile("%s: %s" % (path, exc))
        if size is not None and int(size) != self.size:
            raise MissingRealFile("%s: %s has %d bytes, repos.json says %d" % (path, disk_path, self.size, int(size)))
        stamp = disk_path + ".sha256"
        if sha256 and os.path.exists(stamp):
            with open(stamp, "r", encoding="ascii") as f:
                stamped = (f.read().split() or [""])[0]
            if stamped != sha256:
                raise MissingRealFile("%s: %s says sha256 %s, repos.json says %s" % (path, stamp, stamped, sha256))
        self.lfs = path.endswith(LFS_SUFFIXES + (".gguf",))
        if not sha256 or not self.lfs:
            h_sha256, h_blob = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % self.size)
            for chunk in self.read(0, self.size):
                h_sha256.update(chunk)
                h_blob.update(chunk)
            if sha256 and h_sha256.hexdigest() != sha256:
                raise MissingRealFile("%s: sha256 %s, repos.json says %s" % (path, h_sha256.hexdigest(), sha256))
            sha256 = h_sha256.hexdigest()
            blob_oid = h_blob.hexdigest()
        self.sha256 = sha256
        if self.lfs:
            pointer = _lfs_pointer(self.sha256, self.size)
            self.oid = _git_blob_oid(pointer)
            self.pointer_size = len(pointer)
        else:
            self.oid = blob_oid
            self.pointer_size = None

    @property
    def commit_key(self):
        return self.oid

    def read(self, start, end):
        return RepoFile.read(self, start, end)


class Repo(object):
    def __init__(self, spec, last_modified, data_dir=None, files_dir=None):
        self.id = spec["id"]
        self.type = spec.get("type", "model")
        if self.type not in ("model", "dataset"):
            raise ValueError("repo %s: type must be model or dataset" % self.id)
        if self.id.count("/") != 1:
            raise ValueError("repo id %r must be <org>/<name>" % self.id)
        self.gated = spec.get("gated") or False
        # Throttled file bodies (bytes per second, per request): lets tests interrupt a download mid-file.
        self.rate = int(spec.get("rate_bytes_per_second") or 0)
        if self.rate < 0:
            raise ValueError("repo %s: rate_bytes_per_second must be >= 0" % self.id)
        self.config = spec.get("config") or {}
        self.last_modified = last_modified
        self.files = {}
        for path, data in generate_repo_files(spec).items():
            if isinstance(data, StreamedFile):
                self.files[path] = data
                continue
            disk_path = None
            if data_dir:
                disk_path = os.path.join(data_dir, "%ss" % self.type, self.id, *path.split("/"))
                _write_once(disk_path, data)
            self.files[path] = RepoFile(path, data, disk_path)
        self.real = bool(spec.get("files"))
        for entry in spec.get("files") or []:
            if not files_dir:
                raise MissingRealFile("%s: no --files-dir to serve it from" % entry["name"])
            rel = os.path.normpath(entry["path"])
            if os.path.isabs(rel) or rel.startswith(".."):
                raise ValueError("repo %s: file path %r must be relative to --files-dir" % (self.id, entry["path"]))
            self.files[entry["name"]] = DiskFile(entry["name"], os.path.join(files_dir, rel),
                                                 entry.get("sha256"), entry.get("size"))
        self.tags = list(spec.get("tags") or (["sparkops-lab"] if self.real else ["sparkops-lab-standin"]))
        self.library_name = spec.get("library_name", "transformers")
        h = hashlib.sha1(("sparkops-lab\0%s\0%s\0" % (self.type, self.id)).encode("utf-8"))
        for path in sorted(self.files):
            h.update(("%s\0%s\n" % (path, self.files[path].commit_key)).encode("utf-8"))
        self.sha = h.hexdigest()
        self.dirs = set()
        for path in self.files:
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                self.dirs.add("/".join(parts[:i]))

    def resolve_revision(self, rev):
        if rev in ("main", "refs/heads/main", self.sha):
            return self.sha
        return None

    def tree(self, path, recursive):
        path = path.strip("/")
        if path and path not in self.dirs:
            return None
        prefix = path + "/" if path else ""
        entries = []
        for d in sorted(self.dirs):
            if d.startswith(prefix) and (recursive or "/" not in d[len(prefix):]):
                tree_oid = hashlib.sha1(("tree\0%s\0%s" % (self.sha, d)).encode("utf-8")).hexdigest()
                entries.append({"type": "directory", "oid": tree_oid, "size": 0, "path": d})
        for p in sorted(self.files):
            if p.startswith(prefix) and (recursive or "/" not in p[len(prefix):]):
                entries.append(self.files[p].tree_entry())
        entries.sort(key=lambda e: e["path"])
        return entries

    def info(self, blobs):
        org = self.id.split("/")[0]
        data = {
            "_id": hashlib.sha1(self.id.encode("utf-8")).hexdigest()[:24],
            "id": self.id,
            "author": org,
            "sha": self.sha,
            "lastModified": self.last_modified,
            "createdAt": self.last_modified,
            "private": False,
            "gated": self.gated,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": self.tags,
            "siblings": [self.files[p].sibling(blobs) for p in sorted(self.files)],
            "usedStorage": sum(f.size for f in self.files.values()),
        }
        if self.type == "model":
            data["modelId"] = self.id
            data["library_name"] = self.library_name
            data["pipeline_tag"] = "text-generation"
            data["config"] = {k: self.config[k] for k in ("architectures", "model_type") if k in self.config}
            data["spaces"] = []
        return data


def _write_once(path, data):
    try:
        if os.path.getsize(path) == len(data):
            with open(path, "rb") as f:
                if hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest():
                    return
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def tiktoken_standin(name):
    """A syntactically valid tiktoken BPE file (``<base64 token> <rank>`` lines), clearly labelled.

    Ranks 0-255 are the 256 single bytes (so any text can be encoded), rank 256 is the label
    token, then deterministic pseudo-merges. It is NOT the real ``name`` encoding.
    """
    tokens = [bytes([b]) for b in range(256)]
    tokens.append(("<<SPARKOPS-LAB-STANDIN %s: not the real OpenAI encoding>>" % name).encode("ascii"))
    seen = set(tokens)
    letters = b"etaoinshrdlucmfwypvbgkjqxz"
    n_merges = 4000 if name.startswith("o200k") else 3000
    i = 0
    while len(tokens) < 257 + n_merges:
        rnd = hashlib.sha256(("%s:%d" % (name, i)).encode("ascii")).digest()
        length = 2 + rnd[0] % 5
        tok = bytes(letters[rnd[1 + k] % len(letters)] for k in range(length))
        if rnd[7] % 3 == 0:
            tok = b" " + tok
        if tok not in seen:
            seen.add(tok)
            tokens.append(tok)
        i += 1
    out = "".join("%s %d\n" % (base64.b64encode(t).decode("ascii"), rank) for rank, t in enumerate(tokens))
    return out.encode("ascii")


# --------------------------------------------------------------------------- HTTP server


class HubState(object):
    def __init__(self, repos_file, tokens_file, data_dir=None, files_dir=None):
        with open(repos_file, "r", encoding="utf-8") as f:
            spec = json.load(f)
        if spec.get("format") != 1:
            raise ValueError("%s: unsupported format %r" % (repos_file, spec.get("format")))
        last_modified = spec.get("last_modified", "2025-01-01T00:00:00.000Z")
        self.repos = {}
        self.left_out = []
        for repo_spec in spec["repos"]:
            try:
                repo = Repo(repo_spec, last_modified, data_dir, files_dir)
            except MissingRealFile as exc:
                # Real files are optional lab data (tests/lab/fetch-gguf.py): without them the repo is
                # not served (404 RepoNotFound) and every other repo is.
                self.left_out.append(repo_spec["id"])
                sys.stderr.write("hub_server: repo %s left out: %s\n" % (repo_spec["id"], exc))
                sys.stderr.flush()
                continue
            self.repos[(repo.type, repo.id)] = repo
        self.tokens = {}
        if tokens_file:
            with open(tokens_file, "r", encoding="utf-8") as f:
                self.tokens = json.load(f)
        self.encodings = {
            "o200k_base.tiktoken": tiktoken_standin("o200k_base"),
            "cl100k_base.tiktoken": tiktoken_standin("cl100k_base"),
        }


_RANGE_RE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sparkops-lab-hub/1"
    state = None  # set on the subclass by make_server()
    # TCP_NODELAY, as real HTTP servers: headers and body are separate writes, and on a kept-alive connection
    # Nagle + the client's delayed ACK would otherwise stall every small response by up to 40 ms.
    disable_nagle_algorithm = True

    # ---- logging (never the token)
    def log_message(self, format, *args):  # noqa: A002 - signature fixed by BaseHTTPRequestHandler
        pass

    def _log(self, status, nbytes):
        who = getattr(self, "_who", "-")
        sys.stderr.write(
            "%s %s %s %s %d %d user=%s\n"
            % (time.strftime("%Y-%m-%dT%H:%M:%S"), self.client_address[0], self.command,
               urlsplit(self.path).path, status, nbytes, who)
        )
        sys.stderr.flush()
        access_log = getattr(self.server, "access_log", None)
        if access_log is not None:
            access_log.write({"client": self.client_address[0], "method": self.command, "path": urlsplit(self.path).path,
                              "status": status, "bytes": nbytes, "user": who, "range": self.headers.get("Range")})

    # ---- responses
    def _send(self, status, body=b"", headers=None, content_type="application/json"):
        head_only = self.command == "HEAD"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head_only and body:
            self.wfile.write(body)
        self._log(status, 0 if head_only else len(body))

    def _json(self, obj, status=200, headers=None):
        self._send(status, json.dumps(obj).encode("utf-8"), headers)

    def _error(self, status, message, code=None, headers=None):
        hdrs = {"X-Error-Message": message}
        if code:
            hdrs["X-Error-Code"] = code
        hdrs.update(headers or {})
        self._json({"error": message}, status, hdrs)

    def _base_url(self):
        return "http://%s" % (self.headers.get("Host") or "%s:%d" % self.server.server_address[:2])

    # ---- auth
    def _auth(self):
        """Return (ok, token_info). Sends the 401 itself when the token is unknown."""
        header = self.headers.get("Authorization")
        self._who = "anonymous"
        if not header:
            return True, None
        token = header[7:].strip() if header.lower().startswith("bearer ") else header.strip()
        info = self.state.tokens.get(token)
        if info is None:
            self._who = "<invalid-token>"
            self._error(401, INVALID_CREDENTIALS)
            return False, None
        self._who = info.get("name", "unnamed")
        return True, info

    # ---- dispatch
    def do_HEAD(self):
        self._dispatch()

    def do_GET(self):
        self._dispatch()

    def _dispatch(self):
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _route(self):
        url = urlsplit(self.path)
        raw_parts = [p for p in url.path.split("/") if p != ""]
        parts = [unquote(p) for p in raw_parts]
        query = parse_qs(url.query)

        if parts == ["healthz"]:
            self._who = "-"
            return self._send(200, b"ok\n", content_type="text/plain")
        if len(parts) == 2 and parts[0] == "encodings":
            self._who = "-"
            body = self.state.encodings.get(parts[1])
            if body is None:
                return self._error(404, "Entry not found", "EntryNotFound")
            return self._send(200, body, {"X-Sparkops-Lab-Standin": "true", "ETag": '"%s"' % hashlib.sha256(body).hexdigest()},
                              content_type="text/plain; charset=utf-8")

        ok, token_info = self._auth()
        if not ok:
            return None

        if parts and parts[0] == "api":
            return self._route_api(parts[1:], query, token_info)
        repo_type = "model"
        if parts and parts[0] in ("datasets", "models"):
            repo_type = parts[0][:-1]
            parts = parts[1:]
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(repo_type, "/".join(parts[:2]), parts[3], "/".join(parts[4:]), token_info)
        return self._error(404, "Not Found: %s" % url.path)

    def _route_api(self, parts, query, token_info):
        if parts == ["whoami-v2"]:
            if token_info is None:
                return self._error(401, INVALID_CREDENTIALS)
            return self._json({"type": "user", "name": token_info.get("name", "unnamed"), "auth": {"type": "access_token"}})
        if len(parts) < 3 or parts[0] not in ("models", "datasets"):
            return self._error(404, "Not Found")
        repo_type = parts[0][:-1]
        repo_id = "/".join(parts[1:3])
        repo = self.state.repos.get((repo_type, repo_id))
        if repo is None:
            return self._error(404, "Repository not found", "RepoNotFound")
        rest = parts[3:]
        blobs = query.get("blobs", ["false"])[0].lower() in ("1", "true")
        if not rest:
            return self._json(repo.info(blobs))
        if rest[0] == "revision" and len(rest) == 2:
            if repo.resolve_revision(rest[1]) is None:
                return self._error(404, "Invalid rev id: %s" % rest[1], "RevisionNotFound")
            return self._json(repo.info(blobs))
        if rest == ["refs"]:
            return self._json({"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": repo.sha}],
                               "tags": [], "converts": []})
        if rest[0] == "tree" and len(rest) >= 2:
            if repo.resolve_revision(rest[1]) is None:
                return self._error(404, "Invalid rev id: %s" % rest[1], "RevisionNotFound")
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            entries = repo.tree("/".join(rest[2:]), recursive)
            if entries is None:
                return self._error(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": repo.sha})
            try:
                cursor = max(0, int(query.get("cursor", ["0"])[0]))
            except ValueError:
                cursor = 0
            page = entries[cursor:cursor + TREE_PAGE_SIZE]
            headers = {}
            if cursor + TREE_PAGE_SIZE < len(entries):
                nxt = "%s%s?recursive=%s&cursor=%d" % (
                    self._base_url(), quote(urlsplit(self.path).path), "true" if recursive else "false",
                    cursor + TREE_PAGE_SIZE)
                headers["Link"] = '<%s>; rel="next"' % nxt
            return self._json(page, headers=headers)
        return self._error(404, "Not Found")

    def _resolve(self, repo_type, repo_id, revision, path, token_info):
        repo = self.state.repos.get((repo_type, repo_id))
        if repo is None:
            return self._error(404, "Repository not found", "RepoNotFound")
        if repo.gated:
            allowed = token_info is not None and repo_id in (token_info.get("gated_access") or [])
            if token_info is None:
                return self._error(
                    401, "Access to %s %s is restricted. You must have access to it and be authenticated to access it. "
                    "Please log in." % (repo_type, repo_id), "GatedRepo")
            if not allowed:
                return self._error(
                    403, "Access to %s %s is restricted and you are not in the authorized list. Visit %s/%s to ask for "
                    "access." % (repo_type, repo_id, self._base_url(), repo_id), "GatedRepo")
        commit = repo.resolve_revision(revision)
        if commit is None:
            return self._error(404, "Invalid rev id: %s" % revision, "RevisionNotFound")
        f = repo.files.get(path)
        if f is None:
            return self._error(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit})

        headers = {
            "X-Repo-Commit": commit,
            "ETag": '"%s"' % f.etag,
            "Accept-Ranges": "bytes",
            "Content-Disposition": 'inline; filename="%s"' % path.split("/")[-1],
        }
        if not repo.real:
            headers["X-Sparkops-Lab-Standin"] = "true"
        if f.lfs:
            headers["X-Linked-Etag"] = '"%s"' % f.sha256
            headers["X-Linked-Size"] = str(f.size)
        start, end, status = 0, f.size, 200
        range_header = self.headers.get("Range")
        if range_header:
            m = _RANGE_RE.match(range_header)
            if m and (m.group(1) or m.group(2)):
                if m.group(1):
                    start = int(m.group(1))
                    end = min(f.size, int(m.group(2)) + 1) if m.group(2) else f.size
                else:
                    start, end = max(0, f.size - int(m.group(2))), f.size
                if start >= f.size or start >= end:
                    headers["Content-Range"] = "bytes */%d" % f.size
                    return self._send(416, b"", headers, content_type="text/plain")
                status = 206
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, end - 1, f.size)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream" if f.lfs else "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(end - start))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        sent = 0
        if self.command != "HEAD":
            began = time.time()
            try:
                for chunk in f.read(start, end):
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    if repo.rate:
                        ahead = sent / float(repo.rate) - (time.time() - began)
                        if ahead > 0:
                            time.sleep(ahead)
            except (BrokenPipeError, ConnectionResetError):
                # The client went away (killed download): log what was sent, fewer bytes than Content-Length.
                self._log(status, sent)
                raise
        self._log(status, sent)
        return None


class AccessLog(object):
    """JSON lines, one per request, appended and flushed at once (tests read the file while the hub runs)."""

    def __init__(self, path):
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            os.makedirs(parent)
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the server's lifetime
        self._lock = threading.Lock()

    def write(self, entry):
        now = time.time()
        record = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%03dZ" % int(now % 1 * 1000)}
        record.update(entry)
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()

    def close(self):
        with self._lock:
            self._file.close()


class HubServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    access_log = None


def make_server(host, port, state, access_log=None):
    handler = type("BoundHubHandler", (HubHandler,), {"state": state})
    server = HubServer((host, port), handler)
    server.access_log = AccessLog(access_log) if access_log else None
    return server


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt()


def main(argv=None):
    parser = argparse.ArgumentParser(description="sparkops lab Hugging Face Hub stand-in server (stdlib only)")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8080, help="TCP port; 0 picks a free one")
    parser.add_argument("--repos", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "repos.json"))
    parser.add_argument("--tokens", default=None, help='JSON file {"<token>": {"name": ..., "gated_access": [...]}}')
    parser.add_argument("--data-dir", default=None, help="write generated files here and serve them from disk")
    parser.add_argument("--files-dir", default=None,
                        help="directory holding the real files of repos.json (\"files\": [{\"path\": ...}])")
    parser.add_argument("--access-log", default=None,
                        help="append one JSON object per request to this file (time, client, method, path, status, "
                             "bytes, user, range)")
    args = parser.parse_args(argv)

    # As PID 1 in a container SIGTERM has no default action: exit cleanly on it.
    signal.signal(signal.SIGTERM, _on_sigterm)
    started = time.time()
    state = HubState(args.repos, args.tokens, args.data_dir, args.files_dir)
    server = make_server(args.host, args.port, state, args.access_log)
    host, port = server.server_address[:2]
    n_files = sum(len(r.files) for r in state.repos.values())
    sys.stderr.write("hub_server: %d repos, %d files generated in %.2fs, %d tokens; listening on %s:%d\n"
                     % (len(state.repos), n_files, time.time() - started, len(state.tokens), host, port))
    sys.stderr.flush()
    sys.stdout.write("READY http://%s:%d\n" % (host, port))
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if server.access_log is not None:
            server.access_log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
