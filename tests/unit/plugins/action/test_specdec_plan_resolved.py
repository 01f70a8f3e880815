# -*- coding: utf-8 -*-
"""specdec_plan plans on the settings Ansible resolved on each member (sparkops.specdec.specdec_settings), converted
to their spec's type: a setting of any prefix set only in a playbook's vars: reaches the plan, and a boolean given as
text (on, '1' from -e) is the boolean it says (issue 21: the plan read hf_hub_offline 'on' as false, so the HF token
went into the server's environment and the autostart record was disarmed)."""

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets
from ansible_collections.sparkops.specdec.tests.unit.plugins.action.specdec_plan_pair import PAIR, action_for, published, run_pair
from ansible_collections.sparkops.specdec.tests.unit.plugins.action.test_specdec_plan_secrets import run

TOKEN = "hf_" + "A" * 34
CLASH = "specdec_server_port: 8355 is also specdec_container_ssh_port"


@pytest.fixture(autouse=True)
def no_env_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)


def lines(result):
    return [line[2:] for line in result.get("msg", "").splitlines()[1:]]


def test_a_setting_outside_specdec_server_set_in_play_vars_reaches_the_plan():
    """specdec_container_ssh_port (specdec_common) only in the play's vars: the plan sees it (it clashes with the
    server's default port 8355 on a pair, whose head's container sshd listens on it), as the roles of that play do."""
    result = run_pair({}, play_vars={"specdec_container_ssh_port": 8355})
    assert result.get("failed") and any(line.startswith(CLASH) for line in lines(result)), result
    # The same value in the inventory: the same line (one resolution, whatever the precedence level).
    again = run_pair({host: {"specdec_container_ssh_port": 8355} for host in PAIR})
    assert lines(again) == lines(result)


def test_play_vars_win_over_the_inventory_on_every_member():
    hosts = {host: {"specdec_container_ssh_port": 8355} for host in PAIR}
    assert any(line.startswith(CLASH) for line in lines(run_pair(hosts)))
    fixed = run_pair(hosts, play_vars={"specdec_container_ssh_port": 2244})
    assert not fixed.get("failed"), fixed.get("msg")


def test_a_misspelt_name_in_play_vars_is_reported():
    result = run({"spark-1": {"ansible_host": "10.0.0.1"}}, play_vars={"specdec_container_ssh_prot": 2244})
    assert lines(result) == ["specdec_container_ssh_prot: not a setting of sparkops.specdec; did you mean "
                             "specdec_container_ssh_port?"]


def run_launch(settings):
    """The launch plan of one Spark with these settings (the downloads resolved every model's commit)."""
    hosts = {"spark-1": dict(settings, ansible_host="10.0.0.1")}
    first = run(hosts)
    assert not first.get("failed"), first.get("msg")
    action = action_for({"topology": "single_spark",
                         "commits": {m["repo"]: "1" * 40 for m in first["plan"]["models"]}})
    return action.run(task_vars={"inventory_hostname": "spark-1", "hostvars": published(hosts),
                                 "ansible_play_hosts_all": ["spark-1"], "groups": {"spark_head": ["spark-1"]}})


@pytest.mark.parametrize("given,offline", [("on", True), ("1", True), ("yes", True), (True, True), ("True", True),
                                           ("off", False), ("0", False), ("no", False), (False, False)])
def test_hf_hub_offline_as_text_is_the_boolean_it_says(given, offline):
    result = run_launch({"specdec_server_hf_token": TOKEN, "specdec_server_hf_hub_offline": given})
    assert not result.get("failed"), result.get("msg")
    env = result["plan"]["launch"]["env"]
    assert (env.get("HF_HUB_OFFLINE") == "1") is offline
    # Offline ranks never get the token (and the supervisor's record stays armed: it needs no token then).
    assert (_secrets.hf_token_env(TOKEN, env) == {}) is offline


def test_the_plan_gets_converted_values():
    result = run({"spark-1": {"ansible_host": "10.0.0.1", "specdec_server_port": "8356"}})
    assert not result.get("failed"), result.get("msg")
    assert result["plan"]["port"] == 8356
