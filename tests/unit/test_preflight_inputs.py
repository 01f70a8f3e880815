"""End to end: invalid inputs are rejected by the first play of the deployment playbooks, before any
host changes, one line per problem naming the setting and the fix. Each case runs a real playbook (in
check mode, against a loopback-only inventory that is never contacted); it must fail inside
"Preflight 1/2" with no later play started. The rules themselves are tested, one negative case per
option, on the pure functions (tests/unit/plugins/plugin_utils/test_settings.py and test_plan.py);
these few cases show the playbooks run them."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
INV = ROOT / "tests" / "unit" / "fixtures" / "inventories"
PLAYBOOK = str(pathlib.Path(sys.executable).parent / "ansible-playbook")

# (case id, extra vars, the setting each problem line must name (in order of the lines), playbook, inventory)
CASES = [
    # Hidden-input trials of the "Core plan in Python" issue: each passed the old preflight or was
    # rejected with a list of every rule.
    ("misspelt-prefix", {"specdec_sever_port": 9000}, ["specdec_sever_port"], "two_sparks", "two_nodes"),
    ("draft-len-out-of-range", {"specdec_server_max_draft_len": 64}, ["specdec_server_max_draft_len"], "two_sparks",
     "two_nodes"),
    ("overlapping-link-subnets", {"netplan_qsfp_link_subnets": ["192.168.100.0/23", "192.168.101.0/24"]},
     ["netplan_qsfp_link_subnets"], "two_sparks", "two_nodes"),
    ("malformed-model-id", {"specdec_server_target_model": "Qwen3-235B"}, ["specdec_server_target_model"], "two_sparks",
     "two_nodes"),
    ("removed-duplicate-name", {"trtllm_container_name": "my-engine"}, ["trtllm_container_name"], "two_sparks",
     "two_nodes"),
    ("draft-target-with-eagle-head", {"specdec_server_method": "draft_target"}, ["specdec_server_draft_model"],
     "two_sparks", "two_nodes"),
    ("port-is-container-sshd", {"specdec_server_port": 2233}, ["specdec_server_port"], "two_sparks", "two_nodes"),
    ("two-problems", {"specdec_server_max_draft_len": 0, "docker_group_name": ""},
     ["docker_group_name", "specdec_server_max_draft_len"], "single_spark", "two_nodes"),
    ("hf-token-with-newline", {"specdec_server_hf_token": "hf_labCanaryToken0123456789abcdefABCDEF\n"},
     ["specdec_server_hf_token"], "two_sparks", "two_nodes"),
    ("tp2-one-node", {"specdec_server_tp_size": 2}, ["specdec_server_tp_size"], "single_spark", "two_nodes"),
    ("no-worker", {}, ["inventory"], "two_sparks", "head_only"),
    ("single-two-hosts", {"single_spark_host": "spark_nodes"}, ["inventory"], "single_spark", "two_nodes"),
]


def _run(playbook, inventory, extra, tmp_path):
    varsfile = tmp_path / "vars.json"
    varsfile.write_text(json.dumps(extra), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    return subprocess.run(
        [PLAYBOOK, "--check", "-i", str(INV / (inventory + ".yml")), str(ROOT / "playbooks" / (playbook + ".yml")),
         "-e", "@" + str(varsfile)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def _failed_results(doc):
    out = []
    for play in doc["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("failed"):
                    out.append((play["play"]["name"], task["task"]["name"], host, res))
    return out


@pytest.mark.parametrize("case_id,extra,names,playbook,inventory", CASES, ids=[c[0] for c in CASES])
def test_invalid_input_rejected_before_any_host_change(case_id, extra, names, playbook, inventory, tmp_path):
    result = _run(playbook, inventory, extra, tmp_path)
    assert result.returncode != 0, f"{case_id}: accepted\n{result.stdout[-3000:]}"
    doc = json.loads(result.stdout)
    # The run check's play (plays/run_check.yml, sparkops.specdec.playbook_check) runs first and passes.
    plays = [p["play"]["name"] for p in doc["plays"]
             if not all(r.get("action") == "sparkops.specdec.playbook_check" for t in p["tasks"] for r in t["hosts"].values())]
    assert plays and all(p.startswith("Preflight 1/2") for p in plays), f"{case_id}: got past preflight: {plays}"
    failed = _failed_results(doc)
    assert len(failed) == 1, failed
    msg = failed[0][3]["msg"]
    head, *lines = msg.split("\n")
    assert re.match(r"^Deployment \S+: \d+ problem\(s\), nothing was changed:$", head), head
    assert int(re.search(r"(\d+) problem", head).group(1)) == len(lines) == len(names), msg
    for line, name in zip(lines, names):
        # One line per problem: the setting first, then the problem and the fix; no rule lists,
        # argument-spec dumps or internal class names.
        assert line.startswith("- " + name + ":"), (line, name)
        assert len(line) < 400, line
        for noise in ("argument_spec", "AnsibleModule", "Traceback", "validate_argument_spec", "__"):
            assert noise not in line, line
    assert "hf_labCanaryToken" not in result.stdout + result.stderr
    stats = doc["stats"]
    assert all(s.get("changed", 0) == 0 for s in stats.values()), stats


@pytest.mark.parametrize("playbook", ["two_sparks", "single_spark"])
def test_valid_settings_pass_the_preflight(playbook, tmp_path):
    result = _run("preflight_inventory", "two_nodes", {"preflight_topology": playbook}, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    doc = json.loads(result.stdout)
    (plan,) = [t["hosts"]["spark-1"] for p in doc["plays"] for t in p["tasks"]
               if t["hosts"]["spark-1"].get("action") == "sparkops.specdec.specdec_plan"]
    assert plan["errors"] == [] and plan["plan"]["tp_size"] == (2 if playbook == "two_sparks" else 1)
