# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Start and stop the lab hub (tests/lab/images/hub/hub_server.py) on 127.0.0.1, for the unit tests
(tests/unit/conftest.py) and the benchmark (tests/bench)."""

from __future__ import annotations

import os
import select
import subprocess
import sys

HUB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lab', 'images', 'hub')
HUB_SERVER = os.path.join(HUB_DIR, 'hub_server.py')
HUB_REPOS = os.path.join(HUB_DIR, 'repos.json')


def start(log_path, tokens_path=None, timeout=60):
    """Run hub_server.py (stdlib only: ``python -I -S``) on a free loopback port; returns (process, url)."""
    args = [sys.executable, '-I', '-S', HUB_SERVER, '--host', '127.0.0.1', '--port', '0', '--repos', HUB_REPOS]
    if tokens_path:
        args += ['--tokens', str(tokens_path)]
    with open(log_path, 'w') as log:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, universal_newlines=True)
    if not select.select([proc.stdout], [], [], timeout)[0]:
        stop(proc)
        raise RuntimeError('hub_server.py did not start within %s s (log: %s)' % (timeout, log_path))
    line = proc.stdout.readline().strip()
    if not line.startswith('READY http://127.0.0.1:'):
        stop(proc)
        raise RuntimeError('unexpected hub_server.py output %r (log: %s)' % (line, log_path))
    return proc, line.split(' ', 1)[1]


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
