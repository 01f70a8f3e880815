"""sparkops.specdec.firewall_plan is deprecated (meta/runtime.yml plugin_routing, removal in 0.4.0): a playbook that
calls it still runs (controller-side, no host contacted) and Ansible prints the deprecation warning naming the
replacement; the module's documented removal version is the routing's."""
import os
import pathlib
import subprocess
import sys

import yaml

from ansible_collections.sparkops.specdec.plugins.modules import firewall_plan

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = str(pathlib.Path(sys.executable).parent / "ansible-playbook")

USER_PLAYBOOK = """
- name: A user's play that still calls the deprecated planner
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Plan the removal from a probe
      sparkops.specdec.firewall_plan:
        state: absent
        probe: {stdout: ''}
      register: plan
    - name: Show it
      ansible.builtin.debug:
        msg: "PLANNED {{ plan.delete | length }} {{ plan.disable }}"
"""


def test_the_routing_and_the_documentation_agree():
    routing = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["plugin_routing"]["modules"]
    deprecation = routing["firewall_plan"]["deprecation"]
    doc = yaml.safe_load(firewall_plan.DOCUMENTATION)
    assert str(deprecation["removal_version"]) == str(doc["deprecated"]["removed_in"]) == "0.4.0"
    assert "sparkops.specdec.endpoint_firewall" in deprecation["warning_text"]


def test_a_call_still_runs_and_warns(tmp_path):
    (tmp_path / "site.yml").write_text(USER_PLAYBOOK, encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_DEPRECATION_WARNINGS="True")
    result = subprocess.run([PLAYBOOK, "-i", "localhost,", "-c", "local", str(tmp_path / "site.yml")], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120, check=False)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "PLANNED 0 False" in out, out[-3000:]
    flat = " ".join(out.split())
    assert "firewall_plan" in flat and "deprecated" in flat.lower() and "0.4.0" in flat, out[-3000:]
    assert "sparkops.specdec.endpoint_firewall" in flat, out[-3000:]
