# -*- coding: utf-8 -*-
"""Where the reports go on the controller (plugin_utils/_reports.py): specdec_report_dir, default the current
directory of ansible-playbook, never the playbook's or the collection's directory; a report's own path wins."""

from __future__ import annotations

import os

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _reports


@pytest.mark.parametrize("value,expected", [
    (None, "/work/here"),
    ("", "/work/here"),
    ("  ", "/work/here"),
    ("reports", "/work/here/reports"),
    ("/srv/reports", "/srv/reports"),
    ("../out", "/work/out"),
])
def test_report_dir(value, expected):
    assert _reports.report_dir(value, cwd="/work/here") == expected


def test_report_dir_expands_the_home(monkeypatch):
    monkeypatch.setenv("HOME", "/home/me")
    assert _reports.report_dir("~/reports", cwd="/work/here") == "/home/me/reports"


def test_report_dir_defaults_to_the_process_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _reports.report_dir(None) == str(tmp_path)


@pytest.mark.parametrize("path,directory,expected", [
    (None, None, "/work/here/specdec-status.json"),
    ("", "", "/work/here/specdec-status.json"),
    (None, "/srv/reports", "/srv/reports/specdec-status.json"),
    (None, "reports", "/work/here/reports/specdec-status.json"),
    ("mine.json", None, "/work/here/mine.json"),
    ("mine.json", "/srv/reports", "/srv/reports/mine.json"),
    ("sub/mine.json", "/srv/reports", "/srv/reports/sub/mine.json"),
    ("/tmp/abs.json", "/srv/reports", "/tmp/abs.json"),
])
def test_report_path(path, directory, expected):
    assert _reports.report_path(path, "specdec-status.json", directory, cwd="/work/here") == expected


def test_report_path_needs_a_name():
    with pytest.raises(ValueError):
        _reports.report_path("", "", None, cwd="/work/here")


def test_ensure_dir_creates_only_the_report_directory(tmp_path):
    reports = tmp_path / "reports"
    path = _reports.report_path(None, "r.json", str(reports), cwd=str(tmp_path))
    assert _reports.ensure_dir(path, str(reports), cwd=str(tmp_path)) == path
    assert reports.is_dir() and (os.stat(reports).st_mode & 0o777) == 0o700 & ~_umask()
    # A directory named in the report's own path is not created (a typo there stays an error of that report).
    other = _reports.report_path("typo/r.json", "r.json", None, cwd=str(tmp_path))
    _reports.ensure_dir(other, None, cwd=str(tmp_path))
    assert not (tmp_path / "typo").exists()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
