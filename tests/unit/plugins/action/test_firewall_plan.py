# -*- coding: utf-8 -*-
# Unit tests of the action plugin sparkops.specdec.firewall_plan: the role's probe in, the ufw rules (or one-line
# refusal) out; changed and --diff follow what is pending; check_only answers before the fabric is known.

from __future__ import annotations

from unittest import mock

import pytest

from ansible.errors import AnsibleError

from ansible_collections.sparkops.specdec.plugins.action import firewall_plan
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils import test_firewall as tf


def probe(status=tf.STATUS_INACTIVE, tuples="", ufw="/usr/sbin/ufw", marker=False):
    lines = ["ufw\t" + ufw] + ["status\t" + s for s in status.splitlines()] + ["tuple\t" + t for t in tuples.splitlines()]
    if marker:
        lines.append("marker\tyes")
    return {"stdout": "\n".join(lines) + "\n", "rc": 0, "changed": False}


def run(args, diff=False, **task_vars):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = False
    task.diff = diff
    task.async_val = 0
    task.action = "firewall_plan"
    action = firewall_plan.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                        shared_loader_obj=None)
    tv = {"inventory_hostname": "spark-1"}
    tv.update(task_vars)
    return action.run(task_vars=tv)


def present(**over):
    args = {"probe": probe(), "ssh_connection": tf.SSH, "networks": ["192.168.250.1/32"], "port": "8355",
            "consent": "true", "fabric_interfaces": tf.FABRIC_IFS, "fabric_addresses": tf.FABRIC_ADDRS,
            "container_ssh_port": 2233, "deployment": "spark-1", "two_nodes": True}
    args.update(over)
    return args


def test_plan_with_diff_is_changed():
    result = run(present(), diff=True)
    assert result["changed"] is True and len(result["add"]) == 7 and result["enable"] is True
    assert result["diff"]["after"].startswith("ufw: active\nallow from any to port 22/tcp")


def test_applied_rules_are_unchanged_and_no_diff_without_diff_mode():
    result = run(present(probe=probe(tf.STATUS_ACTIVE, tf.APPLIED)))
    assert result["changed"] is False and result["add"] == [] and result["delete"] == [] and "diff" not in result


def test_refusal_fails_with_one_line():
    result = run(present(probe=probe(ufw="")))
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith("specdec_server_allowed_networks: ufw is not installed on spark-1;")
    assert "\n" not in result["msg"]


def test_ssh_port_falls_back_to_ansible_port():
    result = run(present(ssh_connection=""), ansible_port=2222)
    assert result["ssh_port"] == 2222 and result["add"][0]["to_port"] == "2222"


def test_check_only_needs_no_fabric_and_still_refuses():
    ok = run(present(fabric_interfaces=[], fabric_addresses=[], check_only=True))
    assert ok["changed"] is False and "add" not in ok and ok["ssh_port"] == 22
    refused = run(present(consent=False, check_only=True))
    assert refused["failed"] is True and "specdec_server_firewall_enable: true" in refused["msg"]


def test_absent_plans_the_teardown():
    result = run({"state": "absent", "probe": probe(tf.STATUS_ACTIVE, tf.APPLIED, marker=True),
                  "ssh_connection": tf.SSH})
    assert result["changed"] is True and result["disable"] is True and len(result["delete"]) == 7


@pytest.mark.parametrize("args,fragment", [
    ({"probe": "nope", "port": 1}, "probe must be the registered result"),
    ({"state": "gone", "probe": probe()}, "state must be present or absent"),
    ({"probe": probe()}, "port (the endpoint's, specdec_server_port) is required"),
    ({"probe": probe(), "port": 1, "consent": "maybe"}, "must be true or false"),
    ({"probe": probe(), "port": 1, "bogus": 1}, "unknown option(s) bogus"),
])
def test_bad_arguments(args, fragment):
    with pytest.raises(AnsibleError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        run(args)
