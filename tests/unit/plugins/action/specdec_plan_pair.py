# -*- coding: utf-8 -*-
"""The specdec_plan action (controller side, as the playbooks call it) run on a two-node pair: spark-1 in spark_head,
spark-2 in spark_workers, topology two_sparks. Shared by the test_specdec_plan_* files that need a pair.

hostvars is a stand-in for ansible-core's: hostvars[host] is the host's variables, raw_get(host) the same without the
names given in ``hidden`` (facts a role publishes with set_fact, e.g. trtllm_container_image_info, are not settings the
plan reads from the inventory)."""

from __future__ import annotations

import types

from ansible_collections.sparkops.specdec.plugins.action import specdec_plan

PAIR = ("spark-1", "spark-2")


class HostVars(dict):
    def __init__(self, hosts, hidden=()):
        super().__init__(hosts)
        self.hidden = frozenset(hidden)

    def raw_get(self, host):
        return {k: v for k, v in self[host].items() if k not in self.hidden}


def run_pair(hosts, hidden=()):
    """Run specdec_plan with hosts = {"spark-1": {...}, "spark-2": {...}} (a host left out has no variables of its
    own); each host gets ansible_host 10.0.0.N unless it sets one. Returns the action's result."""
    task = types.SimpleNamespace(args={"topology": "two_sparks"}, check_mode=False, diff=False, async_val=0,
                                 action="sparkops.specdec.specdec_plan")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    action = specdec_plan.ActionModule(task, connection, None, None, None, None)
    hostvars = HostVars({host: dict({"ansible_host": "10.0.0.%d" % (index + 1)}, **hosts.get(host, {}))
                         for index, host in enumerate(PAIR)}, hidden)
    task_vars = {"inventory_hostname": PAIR[0], "groups": {"spark_head": [PAIR[0]], "spark_workers": [PAIR[1]]},
                 "ansible_play_hosts_all": list(PAIR), "hostvars": hostvars}
    return action.run(task_vars=task_vars)
