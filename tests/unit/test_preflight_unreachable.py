"""End to end, no lab: playbooks/preflight.yml on the example fleet inventory's pair_a, both nodes pointed at a closed
port on loopback (unreachable). The report is still written, one failed row per node saying it is unreachable and
why, into specdec_report_dir (mode 0600), and the run fails after writing it. Run from a directory that is not the
checkout: nothing is written into the collection."""
import json
import os
import pathlib
import stat
import subprocess
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
FLEET = ROOT / "inventories" / "example" / "fleet.yml"
PLAYBOOK = str(pathlib.Path(sys.executable).parent / "ansible-playbook")


def test_unreachable_nodes_are_rows_of_the_written_report(tmp_path):
    before = sorted(p.name for p in ROOT.iterdir())
    varsfile = tmp_path / "vars.json"
    varsfile.write_text(json.dumps({"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_user": "nobody",
                                    "specdec_report_dir": "reports"}), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", HF_HUB_OFFLINE="1")
    env.pop("HF_TOKEN", None)
    cmd = [PLAYBOOK, "-i", str(FLEET), str(ROOT / "playbooks" / "preflight.yml"), "--limit", "pair_a",
           "-e", "@" + str(varsfile)]
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-2000:]
    path = tmp_path / "reports" / "preflight-report.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    rows = json.loads(path.read_text(encoding="utf-8"))
    assert [(r["id"], r["node"], r["status"]) for r in rows] == [
        ("reachable", "spark-1", "fail"), ("reachable", "spark-2", "fail")]
    assert all(r["message"].startswith("unreachable: ") and len(r["message"]) > len("unreachable: ") for r in rows)
    assert sorted(p.name for p in ROOT.iterdir()) == before


def test_status_json_goes_to_the_current_directory_not_the_collection(tmp_path):
    """playbooks/status.yml with no report setting, both nodes unreachable (loopback, closed port): the JSON is
    specdec-status.json in the directory ansible-playbook runs in (mode 0600), one row per node, and nothing is
    written into the collection (read-only when installed in an execution environment)."""
    before = sorted(p.name for p in ROOT.iterdir())
    varsfile = tmp_path / "vars.json"
    varsfile.write_text(json.dumps({"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_user": "nobody"}),
                        encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    cmd = [PLAYBOOK, "-i", str(FLEET), str(ROOT / "playbooks" / "status.yml"), "--limit", "pair_a",
           "-e", "@" + str(varsfile)]
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    path = tmp_path / "specdec-status.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    doc = json.loads(path.read_text(encoding="utf-8"))
    nodes = {n: v["reachable"] for row in doc["deployments"] for n, v in row["nodes"].items()}
    assert nodes == {"spark-1": False, "spark-2": False}
    assert sorted(p.name for p in ROOT.iterdir()) == before


def test_diagnose_bundle_and_the_preflight_report_it_reads_are_in_the_report_dir(tmp_path):
    """playbooks/diagnose.yml with specdec_report_dir (nodes unreachable: recorded in the manifest): the bundle is
    written there (0600) and includes the preflight report preflight.yml wrote there."""
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "preflight-report.json").write_text(json.dumps([{"id": "reachable", "status": "fail"}]),
                                                   encoding="utf-8")
    varsfile = tmp_path / "vars.json"
    varsfile.write_text(json.dumps({"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_user": "nobody",
                                    "specdec_report_dir": str(reports)}), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_SHOW_CUSTOM_STATS="1")
    cmd = [PLAYBOOK, "-i", str(FLEET), str(ROOT / "playbooks" / "diagnose.yml"), "--limit", "pair_a",
           "-e", "@" + str(varsfile)]
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    (bundle,) = [p for p in reports.iterdir() if p.name.startswith("sparkops-diagnose-")]
    assert stat.S_IMODE(os.stat(bundle).st_mode) == 0o600
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
    assert any(n.endswith("/controller/preflight-report.json") for n in names), names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports", "vars.json"]
