"""diagnose_facts, preflight_facts and specdec_status_facts return no ansible_facts and were renamed *_info in 0.3.0
(issue 21 item 5). The old names are meta/runtime.yml redirects with a deprecation (removal in 0.4.0): a playbook that
calls them on localhost still runs the new modules (diagnose's action plugin too: the secrets never reach the node
part) and Ansible prints one deprecation warning per old name, naming the new one. The routing, the modules' docs and
the files agree."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from ansible_collections.sparkops.specdec.plugins.module_utils import _diagnose
from ansible_collections.sparkops.specdec.plugins.modules import diagnose_info, preflight_info, specdec_status_info

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = str(pathlib.Path(sys.executable).parent / "ansible-playbook")
RENAMED = {"diagnose_facts": diagnose_info, "preflight_facts": preflight_info,
           "specdec_status_facts": specdec_status_info}
CANARY = "hf_CanaryInfoRename0123456789abcdef"

# Harmless on localhost: a temp state dir, a container that does not exist, no SSH targets (empty fabric), no Hub
# request, no GPU run, no HTTP probe; the three modules only read.
USER_PLAYBOOK = """
- name: A user's play that still calls the old names
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Old preflight name
      sparkops.specdec.preflight_facts:
        container: sparkops-no-such-container-info-test
        state_dir: "{{ tmp }}/state"
        hf_cache_dir: "{{ tmp }}/hf"
        node: localhost
        hub_check: false
        gpu_check: false
      register: pre
    - name: Old status name
      sparkops.specdec.specdec_status_facts:
        node: localhost
        container: sparkops-no-such-container-info-test
        state_dir: "{{ tmp }}/state"
        probe: false
      register: st
    - name: Old diagnose name (module and action plugin)
      sparkops.specdec.diagnose_facts:
        container: sparkops-no-such-container-info-test
        state_dir: "{{ tmp }}/state"
        netplan_files: ["{{ tmp }}/no-such-netplan.yaml"]
        log_lines: 5
        secrets: ["%s"]
      register: diag
    - name: Keep what they returned
      ansible.builtin.copy:
        content: "{{ {'pre': pre, 'st': st, 'diag': diag} | to_json }}"
        dest: "{{ tmp }}/out.json"
        mode: "0600"
""" % CANARY


def routing():
    return yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text(encoding="utf-8"))["plugin_routing"]


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_the_routing_the_docs_and_the_files_agree(old):
    new = old[:-len("_facts")] + "_info"
    entry = routing()["modules"][old]
    assert entry["redirect"] == "sparkops.specdec." + new
    assert str(entry["deprecation"]["removal_version"]) == "0.4.0"
    assert "sparkops.specdec." + new in entry["deprecation"]["warning_text"]
    doc = yaml.safe_load(RENAMED[old].DOCUMENTATION)
    assert doc["module"] == new and "deprecated" not in doc
    assert str(doc["version_added"]) == "0.2.0"  # the first release that shipped the code, under the old name
    note = " ".join(n for n in doc["notes"] if "sparkops.specdec." + old in n)
    assert "deprecated" in note and "0.4.0" in note and "sparkops.specdec." + new in note
    assert (ROOT / "plugins" / "modules" / (new + ".py")).is_file()
    assert not (ROOT / "plugins" / "modules" / (old + ".py")).exists()
    if (ROOT / "plugins" / "action" / (new + ".py")).is_file():
        # ansible-core looks the action plugin up by the task's (old) name, not through the module redirect.
        assert routing()["action"][old]["redirect"] == "sparkops.specdec." + new
        assert not (ROOT / "plugins" / "action" / (old + ".py")).exists()


def test_old_names_still_run_and_warn(tmp_path):
    (tmp_path / "site.yml").write_text(USER_PLAYBOOK, encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_DEPRECATION_WARNINGS="True")
    result = subprocess.run([PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "tmp=%s" % tmp_path,
                             "-e", "ansible_python_interpreter=%s" % sys.executable,
                             str(tmp_path / "site.yml")], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    got = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert got["pre"]["changed"] is False and isinstance(got["pre"]["facts"], dict) and got["pre"]["facts"]
    assert got["st"]["changed"] is False and isinstance(got["st"]["status"], dict) and got["st"]["status"]
    # The action plugin ran: the module part refuses secrets, and the controller part adds the redacted count.
    assert got["diag"]["changed"] is False and set(got["diag"]["node_items"]) == set(_diagnose.ITEMS)
    assert "redacted" in got["diag"] and CANARY not in json.dumps(got)
    assert not any("ansible_facts" in got[k] for k in got)
    warnings = [" ".join(w.split()) for w in " ".join(out.split()).split("[DEPRECATION WARNING]")[1:]]
    for old in RENAMED:
        mine = [w for w in warnings if "sparkops.specdec." + old in w]
        assert len(mine) == 1, (old, warnings)
        new = "sparkops.specdec." + old[:-len("_facts")] + "_info"
        assert new in mine[0] and "0.4.0" in mine[0], mine[0]
