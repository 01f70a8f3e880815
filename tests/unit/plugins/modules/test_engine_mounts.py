# -*- coding: utf-8 -*-
# Unit tests for sparkops.specdec.engine_mounts: main() on a temporary tree, owner = the user running the tests
# (conftest.module_outcome: the result of exit_json or fail_json). What the trtllm_container role relied on
# from its ansible.builtin.file and ansible.builtin.stat loops: directories with owner and mode (parents too), check
# mode that changes nothing, a second run without change, and stat results the container decision reads
# (sparkops.specdec's _container.mount_problems).

from __future__ import annotations

import os
import pwd
import stat

from ansible_collections.sparkops.specdec.plugins.module_utils import _container
from ansible_collections.sparkops.specdec.plugins.modules import engine_mounts
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import module_outcome

ME = pwd.getpwuid(os.geteuid()).pw_name


def run(check=False, diff=False, **args):
    return module_outcome(engine_mounts, args, check=check, diff=diff)


def mode_of(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_creates_directories_with_parents_then_changes_nothing(tmp_path):
    state = tmp_path / "state"
    dirs = [str(state), str(state / "deployments"), str(tmp_path / "home" / ".cache" / "huggingface")]
    first = run(directories=dirs, owner=ME, mode="0750", diff=True)
    assert first["changed"] is True
    assert [d["created"] for d in first["directories"]] == [True, True, True]
    for path in dirs + [str(tmp_path / "home"), str(tmp_path / "home" / ".cache")]:
        assert os.path.isdir(path) and mode_of(path) == 0o750
    assert [d["before"]["state"] for d in first["diff"]] == ["absent"] * 5
    second = run(directories=dirs, owner=ME, mode="0750")
    assert second["changed"] is False
    assert [d["changed"] for d in second["directories"]] == [False, False, False]


def test_fixes_the_mode_of_an_existing_directory(tmp_path):
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    os.chmod(str(path), 0o700)
    result = run(directories=[str(path)], owner=ME, diff=True)
    assert result["changed"] is True
    assert result["directories"] == [{"path": str(path), "created": False, "changed": True}]
    assert result["diff"][0]["before"]["mode"] == "0700" and result["diff"][0]["after"]["mode"] == "0755"
    assert mode_of(path) == 0o755


def test_check_mode_reports_and_changes_nothing(tmp_path):
    path = tmp_path / "state" / "deployments"
    result = run(check=True, directories=[str(path)], owner=ME,
                 mounts=[{"source": str(tmp_path / "state"), "type": "directory"}])
    assert result["changed"] is True
    assert result["directories"][0]["created"] is True
    assert not os.path.exists(str(tmp_path / "state"))
    # The node as it is: check mode reports the source missing, as a stat loop would.
    assert result["mount_stats"][0]["stat"] == {"exists": False}


def test_a_file_where_a_directory_belongs_stops_before_any_change(tmp_path):
    (tmp_path / "state").write_text("x")
    first = tmp_path / "first"
    result = run(directories=[str(first), str(tmp_path / "state" / "deployments")], owner=ME)
    assert result["failed"] is True and result["changed"] is False
    assert str(tmp_path / "state") in result["msg"] and "\n" not in result["msg"]
    assert not first.exists()


def test_unknown_owner_and_bad_mode_are_one_line_errors(tmp_path):
    unknown = run(directories=[str(tmp_path / "a")], owner="no-such-user-sparkops")
    assert unknown["failed"] and unknown["msg"].startswith("owner: no-such-user-sparkops")
    bad = run(directories=[str(tmp_path / "a")], owner=ME, mode="rwx")
    assert bad["failed"] and bad["msg"].startswith("mode: ")
    relative = run(directories=["relative/dir"], owner=ME)
    assert relative["failed"] and relative["msg"].startswith("directories: ")
    assert not (tmp_path / "a").exists()


def test_mount_stats_read_by_the_container_decision(tmp_path):
    state = tmp_path / "state"
    key_dir = tmp_path / "keys"
    (key_dir / "ssh_host_ed25519_key").mkdir(parents=True)  # Docker made a directory where the key belongs
    (key_dir / "mesh").mkdir()
    os.symlink(str(tmp_path / "gone"), str(tmp_path / "dangling"))
    settings = {"hf_cache": str(tmp_path / "dangling"), "container_hf_cache_dir": "/root/.cache/huggingface",
                "state_dir": str(state), "multinode": True, "host_key_dir": str(key_dir)}
    mounts = _container.container_mounts(settings)
    result = run(directories=[str(state)], owner=ME, mounts=mounts)
    by_source = dict((r["item"]["source"], r["stat"]) for r in result["mount_stats"])
    assert by_source[str(state)]["isdir"] is True
    assert by_source[str(key_dir / "mesh")]["isdir"] is True
    assert by_source[str(tmp_path / "dangling")] == {"exists": True, "isdir": False, "isreg": False, "islnk": True}
    spec = {"volumes": ["%s:%s" % (m["source"], m["target"]) for m in mounts]}
    problems = _container.mount_problems(spec, result["mount_stats"])
    assert len(problems) == 2
    assert any("dangling symbolic link" in p for p in problems)
    assert any("is a directory where a file belongs" in p for p in problems)


def test_python_modules_missing_names_only_what_cannot_be_imported(tmp_path):
    result = run(python_modules=["json", "sparkops_no_such_module", "os.path"])
    assert result["python_modules_missing"] == ["sparkops_no_such_module"]
    assert result["changed"] is False
    assert run()["python_modules_missing"] == []


# files: the container's files (entrypoint, hostfile, supervisor), written by the engine_container action in one call
# once it has decided about the container (before: a template loop and a copy, a module run per file).
def test_files_are_written_with_their_mode_then_left_alone(tmp_path):
    files = [{"path": str(tmp_path / "entrypoint.sh"), "content": "#!/bin/bash\nexec sshd\n", "mode": "0755"},
             {"path": str(tmp_path / "openmpi-hostfile"), "content": "10.0.0.1 slots=1\n", "mode": "0644"}]
    first = run(files=files)
    assert first["changed"] is True and [f["changed"] for f in first["files"]] == [True, True]
    assert (tmp_path / "entrypoint.sh").read_text() == "#!/bin/bash\nexec sshd\n"
    assert mode_of(tmp_path / "entrypoint.sh") == 0o755 and mode_of(tmp_path / "openmpi-hostfile") == 0o644
    again = run(files=files)
    assert again["changed"] is False and [f["changed"] for f in again["files"]] == [False, False]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entrypoint.sh", "openmpi-hostfile"]  # no temporary left


def test_a_changed_file_or_mode_is_rewritten_and_check_mode_only_reports_it(tmp_path):
    path = tmp_path / "openmpi-hostfile"
    path.write_text("10.0.0.1 slots=1\n")
    path.chmod(0o600)
    files = [{"path": str(path), "content": "10.0.0.2 slots=1\n", "mode": "0644"}]
    checked = run(check=True, diff=True, files=files)
    assert checked["changed"] is True and checked["files"] == [{"path": str(path), "changed": True}]
    assert checked["diff"] == [{"before_header": str(path), "after_header": str(path),
                                "before": "10.0.0.1 slots=1\n# mode 0600\n", "after": "10.0.0.2 slots=1\n# mode 0644\n"}]
    assert path.read_text() == "10.0.0.1 slots=1\n" and mode_of(path) == 0o600  # check mode changed nothing
    done = run(files=files)
    assert done["changed"] is True and path.read_text() == "10.0.0.2 slots=1\n" and mode_of(path) == 0o644
    path.chmod(0o600)  # only the mode differs
    assert run(files=files)["changed"] is True and mode_of(path) == 0o644


def test_a_directory_where_a_file_belongs_stops_before_any_change(tmp_path):
    (tmp_path / "entrypoint.sh").mkdir()
    new_dir = tmp_path / "state" / "deployments"
    result = run(directories=[str(new_dir)], owner=ME,
                 files=[{"path": str(tmp_path / "hostfile"), "content": "x\n", "mode": "0644"},
                        {"path": str(tmp_path / "entrypoint.sh"), "content": "x\n", "mode": "0755"}])
    assert result["failed"] is True and "entrypoint.sh exists and is not a regular file" in result["msg"]
    assert not (tmp_path / "hostfile").exists() and not new_dir.exists()
