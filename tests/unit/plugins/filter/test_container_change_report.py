# -*- coding: utf-8 -*-
"""The PRIVATE filter container_change_report (specdec_server role, templates/failure_message.j2) takes each member's
published trtllm_container_previous (member -> record), not hostvars (issue 21 item 3); the failure report, rendered
from the role's own template by ansible-core's Templar, still names each node's restored or kept container."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.filter import container_change
from ansible_collections.sparkops.specdec.plugins.module_utils import _container_change as cc
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_container_change import record

ROOT = pathlib.Path(__file__).resolve().parents[4]
TEMPLATE = ROOT / "roles" / "specdec_server" / "templates" / "failure_message.j2"
MEMBERS = ["spark-1", "spark-2"]


def test_a_member_with_a_pending_change_and_no_restore_is_named():
    rec = record()
    text = container_change.container_change_report({"spark-1": rec, "spark-2": {}}, MEMBERS)
    assert text == cc.change_report({"spark-1": rec}, MEMBERS, [])
    assert "NOT undone on spark-1: its previous container is still kept as trtllm-multinode-previous" in text
    assert "spark-2" not in text


def test_only_the_members_records_count():
    """A record of a host outside the deployment is not reported; no member with a record: no sentence."""
    assert container_change.container_change_report({"spark-9": record()}, MEMBERS) == ""
    assert container_change.container_change_report({}, MEMBERS, {"results": []}) == ""


def test_restore_results_win_over_the_records():
    rec = record()
    restore = {"results": [{"item": "spark-1", "restored": True, "previous": rec, "summary": "spark-1: back"},
                           {"item": "spark-2", "skipped": True}]}
    text = container_change.container_change_report({"spark-1": {}, "spark-2": {}}, MEMBERS, restore)
    assert text == "The container change to lab/standin:1.3.0rc12 was undone: spark-1: back."


@pytest.mark.parametrize("previous,members", [([], MEMBERS), ({"spark-1": {}}, "spark-1")])
def test_wrong_inputs_are_one_line(previous, members):
    with pytest.raises(AnsibleFilterError, match="^container_change_report: "):
        container_change.container_change_report(previous, members)


_RENDER = textwrap.dedent("""
    import json, sys
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader([sys.argv[1]])
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    with open(sys.argv[2], encoding='utf-8') as f:
        text = f.read()
    print(json.dumps([Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text))
                      for variables in json.loads(sys.argv[3])]))
""")


def render_report(cases):
    """failure_message.j2 as the role renders it on the head (the server was not started by this run), with the
    collection's filters loaded as ansible-playbook loads them: the text of each (hostvars, restore) case."""
    collections = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    cases_vars = []
    for hostvars, restore in cases:
        variables = {
            "inventory_hostname": "spark-1", "hostvars": hostvars, "specdec_state_dir": "/var/lib/sparkops/specdec",
            "__specdec_server_failure": "health timeout.", "__specdec_server_stop_failed": {"skipped": True},
            "specdec_server_launch": {"plan": {"members": MEMBERS}}, "__specdec_server_log": {"stdout_lines": []},
        }
        if restore is not None:
            variables["__specdec_server_container_restore"] = restore
        cases_vars.append(variables)
    done = subprocess.run([sys.executable, "-c", _RENDER, collections, str(TEMPLATE), json.dumps(cases_vars)],
                          check=True, capture_output=True, text=True,
                          env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")))
    return [" ".join(text.split()) for text in json.loads(done.stdout.strip().splitlines()[-1])]


def test_the_failure_report_reads_each_members_trtllm_container_previous():
    rec = record()
    hostvars = {"spark-1": {"trtllm_container_previous": rec, "other": 1}, "spark-2": {"other": 2}}
    restore = {"results": [{"item": "spark-1", "restored": True, "previous": rec, "summary": "spark-1: back"}]}
    kept, restored, none = render_report([(hostvars, None), (hostvars, restore),
                                          ({"spark-1": {}, "spark-2": {}}, None)])
    assert cc.change_report({"spark-1": rec}, MEMBERS, []) in kept
    assert "The container change to lab/standin:1.3.0rc12 was undone: spark-1: back." in restored
    assert "container change" not in none and none.startswith("The server on spark-1 did not become healthy")
