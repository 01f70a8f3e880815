# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The preflight's nccl_env check with specdec_nccl_bootstrap: management_interface (issue 24 item 2): the engine
container must name the management interface the plan's launch spec names, not the Up QSFP interfaces."""

from __future__ import annotations

import copy
import json

from ansible_collections.sparkops.specdec.plugins.module_utils import _layout
from ansible_collections.sparkops.specdec.tests.unit.plugins.plugin_utils import test_preflight as tp


def _plan_with(rank_env):
    plan = copy.deepcopy(tp.PLAN)
    plan["plan"]["rank_env"] = dict(rank_env, HF_HUB_OFFLINE="1")
    return plan


def _env_text(ifname):
    return json.dumps([{"Id": "c0ffee", "Config": {"Env": [
        "PATH=/usr/bin", "NCCL_SOCKET_IFNAME=%s" % ifname, "UCX_NET_DEVICES=%s" % ifname,
        "OMPI_MCA_btl_tcp_if_include=%s" % ifname]}}])


def test_management_bootstrap_container_passes_and_a_fabric_one_fails():
    plan = _plan_with(_layout.launch_env("direct", "management_interface", "enP7s7"))
    mgmt = {h: tp.registered(user=tp.user_part(env=(0, _env_text("enP7s7"), ""))) for h in tp.HOSTS}
    by_key, dummy = tp.run(probes=mgmt, plan=plan)
    entry = by_key[("nccl_env", "spark-1")]
    assert entry["status"] == "pass"
    assert entry["message"] == ("container has NCCL_SOCKET_IFNAME=enP7s7, UCX_NET_DEVICES=enP7s7, "
                                "OMPI_MCA_btl_tcp_if_include=enP7s7; the launch bootstraps over enP7s7 "
                                "(specdec_nccl_bootstrap)")
    # A container still on the QSFP interfaces (not recreated) fails.
    by_key, dummy = tp.run(plan=plan)
    assert by_key[("nccl_env", "spark-2")]["status"] == "fail"
    # The default plan (no bootstrap variables in the launch) still compares with the Up interfaces.
    by_key, dummy = tp.run(probes=mgmt)
    assert by_key[("nccl_env", "spark-1")]["status"] == "fail"
    assert by_key[("nccl_env", "spark-1")]["message"].endswith("the Up interfaces are %s" % tp.IFNAMES)
