# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""One root cause, one line (issue 38 item 4): the layout rule before its address plan, a copied address list or a
parted link once, a missing value "not set" (never a Python repr). Through the entry points the preflight uses: the
specdec_plan action (tests/unit/plugins/action/specdec_plan_pair.py) and _plan.check_fabric / build_plan."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from ansible_collections.sparkops.specdec.plugins.module_utils import _layout
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan
from ansible_collections.sparkops.specdec.tests.unit.plugins.action.specdec_plan_pair import (
    action_for, published, run_pair)

FAST = settings(max_examples=60, deadline=None)
THREE = ["spark-1", "spark-2", "spark-3"]


def lines(result):
    assert result.get("failed"), result
    return [line[2:] for line in result["msg"].split("\n")[1:]]


def test_a_ring_of_two_sparks_is_one_line_naming_the_layout_rule():
    assert lines(run_pair({}, {"specdec_layout": "ring"})) == [
        "specdec_layout: a ring needs three Sparks, the deployment has two; use direct (one cable) or switch."]


def test_a_draft_method_without_a_draft_is_one_line_saying_not_set():
    action = action_for({"topology": "single_spark"})
    hostvars = published({"spark-1": {"ansible_host": "10.0.0.1"}},
                         {"specdec_engine": "vllm", "specdec_server_method": "eagle3"})
    result = action.run(task_vars={"inventory_hostname": "spark-1", "groups": {"spark_head": ["spark-1"]},
                                   "ansible_play_hosts_all": ["spark-1"], "hostvars": hostvars})
    (line,) = lines(result)
    assert line.startswith("specdec_server_draft_model: not set, but specdec_server_method eagle3 "), line
    assert "None" not in line


def test_a_missing_value_is_not_set_never_a_repr():
    # build_plan's vLLM method check with the version the action read as "" (no vllm package metadata).
    line = _plan.vllm_method_problem("eagle3", "", "vllm/vllm-openai:v0.28.0")
    assert "(not set)" in line and "''" not in line, line
    assert _plan.said(None) == _plan.said("") == "not set" and _plan.said(3) == "3"


def _ring(addresses):
    return lambda host: {"specdec_layout": "ring", "specdec_nccl_bootstrap": "management_interface",
                         "netplan_qsfp_addresses": addresses.get(host) or []}


def _good_ring():
    return {h: _layout.ring_addresses(i, 3) for i, h in enumerate(THREE)}


@FAST
@given(st.permutations(THREE))
def test_a_list_copied_from_one_node_to_another_is_one_line(order):
    source, target = order[0], order[1]
    addresses = _good_ring()
    assert _plan.check_fabric(THREE, _ring(addresses), {}) == []
    addresses[target] = list(addresses[source])
    found = _plan.check_fabric(THREE, _ring(addresses), {})
    assert len(found) == 1 and found[0].startswith("netplan_qsfp_addresses: "), found
    assert source in found[0] and target in found[0]


@FAST
@given(st.sampled_from(THREE), st.integers(0, 3), st.integers(10, 99))
def test_one_address_moved_to_another_subnet_is_one_line(host, slot, third):
    addresses = _good_ring()
    addresses[host][slot] = "10.77.%d.1/24" % third
    found = _plan.check_fabric(THREE, _ring(addresses), {})
    assert len(found) == 1 and found[0].startswith("netplan_qsfp_addresses: 1 logical link(s)"), found


def test_a_pairs_copied_list_is_one_line():
    def settings_of(host):  # both nodes hold the same list
        return {"netplan_qsfp_addresses": ["192.168.100.10/24", "192.168.101.10/24"]}

    found = _plan.check_fabric(["spark-1", "spark-2"], settings_of, {})
    assert found == ["netplan_qsfp_addresses: spark-1 and spark-2 would both use 192.168.100.10 and 192.168.101.10; "
                     "give each node its own addresses, or drop netplan_qsfp_addresses to use the scheme."]
