"""specdec_wheel_cache / plugin_utils/_wheel_cache: concurrent runs fill the controller's wheel cache once, completely.

A stand-in for the controller's Python runs as ``<python> -m pip download ... --dest DIR`` (the real argv of
plugin_utils/_wheels.py): it logs each run and writes its wheels slowly, in chunks, so that two downloads into one
directory (the race of playbooks/fleet.yml's concurrent runs) would overlap, and a reader could catch a half-written
cache.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.sparkops.specdec.plugins.action import specdec_wheel_cache
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _wheels
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _wheel_cache

LAB = _wheels.wheel_target("x86_64", "3.11.2", "glibc 2.36")
LAB["version"] = "2.4.0"
REQ = "huggingface_hub==2.4.0"
WHEELS = {"huggingface_hub-2.4.0-py3-none-any.whl": 40000, "pip-26.3-py3-none-any.whl": 30000}

FAKE_PIP = textwrap.dedent("""\
    #!{python}
    # Stand-in for the controller's python running `-m pip download` (sparkops unit test).
    import os, sys, time
    args = sys.argv[1:]
    assert args[:3] == ["-m", "pip", "download"], args
    dest = args[args.index("--dest") + 1]
    with open({log!r}, "a") as log:
        log.write("%d %s\\n" % (os.getpid(), dest))
    if os.environ.get("FAKE_PIP_FAIL"):
        sys.stderr.write("Looking in indexes: https://pypi.org/simple\\n"
                         "ERROR: No matching distribution found for huggingface_hub==2.4.0\\n")
        sys.exit(1)
    os.makedirs(dest, exist_ok=True)
    for name, size in {wheels!r}.items():
        with open(os.path.join(dest, name), "wb") as out:
            for _ in range(4):
                out.write(b"w" * (size // 4))
                out.flush()
                time.sleep(0.15)
    """)


@pytest.fixture
def fake_python(tmp_path):
    log = tmp_path / "pip-runs.log"
    script = tmp_path / "fake-python"
    script.write_text(FAKE_PIP.format(python=sys.executable, log=str(log), wheels=WHEELS))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), log


DRIVER = textwrap.dedent("""\
    import sys
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _wheels
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _wheel_cache
    target = _wheels.wheel_target("x86_64", "3.11.2", "glibc 2.36")
    path, python, req = sys.argv[1:4]
    fetched = _wheel_cache.ensure(path, lambda d: _wheels.pip_download_argv(target, python, req, d), req)
    print("fetched" if fetched else "found")
    """)


def _runs(log):
    return log.read_text().splitlines() if log.exists() else []


def _complete_and_whole(path):
    """The cache as a reader sees it: (has .complete, every wheel at full size)."""
    try:
        names = set(os.listdir(path))
        sizes = {n: os.path.getsize(os.path.join(path, n)) for n in WHEELS if n in names}
    except FileNotFoundError:
        return False, False
    return _wheel_cache.COMPLETE in names, sizes == WHEELS


def test_two_concurrent_runs_both_succeed_download_once_and_no_reader_sees_a_partial_cache(tmp_path, fake_python):
    python, log = fake_python
    path = str(tmp_path / "cache" / "wheels" / "2.4.0" / LAB["key"])
    seen = []
    stop = threading.Event()

    def watch():  # a third run reading the cache the way wheels.yml does (.complete, then the wheels)
        while not stop.is_set():
            seen.append(_complete_and_whole(path))
            time.sleep(0.01)
        # Once more after both runs ended: under load this thread may not have run between the cache's completion and
        # stop (the one failure seen, "(True, True) in seen"), and the reader must find the finished cache whole.
        seen.append(_complete_and_whole(path))

    watcher = threading.Thread(target=watch)
    watcher.start()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs = [subprocess.Popen([sys.executable, "-c", DRIVER, path, python, REQ], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True) for dummy in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    stop.set()
    watcher.join()
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted(o[0].strip() for o in outs) == ["fetched", "found"]
    assert len(_runs(log)) == 1, _runs(log)  # the second run waited for the lock and found the cache complete
    assert _complete_and_whole(path) == (True, True)
    assert sorted(os.listdir(path)) == sorted([_wheel_cache.COMPLETE] + list(WHEELS))
    assert open(os.path.join(path, _wheel_cache.COMPLETE)).read() == REQ + "\n"
    # Never a mark beside a half-written wheel, never wheels in the final directory without the mark.
    assert all(state in ((False, False), (True, True)) for state in seen), [s for s in seen if s[0] != s[1]]
    assert (True, True) in seen
    # Only the cache directory and its lock file beside it: the download's temporary directory is gone.
    assert sorted(os.listdir(os.path.dirname(path))) == sorted([LAB["key"], LAB["key"] + ".lock"])
    # pip wrote into the temporary directory next to the cache, not into the cache itself.
    dest = _runs(log)[0].split(" ", 1)[1]
    assert os.path.dirname(dest) == os.path.dirname(path) and dest != path
    assert os.path.basename(dest).startswith(".%s.partial-" % LAB["key"])


def test_a_failed_download_is_one_line_and_leaves_no_cache(tmp_path, fake_python, monkeypatch):
    python, log = fake_python
    monkeypatch.setenv("FAKE_PIP_FAIL", "1")
    path = str(tmp_path / "w" / LAB["key"])
    with pytest.raises(_wheel_cache.WheelCacheError) as err:
        _wheel_cache.ensure(path, lambda d: _wheels.pip_download_argv(LAB, python, REQ, d), REQ)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("specdec_server_controller_cache_dir: pip download into %s failed "
                                              "(rc 1: ERROR: No matching distribution found" % path)
    assert "specdec_server_wheel_dir" in msg
    assert sorted(os.listdir(os.path.dirname(path))) == [LAB["key"] + ".lock"]
    monkeypatch.delenv("FAKE_PIP_FAIL")
    assert _wheel_cache.ensure(path, lambda d: _wheels.pip_download_argv(LAB, python, REQ, d), REQ) is True
    assert _complete_and_whole(path) == (True, True) and len(_runs(log)) == 2


def test_an_incomplete_directory_and_a_killed_downloads_leftover_are_replaced(tmp_path, fake_python):
    python, log = fake_python
    parent = tmp_path / "w"
    path = parent / LAB["key"]
    path.mkdir(parents=True)
    (path / "huggingface_hub-2.4.0-py3-none-any.whl").write_bytes(b"half")   # an earlier version, killed mid-way
    (parent / (".%s.partial-abc" % LAB["key"])).mkdir()                       # this version, killed mid-way
    assert _wheel_cache.ensure(str(path), lambda d: _wheels.pip_download_argv(LAB, python, REQ, d), REQ) is True
    assert _complete_and_whole(str(path)) == (True, True)
    assert sorted(os.listdir(str(parent))) == sorted([LAB["key"], LAB["key"] + ".lock"])
    # Complete: nothing runs again.
    assert _wheel_cache.ensure(str(path), lambda d: _wheels.pip_download_argv(LAB, python, REQ, d), REQ) is False
    assert len(_runs(log)) == 1


def _make(args, check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    task.action = "specdec_wheel_cache"
    return specdec_wheel_cache.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                            shared_loader_obj=None)


def test_action_fetches_once_and_check_mode_fetches_nothing(tmp_path, fake_python):
    python, log = fake_python
    path = str(tmp_path / "w" / LAB["key"])
    args = {"path": path, "target": LAB, "requirement": REQ, "python": python}
    checked = _make(dict(args), check_mode=True).run(task_vars={})
    assert checked["changed"] is True and not os.path.exists(os.path.dirname(path)) and _runs(log) == []
    first = _make(dict(args)).run(task_vars={})
    assert first["changed"] is True and first["path"] == path and _complete_and_whole(path) == (True, True)
    again = _make(dict(args)).run(task_vars={})
    assert again["changed"] is False and len(_runs(log)) == 1
    # The controller's Python defaults to ansible_playbook_python.
    other = str(tmp_path / "w2" / LAB["key"])
    del args["python"]
    assert _make(dict(args, path=other)).run(task_vars={"ansible_playbook_python": python})["changed"] is True
    assert len(_runs(log)) == 2


def test_action_refuses_a_range_and_reports_a_failed_download(tmp_path, fake_python, monkeypatch):
    python = fake_python[0]
    args = {"path": str(tmp_path / "w" / LAB["key"]), "target": LAB, "python": python}
    with pytest.raises(AnsibleActionFail, match="^specdec_server_hf_hub_requirement: 'huggingface_hub>=2' is not an"):
        _make(dict(args, requirement="huggingface_hub>=2")).run(task_vars={})
    monkeypatch.setenv("FAKE_PIP_FAIL", "1")
    with pytest.raises(AnsibleActionFail, match="^specdec_server_controller_cache_dir: pip download into "):
        _make(dict(args, requirement=REQ)).run(task_vars={})
