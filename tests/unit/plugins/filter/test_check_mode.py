# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE filter of plugins/filter/check_mode.py (specdec_server role): the placeholder commits
# with which check mode plans the launch on a node that has no download module yet.

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.filter import check_mode
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan


def _dep(members=("spark-1",)):
    settings = {"trtllm_container_image": "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12",
                "specdec_state_dir": "/var/lib/sparkops/specdec",
                "specdec_container_hf_cache_dir": "/root/.cache/huggingface"}
    return _plan.deployment_from_inventory(settings, "single_spark", list(members), members[0], {})


def test_every_planned_model_gets_a_placeholder_naming_its_revision():
    models = [{"repo": "openai/gpt-oss-120b", "revision": "main"}, {"repo": "org/draft", "revision": "v2"}]
    out = check_mode.unresolved_commits(models)
    assert sorted(out) == ["openai/gpt-oss-120b", "org/draft"]
    assert "main" in out["openai/gpt-oss-120b"] and "v2" in out["org/draft"]
    assert all("check mode" in value for value in out.values())


def test_plan_with_placeholders_has_a_launch_and_no_error():
    # Without commits the plan has no launch and the server decision cannot be made; with the placeholders the
    # check-mode run plans to the end (a missing commit would be an error).
    pre = _plan.build_plan(_dep(), trtllm_version="1.3.0rc12", version_source="test")
    assert pre["plan"]["launch"] is None
    commits = check_mode.unresolved_commits(pre["plan"]["models"])
    out = _plan.build_plan(_dep(), trtllm_version="1.3.0rc12", version_source="test", commits=commits)
    assert out["errors"] == []
    assert out["plan"]["launch"]["models"] == commits
    decision = _plan.decide({}, out["plan"], False, False)
    assert decision["action"] == "start"


@pytest.mark.parametrize("models", [None, "openai/gpt-oss-120b", [{"revision": "main"}], ["x"]])
def test_bad_input_is_a_filter_error(models):
    with pytest.raises(AnsibleFilterError):
        check_mode.unresolved_commits(models)
