# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE controller-side helper: fill one directory of the controller's wheel cache, safely under concurrency.

The controller fetches the node wheels (``pip download``) once per platform into
``<specdec_server_controller_cache_dir>/wheels/<version>/<platform key>``. Several ``ansible-playbook`` runs can
need the same directory at once (``playbooks/fleet.yml`` starts one run per deployment, ``fleet_parallel`` at a
time), and so can the forks of one run. Two rules make that safe:

* one download per directory: an ``flock`` on ``<dir>.lock`` next to it; whoever waited finds the directory complete
  and downloads nothing;
* a directory is complete or absent: ``pip download`` writes into a temporary directory next to it
  (``.<name>.partial-*``), the ``.complete`` mark is written there, and the directory is renamed into place, so a
  reader never sees a half-filled cache, and a killed download leaves only a temporary directory (removed by the
  next download under the lock).

A directory without the mark (left by an earlier version of the collection killed mid-download) is replaced.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile

COMPLETE = ".complete"


class WheelCacheError(RuntimeError):
    """The download failed; the message is one line naming the setting, the problem and the fix."""


def complete(path):
    return os.path.isfile(os.path.join(path, COMPLETE))


def _remove_partials(parent, name):
    for entry in os.listdir(parent):
        if entry.startswith(".%s.partial-" % name) or entry.startswith(".%s.stale-" % name):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def _last_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def ensure(path, argv_for, mark, setting="specdec_server_controller_cache_dir", timeout=1800, run=subprocess.run):
    """Make ``path`` a complete cache directory; returns True when this call downloaded it, False when it was there.

    ``argv_for(dest)`` is the ``pip download`` argv writing into ``dest``; ``mark`` is the text of the ``.complete``
    file (the requirement). Raises ``WheelCacheError`` when the download fails; ``path`` is then left as it was.
    """
    path = os.path.abspath(path)
    if complete(path):
        return False
    parent, name = os.path.split(path)
    os.makedirs(parent, mode=0o755, exist_ok=True)
    with open(os.path.join(parent, name + ".lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if complete(path):  # filled by the run we waited for
            return False
        _remove_partials(parent, name)  # left by a download that was killed
        tmp = tempfile.mkdtemp(prefix=".%s.partial-" % name, dir=parent)
        try:
            os.chmod(tmp, 0o755)
            try:
                proc = run(argv_for(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=timeout, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise WheelCacheError("%s: pip download into %s could not run (%s); check the controller's Python "
                                      "and PyPI access, or set specdec_server_wheel_dir to a directory filled on a "
                                      "machine with PyPI access." % (setting, path, exc)) from None
            if proc.returncode != 0:
                raise WheelCacheError("%s: pip download into %s failed (rc %d: %s); check the controller's PyPI "
                                      "access (index, proxy), or set specdec_server_wheel_dir to a directory filled "
                                      "on a machine with PyPI access."
                                      % (setting, path, proc.returncode, _last_line(proc.stderr or proc.stdout)))
            with open(os.path.join(tmp, COMPLETE), "w") as handle:
                handle.write("%s\n" % mark)
            if os.path.lexists(path):  # incomplete, from an earlier version: out of the way first
                stale = tempfile.mkdtemp(prefix=".%s.stale-" % name, dir=parent)
                os.rename(path, os.path.join(stale, name))
                shutil.rmtree(stale, ignore_errors=True)
            os.rename(tmp, path)
        finally:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
    return True
