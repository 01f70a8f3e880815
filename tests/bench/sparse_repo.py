# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Lay out a generated Spark-sized model of sparse files in a huggingface_hub cache, registered as complete.

Run on a lab node (by tests/bench/sparse_noop.yml, with the node's python3, stdlib only) with one argument, a JSON
document that tests/bench/converge_bench.py builds on the controller from the collection's own module_utils/_hf.py:

    {"storage": "~/.cache/huggingface/hub/models--org--name", "commit": "<40 hex>", "revision": "main",
     "ref_path": "refs/main", "manifest_path": ".sparkops-hf_download/<commit>.json", "manifest": "<text>",
     "files": [{"path": "model-00001-of-00020.safetensors", "size": 5368709120, "etag": "<sha256>"}, ...],
     "control": "<name of an extra sparse file, outside the repo, for the atime control>"}

It writes what a finished hf_download leaves: blobs/<etag> of the file's size (a sparse file: truncate, no data
block written), snapshots/<commit>/<path> -> ../../blobs/<etag>, the ref, and the listing manifest hf_download records
(the text given, made by its own write_listing). Idempotent: an existing blob of the right size is left as it is.
Prints a JSON line: the bytes laid out, the blocks the blobs occupy (0 for sparse files) and each blob's atime, which
the bench reads again after the runs (a no-op that read a blob would move it; the control file shows the file
system keeps access times).
"""

from __future__ import annotations

import json
import os
import sys


def main(arg):
    spec = json.loads(arg)
    storage = os.path.expanduser(spec['storage'])
    commit = spec['commit']
    for sub in ('blobs', os.path.join('snapshots', commit), os.path.dirname(os.path.join(storage, spec['ref_path'])),
                os.path.dirname(os.path.join(storage, spec['manifest_path']))):
        os.makedirs(os.path.join(storage, sub), exist_ok=True)
    out = {'bytes': 0, 'blocks': 0, 'atimes': {}}
    for f in spec['files']:
        blob = os.path.join(storage, 'blobs', f['etag'])
        try:
            st = os.stat(blob)
        except OSError:
            st = None
        if st is None or st.st_size != f['size']:
            with open(blob, 'wb') as handle:
                handle.truncate(f['size'])
        link = os.path.join(storage, 'snapshots', commit, *f['path'].split('/'))
        os.makedirs(os.path.dirname(link), exist_ok=True)
        rel = os.path.relpath(blob, os.path.dirname(link))
        if not os.path.islink(link) or os.readlink(link) != rel:
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(rel, link)
        st = os.stat(blob)
        # atime = mtime: under relatime (and strictatime) the next read of the blob moves its atime.
        os.utime(blob, ns=(st.st_mtime_ns, st.st_mtime_ns))
        st = os.stat(blob)
        out['bytes'] += st.st_size
        out['blocks'] += st.st_blocks
        out['atimes'][f['etag']] = st.st_atime_ns
    for rel_path, text in ((spec['ref_path'], commit), (spec['manifest_path'], spec['manifest'])):
        path = os.path.join(storage, rel_path)
        with open(path + '.tmp', 'w') as handle:
            handle.write(text)
        os.replace(path + '.tmp', path)
    control = os.path.join(storage, '..', spec['control'])
    with open(control, 'wb') as handle:
        handle.truncate(1 << 20)
    st = os.stat(control)
    os.utime(control, ns=(st.st_mtime_ns, st.st_mtime_ns))
    out['control_atime'] = os.stat(control).st_atime_ns
    print(json.dumps(out))


def atimes(arg):
    """After the runs: each blob's atime, and the control file's before and after one read of it."""
    spec = json.loads(arg)
    storage = os.path.expanduser(spec['storage'])
    out = {'atimes': {}}
    for f in spec['files']:
        out['atimes'][f['etag']] = os.stat(os.path.join(storage, 'blobs', f['etag'])).st_atime_ns
    control = os.path.join(storage, '..', spec['control'])
    before = os.stat(control).st_atime_ns
    with open(control, 'rb') as handle:
        handle.read(4096)
    out['control_read_moves_atime'] = os.stat(control).st_atime_ns != before
    print(json.dumps(out))


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--atimes':
        atimes(sys.argv[2])
    else:
        main(sys.argv[1])
