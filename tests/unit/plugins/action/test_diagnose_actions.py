# -*- coding: utf-8 -*-
# Unit tests of the action plugins sparkops.specdec.diagnose_info (the node module runs without the secrets; what it
# returns is redacted before it leaves the action) and sparkops.specdec.diagnose_bundle (one tarball, 0600, with the
# manifest; the extracted tree holds no form of the canary, searched with the same Finder the Molecule test uses),
# and of the filter sparkops.specdec.secret_find.

from __future__ import annotations

import json
import os
import stat
import tarfile
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail, AnsibleError, AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.action import diagnose_bundle, diagnose_info
from ansible_collections.sparkops.specdec.plugins.filter.secrets import secret_find
from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets
from ansible_collections.sparkops.specdec.tests.unit.plugins.action.test_preflight_actions import make
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_diagnose import node_items
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_secret_find import SPECIAL, planted
from ansible_collections.sparkops.specdec.tests.unit.plugins.module_utils.test_secrets import CANARY, _forms, _leaks


def raw_result(token):
    items = node_items(token)
    # Every form of the list somewhere in what the node returned.
    items["container_log"]["content"] += "\n".join(_forms(token).values())
    return {"changed": False, "node_items": items, "items": items, "missing": []}


def test_diagnose_info_runs_the_module_without_secrets_and_redacts(tmp_path):
    action = make(diagnose_info.ActionModule, {"container": "trtllm-multinode", "log_lines": 10, "secrets": [CANARY, ""]})
    action._execute_module = mock.MagicMock(return_value=raw_result(CANARY))
    result = action.run(task_vars={})
    sent = action._execute_module.call_args.kwargs
    assert sent["module_name"] == "sparkops.specdec.diagnose_info"
    assert sent["module_args"] == {"container": "trtllm-multinode", "log_lines": 10}
    text = json.dumps(result)
    assert not _leaks(text, CANARY) and not _secrets.Finder([CANARY]).find(text)
    assert result["node_items"]["container_inspect"]["content"]["Config"]["Env"] == ["HF_TOKEN=********", "NCCL_IB_HCA=mlx5_0"]
    # items: node_items' deprecated name (removed in 1.0.0), redacted alike.
    assert result["items"] == result["node_items"]
    assert result["missing"] == ["ibdev2netdev (ibdev2netdev: command not found)",
                                 "nvidia_runtime (no nvidia runtime in docker info, no nvidia-ctk or nvidia-smi)"]
    assert result["redacted"] >= len(_forms(CANARY)) and result["changed"] is False and "failed" not in result


def test_diagnose_info_failures_and_unreachable_are_scrubbed():
    action = make(diagnose_info.ActionModule, {"secrets": CANARY})
    action._execute_module = mock.MagicMock(return_value={"failed": True, "msg": "boom Bearer %s" % CANARY})
    result = action.run(task_vars={})
    assert result["failed"] is True and CANARY not in json.dumps(result) and result["node_items"] == {}
    action._execute_module = mock.MagicMock(return_value={"unreachable": True, "msg": "ssh: %s" % CANARY})
    result = action.run(task_vars={})
    assert result["unreachable"] is True and CANARY not in result["msg"]


def test_diagnose_info_argument_errors():
    with pytest.raises(AnsibleError, match="unknown option"):
        make(diagnose_info.ActionModule, {"token": "x"}).run(task_vars={})
    with pytest.raises(AnsibleActionFail, match="secrets must be a list of strings"):
        make(diagnose_info.ActionModule, {"secrets": {"a": 1}}).run(task_vars={})


def bundle_args(tmp_path, token=CANARY, **over):
    args = {"nodes": ["spark-1", "spark-2", "spark-3"],
            "results": {"spark-1": diagnose_info.redact_result(raw_result(token), []),  # not redacted by the node action
                        "spark-2": {"unreachable": True, "msg": "Failed to connect: Bearer %s" % token}},
            "path": str(tmp_path / "bundle.tar.gz"), "preflight_report_path": str(tmp_path / "preflight.json"),
            "secrets": [token]}
    args.update(over)
    return args


@pytest.mark.parametrize("check_mode", [False, True])
def test_bundle_written_0600_redacted_with_manifest(tmp_path, check_mode):
    (tmp_path / "preflight.json").write_text(json.dumps([{"id": "hf_access", "message": "token %s ok" % CANARY}]))
    os.chmod(str(tmp_path / "preflight.json"), 0o644)
    result = make(diagnose_bundle.ActionModule, bundle_args(tmp_path), check_mode=check_mode).run(task_vars={})
    path = tmp_path / "bundle.tar.gz"
    assert result["path"] == str(path) and result["changed"] is False
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    assert not [n for n in os.listdir(str(tmp_path)) if n.startswith(".sparkops-diagnose-")]  # no temporary left
    assert result["nodes"] == ["spark-1", "spark-2", "spark-3"] and result["collected"] == ["spark-1"]
    assert result["missing"] == ["spark-1: nvidia_runtime (no nvidia runtime in docker info, no nvidia-ctk or nvidia-smi)",
                                 "spark-1: ibdev2netdev (ibdev2netdev: command not found)"]
    assert result["errors"] == [
        "spark-2: not collected (Failed to connect: Bearer ********)",
        "spark-3: not collected (no result from the node (unreachable or failed before diagnose_info))"]
    out = tmp_path / "x"
    with tarfile.open(str(path)) as tar:
        names = tar.getnames()
        tar.extractall(str(out))
    assert names[0] == "bundle/manifest.json" and "bundle/controller/preflight-report.json" in names
    assert "bundle/nodes/spark-1/container-inspect.json" in names
    manifest = json.loads((out / "bundle" / "manifest.json").read_text())
    assert manifest == result["manifest"] and manifest["controller"]["preflight_report"]["status"] == "ok"
    # The canary test's own search over the extracted bundle, and the bundle file itself.
    scan = _secrets.Finder([CANARY]).scan_tree([str(out), str(path)])
    assert scan["found"] == [] and scan["files"] == len(names) + 1
    assert not _leaks(json.dumps(result), CANARY)


def test_bundle_would_fail_the_leak_search_without_redaction(tmp_path):
    # Guards the test above: the same data with no secrets given still has the canary (the search can fail).
    result = make(diagnose_bundle.ActionModule, bundle_args(tmp_path, secrets=[])).run(task_vars={})
    out = tmp_path / "x"
    with tarfile.open(result["path"]) as tar:
        tar.extractall(str(out))
    found = _secrets.Finder([CANARY]).scan_tree([str(out)])["found"]
    assert {os.path.basename(f["path"]) for f in found} >= {"container-log.txt", "server.log.tail"}


def test_bundle_default_path_and_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(str(tmp_path))
    result = make(diagnose_bundle.ActionModule, bundle_args(tmp_path, path="")).run(task_vars={})
    assert os.path.dirname(result["path"]) == str(tmp_path)
    assert os.path.basename(result["path"]).startswith("sparkops-diagnose-") and result["path"].endswith("Z.tar.gz")
    (tmp_path / "d").mkdir()
    result = make(diagnose_bundle.ActionModule, bundle_args(tmp_path, path=str(tmp_path / "d"))).run(task_vars={})
    assert os.path.dirname(result["path"]) == str(tmp_path / "d")
    assert result["missing"][-1].startswith("controller: preflight_report (")
    with tarfile.open(result["path"]) as tar:
        root = tar.getnames()[0].split("/")[0]
    assert root == os.path.basename(result["path"])[:-len(".tar.gz")]


def test_bundle_and_preflight_report_in_the_report_dir(tmp_path, monkeypatch):
    """specdec_report_dir: the bundle's default name in it (created when missing), and the preflight report read from
    it under its default name (where playbooks/preflight.yml wrote it); a relative bundle path lands in it too."""
    monkeypatch.chdir(str(tmp_path))
    reports = tmp_path / "reports"
    args = bundle_args(tmp_path, path="", report_dir="reports")
    del args["preflight_report_path"]
    result = make(diagnose_bundle.ActionModule, args).run(task_vars={})
    assert os.path.dirname(result["path"]) == str(reports) and stat.S_IMODE(os.stat(result["path"]).st_mode) == 0o600
    item = result["manifest"]["controller"]["preflight_report"]
    assert item["status"] == "missing" and item["source"] == str(reports / "preflight-report.json")
    (reports / "preflight-report.json").write_text(json.dumps([{"id": "docker", "status": "pass"}]))
    args["path"] = "b.tar.gz"
    result = make(diagnose_bundle.ActionModule, args).run(task_vars={})
    assert result["path"] == str(reports / "b.tar.gz")
    assert result["manifest"]["controller"]["preflight_report"]["status"] == "ok"


def test_bundle_errors(tmp_path):
    with pytest.raises(AnsibleActionFail, match="diagnose_bundle_path .* does not exist"):
        make(diagnose_bundle.ActionModule, bundle_args(tmp_path, path=str(tmp_path / "no" / "b.tgz"))).run(task_vars={})
    with pytest.raises(AnsibleActionFail, match="nodes must be a list"):
        make(diagnose_bundle.ActionModule, bundle_args(tmp_path, nodes="spark-1")).run(task_vars={})
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------------- filter secret_find

def test_secret_find_filter_names_the_form_and_the_place():
    texts = dict(("text-%s" % name, content) for name, (content, _k) in planted(SPECIAL).items())
    texts["clean"] = "nothing"
    texts["data"] = {"nested": ["x", SPECIAL]}
    found = secret_find(texts, SPECIAL)
    got = dict((f["where"], f["kinds"]) for f in found)
    assert "clean" not in got and got["data"] == ["escaped"]  # searched as JSON: '"' and '\' escaped
    for name, (_content, kinds) in planted(SPECIAL).items():
        assert got["text-" + name] == kinds
    assert not _leaks(json.dumps(found), SPECIAL)
    assert secret_find(["a", "Bearer %s" % CANARY], [CANARY]) == [{"where": "1", "kinds": ["raw", "bearer"]}]


def test_secret_find_filter_errors():
    with pytest.raises(AnsibleFilterError, match="non-empty list"):
        secret_find({"a": "b"}, [])
    with pytest.raises(AnsibleFilterError, match="mapping"):
        secret_find("text", [CANARY])


def test_diagnose_bundle_reads_node_items_and_its_deprecated_name():
    got = {"os": {"status": "ok"}}
    out, errors = diagnose_bundle.node_items(["a", "b", "c"], {"a": {"node_items": got}, "b": {"items": got}, "c": {}})
    assert out == {"a": got, "b": got, "c": None}
    assert errors == {"c": "no result from the node (unreachable or failed before diagnose_info)"}
