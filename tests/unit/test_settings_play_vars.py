"""End to end (issue 21 item 1): a user's playbook that applies the roles, with a setting outside specdec_server_*
(specdec_container_ssh_port, of specdec_common) only in its play vars: the plan inside the specdec_server role sees
the same value as the roles (it clashes with the server's default port 8355 on a pair) and stops the run there, before
any task that needs a host. The nodes are unreachable (a closed port on loopback) and the run is in check mode: the
plan and the settings contact no host, anything after them would fail as unreachable."""
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = str(pathlib.Path(sys.executable).parent / "ansible-playbook")
CLASH = "- specdec_server_port: 8355 is also specdec_container_ssh_port"

USER_PLAYBOOK = """
- name: A user's play that applies the collection's roles
  hosts: spark_nodes
  gather_facts: false
  vars:
    specdec_container_ssh_port: %s
    # What the trtllm_container role publishes (its own play would run it first).
    trtllm_container_mounts: {user: spark, home: /home/spark, hf_cache: /home/spark/.cache/huggingface,
                              state_dir: /var/lib/sparkops/specdec}
  roles:
    - role: sparkops.specdec.specdec_server
"""


def _run(tmp_path, port, closed_port):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": closed_port},
        "children": {"spark_nodes": {"children": {"spark_head": {"hosts": {"spark-1": {}}},
                                                  "spark_workers": {"hosts": {"spark-2": {}}}}}}}}), encoding="utf-8")
    playbook = tmp_path / "site.yml"
    playbook.write_text(USER_PLAYBOOK % port, encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_HOST_KEY_CHECKING="False")
    env.pop("HF_TOKEN", None)
    result = subprocess.run([PLAYBOOK, "--check", "-i", str(inventory), str(playbook)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    return result, json.loads(result.stdout)


def test_play_vars_of_any_prefix_reach_the_plan_in_the_roles(tmp_path, closed_port):
    result, doc = _run(tmp_path, 8355, closed_port)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-2000:]
    failed = [r for t in doc["plays"][0]["tasks"] for r in t["hosts"].values() if r.get("failed")]
    assert failed and all(any(line.startswith(CLASH) for line in r["msg"].splitlines()) for r in failed), failed
    # Stopped by the plan: no host was contacted (none unreachable).
    assert all(stats["unreachable"] == 0 for stats in doc["stats"].values()), doc["stats"]


def test_the_same_play_without_the_clash_goes_on_to_the_hosts(tmp_path, closed_port):
    """The control: with another port the plan passes, and the next task that needs a host finds none."""
    result, doc = _run(tmp_path, 2244, closed_port)
    assert result.returncode == 4, result.stdout[-3000:] + result.stderr[-2000:]
    plans = [r for t in doc["plays"][0]["tasks"] for r in t["hosts"].values()
             if r.get("action") == "sparkops.specdec.specdec_plan"]
    assert plans and not any(r.get("failed") for r in plans), plans
    assert sum(stats["unreachable"] for stats in doc["stats"].values()) >= 1, doc["stats"]
