# -*- coding: utf-8 -*-
"""The specdec_plan action (controller side, as the playbooks call it) run on a two-node pair: spark-1 in spark_head,
spark-2 in spark_workers, topology two_sparks. Shared by the test_specdec_plan_* files that need a pair.

As in a play, every host first resolves its own settings (sparkops.specdec.specdec_settings, in its own task context:
its variables, plus the play's) and registers the result as specdec_settings; hostvars is a stand-in for
ansible-core's (hostvars[host] is the host's variables), and the plan reads the registered result of every member."""

from __future__ import annotations

import types

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.sparkops.specdec.plugins.action import specdec_plan, specdec_settings

PAIR = ("spark-1", "spark-2")


def trusted(value):
    """A template string as Ansible gives one from an inventory or a playbook (trusted); other values as they are."""
    return trust_as_template(value) if isinstance(value, str) and ("{{" in value or "{%" in value) else value


def publish(variables, play_vars=None):
    """What sparkops.specdec.specdec_settings registers on a host with these variables (and the play's vars)."""
    task_vars = {k: trusted(v) for k, v in dict(variables, **(play_vars or {})).items()}
    return specdec_settings.resolve(Templar(loader=DataLoader(), variables=task_vars), task_vars)


def published(hosts, play_vars=None):
    """hosts = {host: its variables} -> the same, each with its registered specdec_settings."""
    return {host: dict(variables, specdec_settings=publish(variables, play_vars)) for host, variables in hosts.items()}


def action_for(args):
    task = types.SimpleNamespace(args=dict(args), check_mode=False, diff=False, async_val=0,
                                 action="sparkops.specdec.specdec_plan")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    return specdec_plan.ActionModule(task, connection, None, DataLoader(), None, None)


def run_pair(hosts, play_vars=None):
    """Run specdec_plan with hosts = {"spark-1": {...}, "spark-2": {...}} (a host left out has no variables of its
    own); each host gets ansible_host 10.0.0.N unless it sets one. Returns the action's result."""
    action = action_for({"topology": "two_sparks"})
    hostvars = published({host: dict({"ansible_host": "10.0.0.%d" % (index + 1)}, **hosts.get(host, {}))
                          for index, host in enumerate(PAIR)}, play_vars)
    task_vars = {"inventory_hostname": PAIR[0], "groups": {"spark_head": [PAIR[0]], "spark_workers": [PAIR[1]]},
                 "ansible_play_hosts_all": list(PAIR), "hostvars": hostvars}
    return action.run(task_vars=task_vars)
