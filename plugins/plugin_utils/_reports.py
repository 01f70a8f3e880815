# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE controller-side helper: where the collection's reports go on the controller.

Every report a playbook writes (preflight report, status JSON, fleet report and logs, benchmark report, support
bundle) goes to one directory the user names with ``specdec_report_dir``; unset or empty, it is the current working
directory of the ``ansible-playbook`` process. Never the playbook's or the collection's own directory: an installed
collection (an execution environment's) is read-only, and a report names hosts and paths that do not belong in it.

A report's own setting (e.g. ``status_report_path``) still wins: an absolute path is taken as is, a relative one is
taken inside the report directory. The files themselves are written 0600 (plugin_utils/_files.write_private).
"""

from __future__ import annotations

import os


def report_dir(value=None, cwd=None):
    """The absolute report directory: ``value`` (``~`` expanded; relative to ``cwd``) or ``cwd`` when empty.

    ``cwd`` defaults to the process's current directory (an action plugin runs in ansible-playbook's process tree,
    which keeps the directory the user started it in).
    """
    base = cwd if cwd is not None else os.getcwd()
    text = "" if value is None else str(value).strip()
    if not text:
        return os.path.abspath(base)
    return os.path.abspath(os.path.join(base, os.path.expanduser(text)))


def report_path(path, default_name, directory=None, cwd=None):
    """The absolute path of one report.

    ``path`` (the report's own setting): absolute (after ``~``) as is, relative inside the report directory;
    empty or None: ``default_name`` inside the report directory. ``directory`` is ``specdec_report_dir``.
    """
    base = report_dir(directory, cwd)
    text = "" if path is None else str(path).strip()
    if not text:
        if not default_name:
            raise ValueError("a report needs a path or a default name")
        text = default_name
    return os.path.normpath(os.path.join(base, os.path.expanduser(text)))


def ensure_dir(path, directory=None, cwd=None):
    """Create the report directory (mode 0700) when ``path`` lies in it and it is missing; returns ``path``.

    Only the report directory is created: a missing directory the user named in a report's own path stays an
    error of that report (a typo there should not create directories elsewhere).
    """
    base = report_dir(directory, cwd)
    parent = os.path.dirname(path)
    if parent == base and not os.path.isdir(base):
        os.makedirs(base, mode=0o700, exist_ok=True)
    return path
