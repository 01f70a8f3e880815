# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Engine vllm in the plan (issue 23): vllm serve argv, --speculative-config, methods, versions, key, Sparks."""

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _server
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan

TARGET = "org/target"
DRAFT = "org/draft"
COMMITS = {TARGET: "a" * 40, DRAFT: "b" * 40, "nvidia/Qwen3.6-35B-A3B-NVFP4": "c" * 40,
           "nvidia/Qwen3.8-27B-NVFP4": "d" * 40, "z-lab/Qwen3.8-27B-DFlash2": "e" * 40}
KEY = "0123456789abcdef0123456789abcdef"


def plan(settings=None, members=("spark-1",), version="0.32.0+cpu", commits=None):
    s = dict({"specdec_engine": "vllm", "trtllm_container_image": "vllm/vllm-openai:v0.28.0"}, **(settings or {}))
    topology = "two_sparks" if len(members) > 1 else "single_spark"
    dep = _plan.deployment_from_inventory(s, topology, list(members), members[0])
    return _plan.build_plan(dep, commits=COMMITS if commits is None else commits, vllm_version=version)


def draft_target(**extra):
    return dict({"specdec_server_method": "draft_target", "specdec_server_target_model": TARGET,
                 "specdec_server_draft_model": DRAFT, "specdec_server_max_draft_len": 4}, **extra)


def flag(argv, name):
    return argv[argv.index(name) + 1]


def spec_json(argv):
    return json.loads(flag(argv, "--speculative-config"))


def test_auto_preset_one_spark_is_nvidia_runbook_mtp_argv():
    built = plan()
    assert built["errors"] == []
    p = built["plan"]
    argv = p["argv"]
    assert argv[:3] == ["vllm", "serve", "nvidia/Qwen3.6-35B-A3B-NVFP4"]
    assert flag(argv, "--revision") == "c" * 40
    assert flag(argv, "--served-model-name") == "nvidia/Qwen3.6-35B-A3B-NVFP4"
    assert (flag(argv, "--tensor-parallel-size"), flag(argv, "--max-model-len"),
            flag(argv, "--gpu-memory-utilization")) == ("1", "262144", "0.4")
    assert spec_json(argv) == {"method": "mtp", "num_speculative_tokens": 3, "moe_backend": "triton"}
    assert p["max_draft_len"] == 3 and p["draft_model"] is None and p["config_text"] == ""
    assert [m["repo"] for m in p["models"]] == ["nvidia/Qwen3.6-35B-A3B-NVFP4"]
    assert p["rank_env"]["HF_HUB_OFFLINE"] == "1" and p["vllm_version"] == "0.32.0+cpu"
    assert "--nnodes" not in argv and p["worker_argv"] == {}


def test_speculative_config_from_settings_draft_model_revision_length_tp_memory_context():
    built = plan(draft_target(specdec_server_draft_tp_size=1, specdec_server_gpu_memory_utilization=0.55,
                              specdec_server_max_model_len=4096, specdec_server_preset="qwen3.6-35b-a3b-nvfp4-mtp-vllm"))
    assert built["errors"] == []
    argv = built["plan"]["argv"]
    assert spec_json(argv) == {"method": "draft_model", "model": DRAFT, "revision": "b" * 40,
                               "num_speculative_tokens": 4, "draft_tensor_parallel_size": 1}
    assert (flag(argv, "--max-model-len"), flag(argv, "--gpu-memory-utilization")) == ("4096", "0.55")
    assert flag(argv, "--revision") == "a" * 40
    assert [(m["role"], m["repo"], m["local_dir"]) for m in built["plan"]["models"]] == [
        ("target", TARGET, None), ("draft", DRAFT, None)]
    assert built["plan"]["launch"]["models"] == {TARGET: "a" * 40, DRAFT: "b" * 40}


@pytest.mark.parametrize("method,spelling,draft", [
    ("eagle3", "eagle3", True), ("draft_target", "draft_model", True), ("mtp", "mtp", False),
    ("ngram", "ngram", False), ("dflash", "dflash", True)])
def test_each_method_in_vllm_spelling(method, spelling, draft):
    built = plan(draft_target(specdec_server_method=method))
    assert built["errors"] == []
    spec = spec_json(built["plan"]["argv"])
    assert spec["method"] == spelling and spec["num_speculative_tokens"] == 4
    assert ("model" in spec) is draft and (spec.get("model") == DRAFT) is draft


def test_method_none_has_no_speculative_config():
    built = plan({"specdec_server_method": "none", "specdec_server_target_model": TARGET})
    assert built["errors"] == []
    assert "--speculative-config" not in built["plan"]["argv"] and built["plan"]["max_draft_len"] is None


def test_user_speculative_config_deep_merged_under_plan_keys():
    built = plan(draft_target(specdec_server_method="ngram", specdec_server_speculative_config={
        "prompt_lookup_max": 4, "prompt_lookup_min": 2, "rejection_sample_method": "standard"}))
    assert built["errors"] == []
    assert spec_json(built["plan"]["argv"]) == {"method": "ngram", "num_speculative_tokens": 4,
                                                "prompt_lookup_max": 4, "prompt_lookup_min": 2,
                                                "rejection_sample_method": "standard"}
    # A nested mapping (the draft's load config) is merged as given.
    built = plan(draft_target(specdec_server_speculative_config={"draft_load_config": {"load_format": "auto"}}))
    assert built["errors"] == []
    assert spec_json(built["plan"]["argv"])["draft_load_config"] == {"load_format": "auto"}


def test_presets_extra_key_stays_beside_the_users_with_the_presets_target():
    built = plan({"specdec_server_method": "ngram", "specdec_server_speculative_config": {"prompt_lookup_max": 4}})
    assert built["errors"] == []
    assert spec_json(built["plan"]["argv"]) == {"method": "ngram", "num_speculative_tokens": 3, "moe_backend": "triton",
                                                "prompt_lookup_max": 4}


def test_another_target_gets_none_of_the_presets_model_recipe():
    # The auto preset's flags (--reasoning-parser qwen3, --kv-cache-dtype fp8, ...) and speculative_config keys are
    # its runbook's recipe for nvidia/Qwen3.6-35B-A3B-NVFP4; another target starts from vllm serve's defaults.
    preset = plan()["plan"]["argv"]
    assert "--reasoning-parser" in preset and "--kv-cache-dtype" in preset
    built = plan(draft_target(specdec_server_extra_args=["--dtype", "bfloat16"]))
    assert built["errors"] == []
    argv = built["plan"]["argv"]
    tail = argv[argv.index("--speculative-config") + 2:]
    assert tail == ["--dtype", "bfloat16"]
    assert "moe_backend" not in spec_json(argv)


def test_user_speculative_config_replaces_a_presets_key():
    built = plan({"specdec_server_speculative_config": {"moe_backend": "marlin"}})
    assert spec_json(built["plan"]["argv"])["moe_backend"] == "marlin"


@pytest.mark.parametrize("key,owner", [
    ("num_speculative_tokens", "specdec_server_max_draft_len"), ("model", "specdec_server_draft_model"),
    ("method", "specdec_server_method"), ("revision", "specdec_server_draft_revision"),
    ("draft_tensor_parallel_size", "specdec_server_draft_tp_size")])
def test_plan_key_in_user_json_is_one_line_naming_both(key, owner):
    errors = plan(draft_target(specdec_server_speculative_config={key: 3}))["errors"]
    assert errors == ["specdec_server_speculative_config.%s and %s both set %s; keep %s and remove the key."
                      % (key, owner, key, owner)]


def test_model_specific_mtp_spelling_replaces_mtp():
    built = plan(draft_target(specdec_server_method="mtp",
                              specdec_server_speculative_config={"method": "qwen3_next_mtp"}))
    assert built["errors"] == [] and spec_json(built["plan"]["argv"])["method"] == "qwen3_next_mtp"


@pytest.mark.parametrize("extra,owner", [
    (["--spec-tokens", "5"], "specdec_server_max_draft_len"), (["--spec-method=ngram"], "specdec_server_method"),
    (["--spec_model", "x/y"], "specdec_server_draft_model")])
def test_flat_spec_flag_is_one_line_naming_both(extra, owner):
    errors = plan(draft_target(specdec_server_extra_args=extra))["errors"]
    assert len(errors) == 1 and owner in errors[0] and "--spec-" in errors[0] and "\n" not in errors[0]


@pytest.mark.parametrize("extra,words", [
    (["--max-model-len", "8192"], "specdec_server_max_model_len"),
    (["--speculative-config.method", "ngram"], "specdec_server_speculative_config"),
    (["--api-key", "k"], "VLLM_API_KEY"), (["-tp", "2"], "specdec_server_tp_size"),
    (["-sc", "{}"], "specdec_server_speculative_config"), (["-r", "1"], "-r is set by the plan"),
    (["--enforce-eager", "--enforce-eager"], "given twice")])
def test_owned_or_duplicate_flag_is_refused(extra, words):
    errors = plan(draft_target(specdec_server_extra_args=extra))["errors"]
    assert len(errors) == 1 and words in errors[0]


def test_user_flag_replaces_the_presets():
    argv = plan({"specdec_server_extra_args": ["--max-num-seqs", "2", "--kv-cache-dtype=auto"]})["plan"]["argv"]
    assert argv.count("--max-num-seqs") == 1 and flag(argv, "--max-num-seqs") == "2"
    assert "--kv-cache-dtype" not in argv and argv[-1] == "--kv-cache-dtype=auto"
    assert "fp8" not in argv


@pytest.mark.parametrize("method,version,ok", [
    ("dflash", "0.18.1", False), ("dflash", "0.19.0", True), ("draft_target", "0.13.0", False),
    ("draft_target", "0.20.1", True), ("eagle3", "0.12.0", False), ("ngram", "0.32.0+cpu", True)])
def test_method_against_the_images_vllm_version(method, version, ok):
    errors = plan(draft_target(specdec_server_method=method), version=version)["errors"]
    assert (errors == []) is ok
    if not ok:
        assert errors[0].startswith("specdec_server_method: %s (vLLM method %s) is not known to vLLM %s"
                                    % (method, _plan.VLLM_METHOD[method], version))


def test_unreadable_version_is_refused():
    errors = plan(version="")["errors"]
    assert errors and errors[0].startswith("trtllm_container_image: cannot read the vLLM version")


def test_api_key_exported_from_its_file_never_in_argv_state_or_script():
    built = plan({"specdec_api_key": KEY})
    p = built["plan"]
    assert built["errors"] == []
    key_file = "/var/lib/sparkops/specdec/api-key"
    assert p["api_key"]["file"] == key_file and p["launch"]["secret_env"] == {"VLLM_API_KEY": key_file}
    assert KEY not in json.dumps(p) and "--api-key" not in p["argv"]
    state = _plan.new_state(p, {}, "2026-11-27T00:00:00+00:00")
    assert KEY not in json.dumps(state)
    script = _server.render_script(p["launch"], "/var/lib/sparkops/specdec", "trtllm-multinode",
                                   "/var/lib/sparkops/specdec/deployments/spark-1.json")
    assert KEY not in script
    assert '    VLLM_API_KEY="$(cat /var/lib/sparkops/specdec/api-key)"; export VLLM_API_KEY\n' in script
    # exported before the server starts, and vllm serve is started directly (no mpirun)
    assert script.index("export VLLM_API_KEY") < script.index("nohup setsid vllm serve")
    assert "mpirun" not in script.split("forward=(")[1].split("echo $!")[0]


def test_no_key_no_secret_env():
    p = plan()["plan"]
    assert "secret_env" not in p["launch"] and p["api_key"] is None


def test_two_sparks_head_and_headless_worker_argv():
    built = plan(members=("spark-1", "spark-2"))
    p = built["plan"]
    head, worker = p["argv"], p["worker_argv"]["spark-2"]
    assert list(p["worker_argv"]) == ["spark-2"]
    assert head[head.index("--nnodes"):head.index("--nnodes") + 8] == [
        "--nnodes", "2", "--node-rank", "0", "--master-addr", "192.168.100.10", "--master-port", "29501"]
    assert "--headless" not in head
    assert worker[worker.index("--nnodes"):worker.index("--nnodes") + 9] == [
        "--nnodes", "2", "--node-rank", "1", "--master-addr", "192.168.100.10", "--master-port", "29501", "--headless"]
    assert flag(head, "--tensor-parallel-size") == "2"
    assert spec_json(head) == {"method": "dflash", "model": "z-lab/Qwen3.8-27B-DFlash2", "revision": "e" * 40,
                               "num_speculative_tokens": 8, "draft_tensor_parallel_size": 2}
    assert p["launch"]["worker_argv"] == p["worker_argv"]
    # Deployed (issue 23 item 2): no refusal; tp_size x pp_size = 2 nodes x 1 GPU.
    assert built["errors"] == []


def test_two_sparks_worker_launch_is_its_own_server_sh():
    p = plan({"specdec_api_key": KEY}, members=("spark-1", "spark-2"))["plan"]
    wl = p["worker_launch"]
    assert list(wl) == ["spark-2"]
    w = wl["spark-2"]
    assert w["argv"] == p["worker_argv"]["spark-2"] and w["node_rank"] == 1
    assert w["rendezvous"] == "tcp://192.168.100.10:29501"
    # The head's env (HF_HUB_OFFLINE ...), no key: a headless worker serves no HTTP.
    assert w["env"] == p["launch"]["env"] and "secret_env" not in w and "api_key" not in w
    assert w["members"] == ["spark-1", "spark-2"] and w["engine"] == "vllm"
    # worker_launch is not in the fingerprint; the workers' argv is (launch.worker_argv).
    assert "worker_launch" not in p["launch"]
    script = _server.render_script(w, "/var/lib/sparkops/specdec", "trtllm-multinode",
                                   "/var/lib/sparkops/specdec/deployments/spark-1.json")
    assert "nohup setsid vllm serve " in script and " --headless " in script and "mpirun" not in script.split(
        "forward=(")[1].split("echo $!")[0] and KEY not in script and "VLLM_API_KEY" not in script
    # One Spark: no worker.
    assert plan()["plan"]["worker_launch"] == {}


def test_master_addr_follows_the_fabric_settings():
    p = plan({"netplan_qsfp_addresses": ["10.9.0.1/24", "10.9.1.1/24"], "specdec_server_master_port": 29600},
             members=("spark-1", "spark-2"))["plan"]
    assert flag(p["argv"], "--master-addr") == "10.9.0.1" and flag(p["argv"], "--master-port") == "29600"


@pytest.mark.parametrize("settings,members", [
    ({"specdec_server_tp_size": 1}, ("spark-1", "spark-2")),
    ({"specdec_server_tp_size": 2}, ("spark-1",)),
    ({"specdec_server_tp_size": 1, "specdec_server_pp_size": 2}, ("spark-1",))])
def test_tp_times_pp_must_be_the_nodes(settings, members):
    errors = plan(settings, members=members)["errors"]
    line = [e for e in errors if e.startswith("specdec_server_tp_size:")]
    assert len(line) == 1 and "node(s) x 1 GPU" in line[0]


def test_tp_one_pp_two_on_two_sparks_is_accepted():
    built = plan({"specdec_server_tp_size": 1, "specdec_server_pp_size": 2, "specdec_server_draft_tp_size": 1},
                 members=("spark-1", "spark-2"))
    assert not [e for e in built["errors"] if e.startswith("specdec_server_tp_size")]
    assert flag(built["plan"]["argv"], "--pipeline-parallel-size") == "2"


def test_fabric_env_of_vllm_is_nccl_and_gloo():
    from ansible_collections.sparkops.specdec.plugins.module_utils import _layout
    hosts = ["192.168.100.10", "192.168.100.11"]
    assert _layout.fabric_env("direct", ["enp1s0f1np1", "enP2p1s0f1np1"], ["rocep1s0f1"], hosts,
                              engine="vllm")["env"] == {
        "NCCL_SOCKET_IFNAME": "enp1s0f1np1,enP2p1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1,enP2p1s0f1np1",
        "NCCL_IB_HCA": "rocep1s0f1"}
    ring = _layout.fabric_env("ring", _layout.RING_NETDEVS, (), hosts + ["192.168.100.12"], engine="vllm")["env"]
    assert ring["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1" and not [k for k in ring if k.startswith(("UCX_", "OMPI_"))]
    trt = _layout.fabric_env("direct", ["enp1s0f1np1"], (), hosts)["env"]
    assert "GLOO_SOCKET_IFNAME" not in trt and trt["UCX_NET_DEVICES"] == "enp1s0f1np1"


@pytest.mark.parametrize("settings,name", [
    ({"specdec_server_llm_api_options": {"a": 1}}, "specdec_server_llm_api_options"),
    ({"specdec_server_ctx_size": 4096}, "specdec_server_ctx_size"),
    ({"specdec_server_kv_cache_free_gpu_memory_fraction": 0.5}, "specdec_server_kv_cache_free_gpu_memory_fraction")])
def test_other_engines_settings_refused_with_vllm(settings, name):
    errors = plan(settings)["errors"]
    assert [e.split(":")[0] for e in errors] == [name]


@pytest.mark.parametrize("engine", ["trtllm", "llamacpp"])
def test_vllm_settings_refused_with_other_engines(engine):
    dep = _plan.deployment_from_inventory({"specdec_engine": engine, "specdec_server_max_model_len": 4096},
                                          "single_spark", ["spark-1"], "spark-1")
    errors = _plan.build_plan(dep)["errors"]
    assert "specdec_server_max_model_len: only engine vllm reads it; remove it for engine %s, or set " \
           "specdec_engine: vllm." % engine in errors


@pytest.mark.parametrize("method", ["mtp", "ngram", "dflash"])
def test_trtllm_refuses_vllm_only_methods(method):
    dep = _plan.deployment_from_inventory({"specdec_server_method": method}, "single_spark", ["spark-1"], "spark-1")
    errors = _plan.build_plan(dep)["errors"]
    assert any(e.startswith("specdec_server_method: %s is not available with engine trtllm" % method) for e in errors)


def test_switch_cluster_master_addr_is_the_heads_switch_address():
    # Issue 24: four Sparks through a switch (NVIDIA's plan: node N gets 192.168.100.N): --nnodes 4, the head's
    # address on the switch's first subnet, one headless worker per other node with its rank.
    members = ("spark-1", "spark-2", "spark-3", "spark-4")
    built = plan({"specdec_layout": "switch", "specdec_server_tp_size": 4}, members=members)
    p = built["plan"]
    head = p["argv"]
    assert head[head.index("--nnodes"):head.index("--nnodes") + 6] == [
        "--nnodes", "4", "--node-rank", "0", "--master-addr", "192.168.100.1"]
    assert sorted(p["worker_argv"]) == ["spark-2", "spark-3", "spark-4"]
    assert [flag(p["worker_argv"][h], "--node-rank") for h in members[1:]] == ["1", "2", "3"]
    assert {flag(a, "--master-addr") for a in p["worker_argv"].values()} == {"192.168.100.1"}
    assert p["layout"] == "switch" and flag(head, "--tensor-parallel-size") == "4"
