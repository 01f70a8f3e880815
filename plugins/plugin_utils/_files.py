# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE controller-side helper: files only their owner may read, replaced atomically.

The reports the collection writes on the controller (preflight report, fleet status, benchmark report) name
hosts, paths and settings: they are written mode 0600 into a temporary file in the target's directory and
renamed over it, so a reader never sees a half-written file and a failed write leaves the old one.
"""

from __future__ import annotations

import os
import tempfile


def write_private(path, data, prefix):
    """Write ``data`` (text or bytes) to ``path`` atomically with mode 0600; returns ``path``.

    ``prefix`` names the temporary file (e.g. ``.preflight-report.``) so a leftover one says whose it is.
    """
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=os.path.dirname(path))  # created 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
