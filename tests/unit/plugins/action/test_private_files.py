"""plugin_utils/_files.write_private: 0600, atomic, and a failed write leaves the old file and no temporary."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _files


def test_writes_text_and_bytes_mode_0600_replacing_the_old_file(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    target.chmod(0o644)
    assert _files.write_private(str(target), "new\n", ".t.") == str(target)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    _files.write_private(str(target), b"\x89PNG", ".t.")
    assert target.read_bytes() == b"\x89PNG"
    assert sorted(os.listdir(tmp_path)) == ["report.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    with pytest.raises(AttributeError):
        _files.write_private(str(target), 12345, ".t.")  # neither text nor bytes
    assert target.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["report.json"]
