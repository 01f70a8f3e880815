"""sparkops lab STAND-IN for TensorRT-LLM's ``trtllm-serve`` (NOT TensorRT-LLM).

This module backs the ``trtllm-serve`` and ``trtllm-llmapi-launch`` stand-in
scripts of the sparkops.specdec test lab image.  It does not load or run any
model and it never reports a speed, latency or acceptance figure.  What it does
is behave like the command line and HTTP surface of ``trtllm-serve`` from one
TensorRT-LLM release closely enough that the collection's roles can be tested
end to end without a GPU.

Which release it stands in for is chosen when the image is built: the lab image
sets ``ENV TRT_LLM_VERSION=<version>`` like the real release image does (its
Dockerfile.multi release stage), and this module reads that variable.  Supported:
``1.3.0rc12`` (the default when the variable is unset, e.g. in unit tests) and
``1.4.0rc1``; the differences are in the VERSION_PROFILES table below.  Any other
value makes trtllm-serve exit 1.  In both versions:

* the click command line of ``tensorrt_llm/commands/serve.py`` (same option
  names and aliases; unknown options are usage errors, exit status 2);
* strict validation of the ``--extra_llm_api_options``/``--config`` YAML for the
  subset of ``TorchLlmArgs`` used by the DGX Spark runbooks, with pydantic-like
  messages such as ``speculative_config.max_draf_len: Extra inputs are not
  permitted``.  The YAML is applied over the command line as trtllm-serve does
  (shallow merge: a YAML ``kv_cache_config`` replaces the command-line one);
* the target model must already be on disk (a local directory with
  ``config.json`` or an HF repo id in the HF hub cache); nothing is downloaded;
* multi-node: under ``mpirun`` every rank checks its own view (models present,
  identical configuration) and the world size must equal tp_size x pp_size.
  Rank 0 serves HTTP, the other ranks idle until rank 0 shuts down;
* readiness: the socket is bound at start but NOT listening during the
  simulated load (``SPARKOPS_STANDIN_LOAD_SECONDS``, default 1), so ``/health``
  gets *connection refused* until the server is up, then ``200``.  The readiness
  log lines of the real server are printed ("Application startup complete.",
  "Uvicorn running on ...").
* ``return_perf_metrics: true`` in the YAML adds ``GET /prometheus/metrics``
  (404 otherwise, as in trtllm-serve).  It serves one info gauge,
  ``sparkops_lab_standin_info``, that names the stand-in, the version and the
  validated speculative configuration; none of the real server's counters or
  gauges (``trtllm_*``) is emitted, so nothing can compute a speed or an
  acceptance rate from a stand-in.
* tool calls (``tools``, ``tool_choice`` of ``/v1/chat/completions``) on a gpt-oss
  target (``model_type: gpt_oss`` in its ``config.json``, the Harmony format that
  trtllm-serve parses without ``--tool_parser``): the request's tools are validated
  and the first tool (or the named one) is "called" with arguments made from its
  JSON schema (strings: the prompt's first capitalised word inside a sentence) -- not a model's
  decision.  Other targets answer in text, as trtllm-serve does without a tool
  parser.  ``SPARKOPS_STANDIN_FAULTS=drop_tool_calls_with_speculation`` reproduces
  NVIDIA/TensorRT-LLM#16377 (gpt-oss + Eagle3: empty ``tool_calls`` and
  ``content``, ``reasoning_content`` set; fine with speculation off).  Unknown
  fault names make trtllm-serve exit 1.
* runtime faults (lab tests of the supervisor): the file ``SPARKOPS_STANDIN_FAULT_FILE``
  (default ``/tmp/sparkops-standin-faults`` in the container), read at start and at
  each request, one fault a line, ``NAME`` (every server process) or ``NAME PID``
  (only the process, or process group, PID -- e.g. the pid in ``server.pid``):
  ``wedge_completions`` keeps ``/health`` at 200 but answers no completion (the
  request hangs, as an engine whose scheduler stopped does: NVIDIA's "Keeping vLLM
  Up" DGX Spark playbook); ``unauthorized`` answers completions with 401 (a key the
  server does not accept); ``crash_on_start`` exits 1 before serving (a
  configuration that kills the engine at every start).  Unknown names are ignored
  with a warning on stderr (the file is the lab's, not the server's configuration).

Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 for configuration or
environment errors, 2 for command-line usage errors.

Runtime: Debian bookworm ``python3`` with ``python3-yaml``; ``python3-mpi4py`` and
``openmpi-bin`` for multi-rank runs.  No third-party pip packages.
"""

import difflib
import hashlib
import json
import os
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:  # python3-yaml
    import yaml
except ImportError:  # pragma: no cover - reported at run time
    yaml = None

# The image's TensorRT-LLM version: the variable the real release image sets.
VERSION_ENV = "TRT_LLM_VERSION"
# The version baked into the image at build time. Like the real image's installed tensorrt_llm
# package it holds whatever the environment says: MPI ranks started over ssh (the peer's ranks)
# do not inherit the container's ENV.
VERSION_FILE = "/usr/local/lib/sparkops-standin/trtllm-version"
DEFAULT_TRTLLM_VERSION = "1.3.0rc12"
SUPPORTED_VERSIONS = ("1.3.0rc12", "1.4.0rc1")  # keys of VERSION_PROFILES, below
OWNER = "sparkops-lab-standin"
FINGERPRINT = "sparkops-lab-standin"


def _image_version():
    """(version, error): the TensorRT-LLM version this process stands in for."""
    raw = ""
    try:
        with open(VERSION_FILE, encoding="utf-8") as handle:
            raw = handle.read().strip()
    except OSError:
        raw = os.environ.get(VERSION_ENV, "").strip()
    if not raw:
        return DEFAULT_TRTLLM_VERSION, None
    if raw not in SUPPORTED_VERSIONS:
        return raw, (f"{VERSION_ENV}={raw!r}: the sparkops lab stand-in models only "
                     f"TensorRT-LLM {', '.join(SUPPORTED_VERSIONS)}; rebuild the stand-in "
                     "image with one of those (tests/lab/build-images.sh)")
    return raw, None


IMAGE_TRTLLM_VERSION, VERSION_ERROR = _image_version()
STANDIN_VERSION = IMAGE_TRTLLM_VERSION + "-sparkops-lab-standin"


def banner(version=None):
    version = version or IMAGE_TRTLLM_VERSION
    return (f"[sparkops-lab] THIS IS A STAND-IN FOR trtllm-serve of TensorRT-LLM {version}, "
            "NOT TensorRT-LLM: no model is loaded or run")


BANNER = banner()
# Sent with every HTTP answer.
STANDIN_HEADER = "x-sparkops-lab-standin"
TAG = "[sparkops-lab]"
LOAD_SECONDS_ENV = "SPARKOPS_STANDIN_LOAD_SECONDS"
PROG = "trtllm-serve"

# MPI tags for rank 0 -> worker messages.
_TAG_SHUTDOWN = 7301


class UsageError(Exception):
    """A click-style usage error (exit status 2)."""

    def __init__(self, message, command="serve"):
        super().__init__(message)
        self.message = message
        self.command = command


class StandinError(Exception):
    """A configuration or environment error (exit status 1)."""


def _out(line=""):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _err(line=""):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------------
# Command line (mirrors the click command `serve` of TensorRT-LLM)
# ---------------------------------------------------------------------------

class Opt:
    def __init__(self, names, dest, kind, default=None, choices=None,
                 aliases=None, metavar=None, help=""):
        self.names = names
        self.dest = dest
        self.kind = kind  # int | float | str | flag | choice
        self.default = default
        self.choices = choices
        self.aliases = aliases or {}
        self.metavar = metavar
        self.help = help


LOG_LEVELS = ["internal_error", "error", "warning", "info", "verbose", "debug",
              "trace"]

SERVE_OPTIONS = [
    Opt(["--tokenizer"], "tokenizer", "str", help="Path | Name of the tokenizer."),
    Opt(["--host"], "host", "str", "localhost", help="Hostname of the server."),
    Opt(["--port"], "port", "int", 8000, help="Port of the server."),
    Opt(["--backend"], "backend", "choice", "pytorch",
        choices=["pytorch", "tensorrt", "_autodeploy"], aliases={"trt": "tensorrt"},
        help="The backend to use to serve the model. Default is pytorch backend."),
    Opt(["--log_level"], "log_level", "choice", "info", choices=LOG_LEVELS,
        help="The logging level."),
    Opt(["--max_beam_width"], "max_beam_width", "int", 1,
        help="Maximum number of beams for beam search decoding."),
    Opt(["--max_batch_size"], "max_batch_size", "int", 2048,
        help="Maximum number of requests that the engine can schedule."),
    Opt(["--max_num_tokens"], "max_num_tokens", "int", 8192,
        help="Maximum number of batched input tokens after padding is removed in each batch."),
    Opt(["--max_seq_len"], "max_seq_len", "int", None,
        help="Maximum total length of one request, including prompt and outputs."),
    Opt(["--tensor_parallel_size", "--tp_size"], "tensor_parallel_size", "int", 1,
        help="Tensor parallelism size."),
    Opt(["--pipeline_parallel_size", "--pp_size"], "pipeline_parallel_size", "int", 1,
        help="Pipeline parallelism size."),
    Opt(["--moe_expert_parallel_size", "--ep_size"], "moe_expert_parallel_size", "int",
        None, help="expert parallelism size"),
    Opt(["--gpus_per_node"], "gpus_per_node", "int", None,
        help="Number of GPUs per node (the stand-in ignores it)."),
    Opt(["--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction"],
        "free_gpu_memory_fraction", "float", 0.9,
        help="Free GPU memory fraction reserved for KV Cache."),
    Opt(["--num_postprocess_workers"], "num_postprocess_workers", "int", 0,
        help="Number of workers to postprocess raw responses."),
    Opt(["--trust_remote_code"], "trust_remote_code", "flag", False,
        help="Flag for HF transformers."),
    Opt(["--revision"], "revision", "str",
        help="The revision to use for the HuggingFace model (branch name, tag name, or commit id)."),
    Opt(["--config", "--extra_llm_api_options"], "extra_llm_api_options", "str",
        help="Path to a YAML file that overwrites the parameters specified by trtllm-serve."),
    Opt(["--reasoning_parser"], "reasoning_parser", "str",
        help="Specify the parser for reasoning models (not checked by the stand-in)."),
    Opt(["--tool_parser"], "tool_parser", "str",
        help="Specify the parser for tool models (not checked by the stand-in)."),
    Opt(["--chat_template"], "chat_template", "str",
        help="Specify a custom chat template (accepted, not used by the stand-in)."),
    Opt(["--enable_chunked_prefill"], "enable_chunked_prefill", "flag", False,
        help="Enable chunked prefill"),
]

# Options of the real command that the stand-in deliberately does not model.
NOT_MODELLED_OPTIONS = [
    "--custom_tokenizer", "--custom_module_dirs", "--context_parallel_size",
    "--cp_size", "--moe_cluster_parallel_size", "--cluster_size",
    "--metadata_server_config_file", "--server_role",
    "--fail_fast_on_attention_window_too_large", "--otlp_traces_endpoint",
    "--disagg_cluster_uri", "--media_io_kwargs",
]
NOT_MODELLED_COMMANDS = ["grpc", "disaggregated", "disaggregated_mpi_worker",
                         "mm_embedding_serve"]

_OPT_BY_NAME = {name: o for o in SERVE_OPTIONS for name in o.names}


def _usage_text(command="serve"):
    if command is None:
        return (f"Usage: {PROG} [OPTIONS] COMMAND [ARGS]...\n"
                f"Try '{PROG} --help' for help.\n")
    return (f"Usage: {PROG} {command} [OPTIONS] MODEL\n"
            f"Try '{PROG} {command} --help' for help.\n")


def serve_help():
    lines = [f"Usage: {PROG} serve [OPTIONS] MODEL", "",
             "  Running an OpenAI API compatible server", "",
             "  MODEL: model name | HF checkpoint path | TensorRT engine path", "",
             "  " + BANNER, "",
             "Options:"]
    for o in SERVE_OPTIONS:
        names = ", ".join(o.names)
        if o.kind == "int":
            names += " INTEGER"
        elif o.kind == "float":
            names += " FLOAT"
        elif o.kind == "str":
            names += " TEXT"
        elif o.kind == "choice":
            names += " [" + "|".join(o.choices) + "]"
        extra = ""
        if o.default not in (None, False):
            extra = f"  [default: {o.default}]"
        lines.append(f"  {names}")
        lines.append(f"      {o.help}{extra}")
    lines.append("  --help  Show this message and exit.")
    return "\n".join(lines) + "\n"


def group_help():
    return (f"Usage: {PROG} [OPTIONS] COMMAND [ARGS]...\n\n"
            f"  {BANNER}\n\n"
            "Options:\n  --help  Show this message and exit.\n\n"
            "Commands:\n  serve  Running an OpenAI API compatible server "
            "(default command: `trtllm-serve MODEL ...` means `serve`)\n")


def _convert(opt, raw):
    name = opt.names[0]
    if opt.kind == "int":
        try:
            return int(raw.strip(), 10)
        except ValueError:
            raise UsageError(f"Invalid value for '{name}': '{raw}' is not a valid integer.")
    if opt.kind == "float":
        try:
            return float(raw.strip())
        except ValueError:
            raise UsageError(f"Invalid value for '{name}': '{raw}' is not a valid float.")
    if opt.kind == "choice":
        value = opt.aliases.get(raw, raw)
        if value not in opt.choices:
            choices = ", ".join(f"'{c}'" for c in opt.choices)
            raise UsageError(f"Invalid value for '{name}': '{raw}' is not one of {choices}.")
        return value
    return raw


def parse_serve_args(argv):
    """Parse `trtllm-serve [serve] MODEL [OPTIONS]` like click does.

    Returns (model, options dict with defaults applied, set of dests given on
    the command line).  Raises UsageError, or SystemExit(0) after --help.
    """
    argv = list(argv)
    if not argv:
        raise UsageError("Missing command.", command=None)
    if argv[0] == "--help":
        sys.stdout.write(group_help())
        raise SystemExit(0)
    if argv[0] in NOT_MODELLED_COMMANDS:
        raise UsageError(f"The '{argv[0]}' command of trtllm-serve is not modelled by "
                         "the sparkops lab stand-in (only `serve`).", command=None)
    if argv[0] == "serve":
        argv = argv[1:]

    values = {}
    given = set()
    positionals = []
    i = 0
    only_positional = False
    while i < len(argv):
        tok = argv[i]
        i += 1
        if only_positional or not tok.startswith("-") or tok == "-":
            positionals.append(tok)
            continue
        if tok == "--":
            only_positional = True
            continue
        if tok == "--help":
            sys.stdout.write(serve_help())
            raise SystemExit(0)
        name, eq, inline = tok.partition("=")
        opt = _OPT_BY_NAME.get(name)
        if opt is None:
            if name in NOT_MODELLED_OPTIONS:
                raise UsageError(f"Option '{name}' is not modelled by the sparkops lab "
                                 "stand-in (it may exist in the real trtllm-serve).")
            msg = f"No such option: {name}"
            close = difflib.get_close_matches(name, list(_OPT_BY_NAME), n=3, cutoff=0.7)
            if len(close) == 1:
                msg += f" Did you mean {close[0]}?"
            elif close:
                msg += " (Possible options: " + ", ".join(sorted(close)) + ")"
            raise UsageError(msg)
        if opt.kind == "flag":
            if eq:
                raise UsageError(f"Option '{name}' does not take a value.")
            values[opt.dest] = True
        else:
            if eq:
                raw = inline
            else:
                if i >= len(argv):
                    raise UsageError(f"Option '{name}' requires an argument.")
                raw = argv[i]
                i += 1
            values[opt.dest] = _convert(opt, raw)
        given.add(opt.dest)

    if not positionals:
        raise UsageError("Missing argument 'MODEL'.")
    if len(positionals) > 1:
        extra = " ".join(positionals[1:])
        word = "argument" if len(positionals) == 2 else "arguments"
        raise UsageError(f"Got unexpected extra {word} ({extra})")
    opts = {o.dest: o.default for o in SERVE_OPTIONS}
    opts.update(values)
    return positionals[0], opts, given


# ---------------------------------------------------------------------------
# Extra LLM API options YAML (strict, pydantic-like)
# ---------------------------------------------------------------------------

class _V:
    """Collects pydantic-like validation errors."""

    def __init__(self):
        self.errors = []

    def add(self, loc, msg, etype, value=None, has_value=True):
        path = ".".join(str(p) for p in loc) if loc else "(root)"
        detail = f"[type={etype}"
        if has_value:
            r = repr(value)
            if len(r) > 60:
                r = r[:57] + "..."
            detail += f", input_value={r}, input_type={type(value).__name__}"
        detail += "]"
        self.errors.append(f"{path}: {msg} {detail}")


_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


def _c_int(v, loc, val):
    """pydantic v2 lax int."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if v.is_integer():
            return int(v)
        val.add(loc, "Input should be a valid integer, got a number with a fractional part",
                "int_from_float", v)
        return None
    if isinstance(v, str):
        try:
            return int(v.strip(), 10)
        except ValueError:
            val.add(loc, "Input should be a valid integer, unable to parse string as an integer",
                    "int_parsing", v)
            return None
    val.add(loc, "Input should be a valid integer", "int_type", v)
    return None


def _c_float(v, loc, val):
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            val.add(loc, "Input should be a valid number, unable to parse string as a number",
                    "float_parsing", v)
            return None
    val.add(loc, "Input should be a valid number", "float_type", v)
    return None


def _c_bool(v, loc, val):
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    if isinstance(v, (int, float, str)):
        val.add(loc, "Input should be a valid boolean, unable to interpret input",
                "bool_parsing", v)
    else:
        val.add(loc, "Input should be a valid boolean", "bool_type", v)
    return None


def _c_str(v, loc, val):
    if isinstance(v, str):
        return v
    val.add(loc, "Input should be a valid string", "string_type", v)
    return None


class ListOf:
    def __init__(self, item):
        self.item = item


class Model:
    def __init__(self, name, fields):
        self.name = name
        self.fields = fields  # key -> (type, optional)


INT, FLOAT, BOOL, STR = "int", "float", "bool", "str"
_SCALARS = {INT: _c_int, FLOAT: _c_float, BOOL: _c_bool, STR: _c_str}


def _check(spec, v, loc, val):
    optional = False
    if isinstance(spec, tuple):
        spec, optional = spec
    if v is None:
        if optional:
            return None
        if spec in _SCALARS:
            name = {INT: "integer", FLOAT: "number", BOOL: "boolean", STR: "string"}[spec]
            val.add(loc, f"Input should be a valid {name}", f"{spec}_type".replace("str_", "string_"), v)
        elif isinstance(spec, ListOf):
            val.add(loc, "Input should be a valid list", "list_type", v)
        else:
            val.add(loc, f"Input should be a valid dictionary or instance of {spec.name}",
                    "model_type", v)
        return None
    if spec in _SCALARS:
        return _SCALARS[spec](v, loc, val)
    if isinstance(spec, ListOf):
        if not isinstance(v, (list, tuple)):
            val.add(loc, "Input should be a valid list", "list_type", v)
            return None
        return [_check(spec.item, x, loc + [i], val) for i, x in enumerate(v)]
    if isinstance(spec, Model):
        if not isinstance(v, dict):
            val.add(loc, f"Input should be a valid dictionary or instance of {spec.name}",
                    "model_type", v)
            return None
        out = {}
        for key, item in v.items():
            if key not in spec.fields:
                val.add(loc + [key], "Extra inputs are not permitted", "extra_forbidden", item)
                continue
            out[key] = _check(spec.fields[key], item, loc + [key], val)
        return out
    raise AssertionError(spec)  # pragma: no cover


def _opt(t):
    return (t, True)


KV_CACHE_CONFIG = Model("KvCacheConfig", {
    "free_gpu_memory_fraction": _opt(FLOAT),
    "enable_block_reuse": BOOL,
    "dtype": STR,
    "max_tokens": _opt(INT),
})
CUDA_GRAPH_CONFIG = Model("CudaGraphConfig", {
    "max_batch_size": INT,
    "batch_sizes": _opt(ListOf(INT)),
    "enable_padding": BOOL,
})
MOE_CONFIG = Model("MoeConfig", {"backend": STR})

# ---------------------------------------------------------------------------
# Per-version schema: the subset of TorchLlmArgs each stand-in version knows
# ---------------------------------------------------------------------------

# Top-level TorchLlmArgs keys, the same in both modelled versions.
_TOP_LEVEL_FIELDS = {
    "enable_attention_dp": BOOL,
    "disable_overlap_scheduler": BOOL,
    "enable_autotuner": BOOL,
    "enable_chunked_prefill": BOOL,
    "print_iter_log": BOOL,
    "enable_iter_perf_stats": BOOL,
    # BaseLlmArgs.return_perf_metrics: bool = False ("Return perf metrics.", status
    # prototype) since 1.0, tensorrt_llm/llmapi/llm_args.py.  trtllm-serve serves
    # /prometheus/metrics only when it is true (reference notes trtllm-versions-bench.md
    # section 2.2); the stand-in serves an honest info gauge there (see Handler).
    "return_perf_metrics": BOOL,
    "stream_interval": INT,
    "num_postprocess_workers": INT,
    "trust_remote_code": BOOL,
    "max_batch_size": _opt(INT),
    "max_num_tokens": _opt(INT),
    "max_seq_len": _opt(INT),
    "max_beam_width": _opt(INT),
    "tensor_parallel_size": INT,
    "pipeline_parallel_size": INT,
    "moe_expert_parallel_size": _opt(INT),
    "gpus_per_node": _opt(INT),
    "moe_config": _opt(MOE_CONFIG),
    "cuda_graph_config": _opt(CUDA_GRAPH_CONFIG),
    "kv_cache_config": _opt(KV_CACHE_CONFIG),
    "speculative_config": None,  # validated by _check_speculative
}


class VersionProfile:
    """What one TensorRT-LLM release accepts in --extra_llm_api_options (modelled subset)."""

    def __init__(self, version, spec_configs, draft_keys, needs_draft, backends,
                 not_modelled, union, respelled=None, deprecated=None, extra_hints=None,
                 draft_hub_ids=False):
        self.version = version
        self.top_level = Model("TorchLlmArgs", dict(_TOP_LEVEL_FIELDS))
        self.spec_configs = spec_configs        # decoding_type -> Model
        self.draft_keys = draft_keys            # (field name, aliases...) of the draft
        self.draft_field = draft_keys[0]
        self.needs_draft = needs_draft          # decoding types that need a draft model
        self.backends = backends                # decoding_type -> backends (supports_backend)
        self.not_modelled = not_modelled        # real decoding types the stand-in lacks
        self.union = union                      # pydantic discriminated union on decoding_type
        self.respelled = respelled or {}        # rejected spelling -> hint naming the right one
        self.deprecated = deprecated or {}      # accepted spelling -> deprecation warning
        self.extra_hints = extra_hints or {}    # unknown speculative_config key -> hint
        self.draft_hub_ids = draft_hub_ids      # draft may be an HF repo id (#10099)


def _spec_models(base, eagle_types, draft_target, ngram="NGram"):
    eagle = dict(base, eagle3_one_model=BOOL)
    out = {t: Model(cls, dict(eagle)) for t, cls in eagle_types}
    out[draft_target] = Model("DraftTargetDecodingConfig", dict(base))
    out[ngram] = Model("NGramDecodingConfig", dict(
        base, max_matching_ngram_size=INT, is_keep_all=BOOL, is_use_oldest=BOOL,
        is_public_pool=BOOL))
    return out


# Provenance of each rule, per version:
#
# 1.3.0rc12 (the image the DGX Spark playbook pins; unchanged from the first stand-in):
#   * dispatch through DecodingBaseConfig.from_dict with the table {"MTP", "Medusa",
#     "Eagle", "Lookahead", "NGram", "DraftTarget", "UserProvided", "AUTO"} (llm_args.py
#     of the ~1.0 era; reference specdec-domain.md section 1.2);
#   * YAML `decoding_type: Eagle` / `DraftTarget` + `speculative_model_dir`: the three
#     runbook recipes of NVIDIA/dgx-spark-playbooks nvidia/speculative-decoding/README.md;
#   * `Eagle3` and `Draft_Target` (the newer spellings) and `speculative_model` (the newer
#     field, NVIDIA/TensorRT-LLM#10099) are rejected.  Whether the real 1.3.0rc12 already
#     contains #10099/#10124 is not verified (reference trtllm-versions-bench.md section
#     2.1: "exact first tag unverified"); the stand-in keeps the spelling the playbook uses.
# 1.4.0rc1:
#   * `decoding_type: Eagle3` (Eagle3DecodingConfig) introduced and `Eagle` deprecated for
#     PyTorch by NVIDIA/TensorRT-LLM#10124; `Eagle` is still in the live decoding_type
#     list of Sep 2026 (NVIDIA/TensorRT-LLM#18955), so it is accepted with a warning;
#   * `speculative_model` replaces `speculative_model_dir`, which stays accepted through
#     `validation_alias=AliasChoices("speculative_model", "speculative_model_dir")`
#     (NVIDIA/TensorRT-LLM#10099, DecodingBaseConfig in tensorrt_llm/llmapi/llm_args.py).
#     With both keys set pydantic takes `speculative_model` and reports the alias as
#     "Extra inputs are not permitted" (StrictBaseModel, extra="forbid"; checked against
#     pydantic 2.14); the stand-in says so and adds why.  The value may be an HF repo id
#     that the real server downloads (#10099); the stand-in only looks in the HF cache;
#   * `speculative_config` is a pydantic discriminated union on `decoding_type`
#     (`SpeculativeConfig = Annotated[Union[...], Field(discriminator="decoding_type")]`)
#     and DraftTargetDecodingConfig.decoding_type is `Literal["Draft_Target"]`
#     (tensorrt_llm/llmapi/llm_args.py), so `DraftTarget` fails as union_tag_invalid;
#   * DraftTargetDecodingConfig.supports_backend is pytorch or _autodeploy in llm_args.py,
#     but AutoDeploy two-model speculation was removed in Apr 2026 (#13534): pytorch only;
#     TrtLlmArgs.validate_speculative_config rejects Eagle3 on the TensorRT backend;
#   * real-but-not-modelled decoding types: the Sep 2026 live list (#18955); the exact
#     1.4.0rc1 membership is not verified (its API reference has DSparkDecodingConfig);
#   * `eagle3_one_model` is still accepted: the 1.4.0rc1 API reference signature no longer
#     shows it (reference specdec-domain.md section 1.2) but whether the field is gone or
#     hidden is not verified (see also #17366, 2-model spec dec falls back to 1-model).
_BASE_13 = {"max_draft_len": INT, "speculative_model_dir": STR,
            "max_total_draft_tokens": _opt(INT)}
_BASE_14 = {"max_draft_len": INT, "speculative_model": STR, "speculative_model_dir": STR,
            "max_total_draft_tokens": _opt(INT)}

VERSION_PROFILES = {
    "1.3.0rc12": VersionProfile(
        "1.3.0rc12",
        spec_configs=_spec_models(_BASE_13, [("Eagle", "EagleDecodingConfig")], "DraftTarget"),
        draft_keys=("speculative_model_dir",),
        needs_draft={"Eagle", "DraftTarget"},
        backends={"DraftTarget": {"pytorch"}, "NGram": {"pytorch"}},
        not_modelled=["MTP", "Medusa", "Lookahead", "UserProvided", "AUTO"],
        union=False,
        respelled={
            "Eagle3": "EAGLE-3 drafts are configured with decoding_type: Eagle in 1.3.0rc12 "
                      "(Eagle3 is the spelling of newer releases)",
            "Draft_Target": "Draft-Target is configured with decoding_type: DraftTarget in "
                            "1.3.0rc12 (Draft_Target is the spelling of newer releases)",
        },
        extra_hints={
            "speculative_model": "1.3.0rc12 names the draft speculative_model_dir; "
                                 "speculative_model is the newer name (NVIDIA/TensorRT-LLM#10099)",
        },
    ),
    "1.4.0rc1": VersionProfile(
        "1.4.0rc1",
        spec_configs=_spec_models(_BASE_14, [("Eagle3", "Eagle3DecodingConfig"),
                                             ("Eagle", "EagleDecodingConfig")], "Draft_Target"),
        draft_keys=("speculative_model", "speculative_model_dir"),
        needs_draft={"Eagle3", "Eagle", "Draft_Target"},
        backends={"Draft_Target": {"pytorch"}, "NGram": {"pytorch"},
                  "Eagle3": {"pytorch", "_autodeploy"}},
        not_modelled=["AUTO", "DFlash", "DSpark", "MTP", "PARD", "SA", "SaveState",
                      "User_Provided"],
        union=True,
        respelled={
            "DraftTarget": "Draft-Target is configured with decoding_type: Draft_Target in "
                           "1.4.0rc1 (DraftTargetDecodingConfig.decoding_type is "
                           "Literal['Draft_Target']; DraftTarget is the spelling of older "
                           "releases)",
        },
        deprecated={
            "Eagle": "speculative_config.decoding_type 'Eagle' is deprecated in TensorRT-LLM "
                     "1.4.0rc1: use 'Eagle3' (NVIDIA/TensorRT-LLM#10124); 'Eagle' is still "
                     "accepted",
        },
        draft_hub_ids=True,
    ),
}


def profile(version=None):
    version = version or IMAGE_TRTLLM_VERSION
    if version not in VERSION_PROFILES:
        raise StandinError(VERSION_ERROR or f"unsupported TensorRT-LLM version {version!r}")
    return VERSION_PROFILES[version]


# YAML key -> CLI dest, for "set in both places" warnings and effective values.
YAML_OVER_CLI = ["max_batch_size", "max_num_tokens", "max_seq_len", "max_beam_width",
                 "tensor_parallel_size", "pipeline_parallel_size",
                 "moe_expert_parallel_size", "gpus_per_node", "num_postprocess_workers",
                 "trust_remote_code", "enable_chunked_prefill"]
KV_FRACTION_DEFAULT = 0.9


def _decoding_type_error(prof, dtype, raw, loc, val):
    known = list(prof.spec_configs) + prof.not_modelled
    if dtype in prof.not_modelled:
        val.add(loc + ["decoding_type"],
                f"Value error, decoding type {dtype} is valid in TensorRT-LLM "
                f"{prof.version} but not modelled by the sparkops lab stand-in "
                f"(modelled: {', '.join(prof.spec_configs)})", "value_error", dtype)
        return
    hint = prof.respelled.get(dtype)
    if prof.union:
        # pydantic's discriminated-union errors (SpeculativeConfig in llm_args.py).
        if dtype is None:
            val.add(loc, "Unable to extract tag using discriminator 'decoding_type'",
                    "union_tag_not_found", raw)
            return
        tags = ", ".join(f"'{t}'" for t in known)
        msg = (f"Input tag '{dtype}' found using 'decoding_type' does not match any of the "
               f"expected tags: {tags} (TensorRT-LLM {prof.version})")
        if hint:
            msg += ". " + hint
        val.add(loc, msg, "union_tag_invalid", raw)
        return
    msg = (f"Value error, Invalid decoding type: {dtype}. "
           f"'{dtype}' is not known to this image version (TensorRT-LLM "
           f"{prof.version}); known decoding types: {', '.join(known)}")
    if hint:
        msg += ". " + hint
    val.add(loc + ["decoding_type"], msg, "value_error", dtype)


def _check_speculative(raw, val, prof, warnings):
    loc = ["speculative_config"]
    if raw is None:
        return None
    if not isinstance(raw, dict):
        val.add(loc, "Input should be a valid dictionary or instance of DecodingBaseConfig",
                "model_type", raw)
        return None
    dtype = raw.get("decoding_type")
    if not isinstance(dtype, str) or dtype not in prof.spec_configs:
        _decoding_type_error(prof, dtype, raw, loc, val)
        return None
    if dtype in prof.deprecated:
        warnings.append(prof.deprecated[dtype])
    model = prof.spec_configs[dtype]
    body = {k: v for k, v in raw.items() if k != "decoding_type"}
    field, aliases = prof.draft_keys[0], prof.draft_keys[1:]
    for alias in aliases:
        if field in body and alias in body:
            # AliasChoices: the first choice wins and the other key is an extra input.
            val.add(loc + [alias],
                    f"Extra inputs are not permitted ({alias} is the alias of {field}, "
                    f"which is also set: set only {field})", "extra_forbidden", body[alias])
            del body[alias]
    for key in body:
        if key not in model.fields and key in prof.extra_hints:
            val.add(loc + [key], f"Extra inputs are not permitted ({prof.extra_hints[key]})",
                    "extra_forbidden", body[key])
    body = {k: v for k, v in body.items() if k in model.fields or k not in prof.extra_hints}
    out = _check(model, body, loc, val)
    if out is None:
        return None
    for alias in aliases:
        if alias in out:
            out[field] = out.pop(alias)
    if "max_draft_len" not in raw:
        val.add(loc + ["max_draft_len"], f"Field required ({dtype})", "missing", has_value=False)
    elif out.get("max_draft_len") is not None and out["max_draft_len"] <= 0:
        val.add(loc + ["max_draft_len"],
                f"Value error, max_draft_len must be > 0, got {out['max_draft_len']}",
                "value_error", raw["max_draft_len"])
    if dtype in prof.needs_draft and all(raw.get(k) in (None, "") for k in prof.draft_keys):
        what = ("a draft model directory" if not aliases else
                f"a draft model ({field}, or its alias {', '.join(aliases)})")
        val.add(loc + [field], f"Field required: {what} is required for {dtype}",
                "missing", has_value=False)
    out["decoding_type"] = dtype
    return out


def validate_extra_options(data, source="<yaml>", version=None, warnings=None):
    """Validate a parsed --extra_llm_api_options mapping against `version`'s schema.

    `version` defaults to the image's (TRT_LLM_VERSION).  Returns the normalized
    (coerced) dict; the draft is under the version's own field name.  Deprecation
    warnings are appended to `warnings` when given.  Raises StandinError with a
    pydantic-like message listing every problem.
    """
    prof = profile(version)
    warnings = [] if warnings is None else warnings
    val = _V()
    if data is None:
        raise StandinError(
            f"{source} is empty: trtllm-serve fails on an empty --extra_llm_api_options "
            "file (it expects a mapping); put at least one option in it or drop the flag")
    if not isinstance(data, dict):
        raise StandinError(
            f"{source} must contain a YAML mapping of LLM API options, got "
            f"{type(data).__name__}")
    top = {k: v for k, v in data.items() if k != "speculative_config"}
    out = _check(prof.top_level, top, [], val) or {}
    if "speculative_config" in data:
        out["speculative_config"] = _check_speculative(data["speculative_config"], val, prof,
                                                       warnings)
    kv = out.get("kv_cache_config") or {}
    frac = kv.get("free_gpu_memory_fraction")
    if frac is not None and not (0.0 < frac <= 1.0):
        val.add(["kv_cache_config", "free_gpu_memory_fraction"],
                "Value error, must be a float in (0, 1]", "value_error",
                data["kv_cache_config"]["free_gpu_memory_fraction"])
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        if out.get(key) is not None and out[key] < 1:
            val.add([key], "Value error, must be >= 1", "value_error", data[key])
    if val.errors:
        n = len(val.errors)
        lines = [f"{n} validation error{'s' if n != 1 else ''} for TorchLlmArgs "
                 f"(in {source}; TensorRT-LLM {prof.version} stand-in)"]
        lines += ["  " + e for e in val.errors]
        # (keys the stand-in explains itself, like a known alias set twice, get no hint)
        if any("Extra inputs are not permitted [type=extra_forbidden" in e for e in val.errors):
            lines.append(
                "  (the lab stand-in knows the subset of TorchLlmArgs used by the DGX Spark "
                f"runbooks; a key valid in the real TensorRT-LLM {prof.version} "
                "must be added to VERSION_PROFILES in sparkops_standin.py)")
        raise StandinError("\n".join(lines))
    return out


def load_extra_options(path):
    if yaml is None:
        raise StandinError("python3-yaml is not installed: the stand-in needs the Debian "
                           "package python3-yaml to read --extra_llm_api_options")
    try:
        with open(path, "r", encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise StandinError(f"--extra_llm_api_options/--config file not found: {path}")
    except (OSError, UnicodeDecodeError) as exc:
        raise StandinError(f"cannot read --extra_llm_api_options file {path}: {exc}")
    except yaml.YAMLError as exc:
        raise StandinError(f"--extra_llm_api_options file {path} is not valid YAML: {exc}")
    return data


def effective_settings(opts, given, extra, source="<yaml>"):
    """Apply the YAML over the CLI the way trtllm-serve does.

    Returns (settings dict, list of warning strings).
    """
    eff = {k: opts[k] for k in opts}
    warnings = []
    for key in YAML_OVER_CLI:
        if key in extra:
            if key in given:
                flag = _cli_flag_for(key)
                warnings.append(
                    f"{key} is set both on the command line ({flag} {opts[key]}) and in "
                    f"{source} ({key}: {extra[key]}); the YAML value wins, as in trtllm-serve")
            eff[key] = extra[key]
    kv_yaml = extra.get("kv_cache_config")
    frac = opts["free_gpu_memory_fraction"]
    if kv_yaml is not None:
        if "free_gpu_memory_fraction" in kv_yaml:
            if "free_gpu_memory_fraction" in given:
                warnings.append(
                    "the KV cache fraction is set both on the command line "
                    f"(--kv_cache_free_gpu_memory_fraction {opts['free_gpu_memory_fraction']}) "
                    f"and in {source} (kv_cache_config.free_gpu_memory_fraction: "
                    f"{kv_yaml['free_gpu_memory_fraction']}); the YAML value wins, as in "
                    "trtllm-serve")
            frac = kv_yaml["free_gpu_memory_fraction"]
        else:
            if "free_gpu_memory_fraction" in given and \
                    opts["free_gpu_memory_fraction"] != KV_FRACTION_DEFAULT:
                warnings.append(
                    f"--kv_cache_free_gpu_memory_fraction {opts['free_gpu_memory_fraction']} "
                    f"is overridden: {source} sets kv_cache_config, which replaces the "
                    "command-line KV cache config as a whole (trtllm-serve merges the YAML "
                    "shallowly), so free_gpu_memory_fraction falls back to the default "
                    f"{KV_FRACTION_DEFAULT}; set it inside kv_cache_config instead")
            frac = KV_FRACTION_DEFAULT
    eff["free_gpu_memory_fraction"] = frac
    eff["speculative_config"] = extra.get("speculative_config")
    return eff, warnings


def _cli_flag_for(dest):
    for o in SERVE_OPTIONS:
        if o.dest == dest:
            return o.names[-1] if len(o.names) > 1 else o.names[0]
    return "--" + dest


# ---------------------------------------------------------------------------
# Model resolution (never downloads)
# ---------------------------------------------------------------------------

def hf_hub_cache():
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"], "$HF_HUB_CACHE"
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):
        return os.environ["HUGGINGFACE_HUB_CACHE"], "$HUGGINGFACE_HUB_CACHE"
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub"), "$HF_HOME/hub"
    return os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "hub"), \
        "~/.cache/huggingface/hub"


_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_SHA = re.compile(r"^[0-9a-f]{40}$")


def resolve_model(model, revision=None, what="target model"):
    """Return the local directory holding `model`'s config.json, or raise StandinError."""
    expanded = os.path.expanduser(model)
    looks_like_path = model.startswith(("/", "./", "../", "~")) or os.path.exists(expanded)
    if looks_like_path:
        if not os.path.isdir(expanded):
            raise StandinError(
                f"{what} directory {expanded} does not exist on {socket.gethostname()}; "
                "download the model there first (e.g. `hf download ORG/NAME --local-dir "
                f"{expanded}`) or pass an HF repo id that is in the HF cache")
        if not os.path.isfile(os.path.join(expanded, "config.json")):
            raise StandinError(
                f"{what} directory {expanded} has no config.json (searched "
                f"{os.path.join(expanded, 'config.json')}); it is not a complete HF "
                "checkpoint: re-run the download")
        return os.path.abspath(expanded)
    if not _REPO_ID.match(model):
        raise StandinError(f"MODEL {model!r} is neither an existing directory nor an HF repo id")
    cache, how = hf_hub_cache()
    repo_dir = os.path.join(cache, "models--" + model.replace("/", "--"))
    rev = revision or "main"
    searched = []
    snapshot = None
    ref_file = os.path.join(repo_dir, "refs", rev)
    searched.append(ref_file)
    if os.path.isfile(ref_file):
        with open(ref_file, "r", encoding="utf-8") as fh:
            sha = fh.read().strip()
        snapshot = os.path.join(repo_dir, "snapshots", sha)
    elif _SHA.match(rev):
        snapshot = os.path.join(repo_dir, "snapshots", rev)
    if snapshot is not None:
        cfg = os.path.join(snapshot, "config.json")
        searched.append(cfg)
        if os.path.isfile(cfg):
            return snapshot
    raise StandinError(
        f"{what} {model} (revision {rev}) is not in the Hugging Face cache on "
        f"{socket.gethostname()}: searched {', '.join(searched)} (cache {cache} from {how}). "
        "The stand-in, like an offline TensorRT-LLM container, never downloads: run "
        f"`hf download {model}` with HF_HOME/HF_HUB_CACHE pointing at the cache mounted "
        "into the container, or pass a local model directory")


def check_draft(spec, version=None):
    """Return the draft directory (or None when the decoding type has no draft)."""
    prof = profile(version)
    if not spec or spec.get("decoding_type") not in prof.needs_draft:
        return None
    key = prof.draft_field
    raw = spec[key]
    d = os.path.expanduser(raw)
    looks_like_path = raw.startswith(("/", "./", "../", "~")) or os.path.exists(d)
    if prof.draft_hub_ids and not looks_like_path and _REPO_ID.match(raw):
        # NVIDIA/TensorRT-LLM#10099: an HF repo id is downloaded by the real server.
        try:
            return resolve_model(raw, what="draft model")
        except StandinError as exc:
            raise StandinError(
                f"speculative_config.{key} {raw} is an HF repo id, which TensorRT-LLM "
                f"{prof.version} downloads (NVIDIA/TensorRT-LLM#10099); the stand-in does "
                f"not: {exc}")
    if not os.path.isdir(d):
        raise StandinError(
            f"speculative_config.{key} {d} does not exist on "
            f"{socket.gethostname()}; download the draft model to that directory on every "
            "node first")
    if not os.path.isfile(os.path.join(d, "config.json")):
        raise StandinError(
            f"speculative_config.{key} {d} has no config.json (searched "
            f"{os.path.join(d, 'config.json')}); the draft checkpoint is incomplete")
    return os.path.abspath(d)


# ---------------------------------------------------------------------------
# Startup: local checks, then the MPI agreement
# ---------------------------------------------------------------------------

class Prepared:
    """Result of the local (per-rank) checks."""

    def __init__(self):
        self.model = None
        self.opts = None
        self.eff = None
        self.extra = None
        self.model_path = None
        self.draft_path = None
        self.error = None
        self.exit_code = 0
        self.digest = None
        self.warnings = []
        self.faults = set()


def prepare(argv):
    p = Prepared()
    try:
        p.model, p.opts, given = parse_serve_args(argv)
    except UsageError as exc:
        p.error = _usage_text(exc.command) + "\nError: " + exc.message
        p.exit_code = 2
        return p
    opts = p.opts
    problems = []
    if opts["tensor_parallel_size"] < 1 or opts["pipeline_parallel_size"] < 1:
        problems.append("--tp_size and --pp_size must be >= 1")
    if not (0.0 < opts["free_gpu_memory_fraction"] <= 1.0):
        problems.append("--kv_cache_free_gpu_memory_fraction must be a float in (0, 1], got "
                        f"{opts['free_gpu_memory_fraction']}")
    if not (0 <= opts["port"] <= 65535):
        problems.append(f"--port {opts['port']} is not a TCP port")
    p.extra = {}
    prof = profile()
    src = opts["extra_llm_api_options"]
    schema_warnings = []
    try:
        if src is not None:
            p.extra = validate_extra_options(load_extra_options(src), source=src,
                                             warnings=schema_warnings)
    except StandinError as exc:
        problems.append(str(exc))
    p.eff, p.warnings = effective_settings(opts, given, p.extra, source=src or "<none>")
    p.warnings[:0] = schema_warnings
    spec = p.eff.get("speculative_config")
    backends = prof.backends.get(spec["decoding_type"]) if spec else None
    if backends and p.eff["backend"] not in backends:
        problems.append(f"speculative decoding {spec['decoding_type']} supports only the "
                        f"{' and '.join(sorted(backends))} backend"
                        f"{'s' if len(backends) > 1 else ''} in TensorRT-LLM {prof.version}, "
                        f"not --backend {p.eff['backend']}")
    if spec and spec["decoding_type"] == "NGram" and spec.get(prof.draft_field):
        p.warnings.append(f"speculative_config.{prof.draft_field} is ignored for NGram")
    # The image version is part of the agreement: ranks on different images disagree.
    normalized = {"model": p.model, "options": opts, "extra_llm_api_options": p.extra,
                  "trtllm_version": prof.version}
    p.digest = hashlib.sha256(json.dumps(normalized, sort_keys=True, default=str)
                              .encode()).hexdigest()
    if not problems:
        try:
            p.model_path = resolve_model(p.model, opts["revision"])
        except StandinError as exc:
            problems.append(str(exc))
        try:
            p.draft_path = check_draft(spec)
        except StandinError as exc:
            problems.append(str(exc))
    try:
        p.faults = faults_from_env()
    except StandinError as exc:
        problems.append(str(exc))
    if problems:
        p.error = "\n".join(problems)
        p.exit_code = 1
    return p


def _under_mpi():
    return "OMPI_COMM_WORLD_SIZE" in os.environ or "PMIX_RANK" in os.environ


class World:
    def __init__(self, comm=None, rank=0, size=1, hosts=None):
        self.comm = comm
        self.rank = rank
        self.size = size
        self.hosts = hosts or [socket.gethostname()]


def _mpi_world():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise StandinError(
            "running under mpirun but mpi4py is not importable "
            f"({exc}); install the Debian package python3-mpi4py")
    comm = MPI.COMM_WORLD
    return World(comm, comm.Get_rank(), comm.Get_size())


def agree(p, world):
    """Return (error message or None, exit code).  Collective under MPI."""
    host = socket.gethostname()
    mine = {"rank": world.rank, "host": host, "digest": p.digest,
            "error": p.error, "exit_code": p.exit_code,
            "target_found": p.model_path is not None,
            "draft_found": p.draft_path is not None, "version": IMAGE_TRTLLM_VERSION}
    if world.comm is not None:
        everyone = world.comm.allgather(mine)
    else:
        everyone = [mine]
    world.hosts = [e["host"] for e in everyone]
    msgs = []
    code = 0
    failed = [e for e in everyone if e["error"]]
    for e in failed:
        where = f"rank {e['rank']} ({e['host']})" if world.comm is not None else e["host"]
        msgs.append(f"{where}: {e['error']}" if world.comm is not None else e["error"])
        code = max(code, e["exit_code"])
    if failed:
        if world.comm is not None and any(e["rank"] != world.rank for e in failed):
            msgs.append(f"rank {world.rank} ({host}) stops too: all ranks must start together")
        return "\n".join(msgs), code
    tp = p.eff["tensor_parallel_size"]
    pp = p.eff["pipeline_parallel_size"]
    if world.size != tp * pp:
        hint = ("start one rank per DGX Spark with mpirun, e.g. `mpirun -np "
                f"{tp * pp} -H spark-1,spark-2 trtllm-llmapi-launch trtllm-serve ...`"
                if world.size < tp * pp else
                f"use --tp_size/--pp_size whose product is the number of MPI ranks ({world.size})")
        return (f"MPI world size {world.size} does not match tp_size {tp} x pp_size {pp} "
                f"(= {tp * pp}); {hint}"), 1
    versions = {e["version"] for e in everyone}
    if len(versions) > 1:
        per_rank = "; ".join(f"rank {e['rank']} ({e['host']}) {e['version']}" for e in everyone)
        return (f"MPI ranks run different TensorRT-LLM versions ({per_rank}): every node "
                "must run the same image (TRT_LLM_VERSION)"), 1
    groups = {}
    for e in everyone:
        groups.setdefault(e["digest"], []).append(e)
    if len(groups) > 1:
        ref = everyone[0]["digest"]

        def names(entries):
            return ", ".join(f"rank {e['rank']} ({e['host']})" for e in entries)

        differ = [e for e in everyone if e["digest"] != ref]
        same = [e for e in everyone if e["digest"] == ref]
        digests = "; ".join(f"rank {e['rank']} ({e['host']}) sha256 {e['digest'][:12]}"
                            for e in everyone)
        return (f"configuration differs between MPI ranks: {names(differ)} differ "
                f"from {names(same)} ({digests}). Every rank must get the same "
                "trtllm-serve arguments and the same --extra_llm_api_options YAML "
                "content"), 1
    return None, 0


# ---------------------------------------------------------------------------
# HTTP server (rank 0)
# ---------------------------------------------------------------------------

class ServeState:
    def __init__(self, p, world):
        self.model_id = p.model
        self.model_path = p.model_path
        self.eff = p.eff
        self.world = world
        self.ready = threading.Event()
        self.version = IMAGE_TRTLLM_VERSION
        # return_perf_metrics is YAML-only (TorchLlmArgs field, no trtllm-serve flag).
        self.perf_metrics = bool(p.extra.get("return_perf_metrics"))
        spec = p.eff.get("speculative_config")
        self.spec = spec
        self.draft_path = p.draft_path
        # Harmony (gpt-oss): trtllm-serve parses its tool calls without --tool_parser.
        self.harmony = model_type(p.model_path) == "gpt_oss"
        self.faults = p.faults
        if spec:
            parts = [f"decoding_type={spec['decoding_type']}",
                     f"max_draft_len={spec['max_draft_len']}"]
            if spec["decoding_type"] == "NGram":
                parts.append(f"max_matching_ngram_size={spec.get('max_matching_ngram_size', 0)}")
            else:
                parts.append(f"draft={p.draft_path}")
            self.spec_summary = "Speculative decoding configured: " + ", ".join(parts)
        else:
            self.spec_summary = "Speculative decoding: not configured"
        tp = p.eff["tensor_parallel_size"]
        pp = p.eff["pipeline_parallel_size"]
        hosts = []
        for h in world.hosts:
            if h not in hosts:
                hosts.append(h)
        par = f"tp_size={tp}"
        if pp != 1:
            par += f", pp_size={pp}"
        if world.comm is not None:
            par += (f" over {world.size} MPI rank{'s' if world.size != 1 else ''} on "
                    f"host{'s' if len(hosts) != 1 else ''} {', '.join(hosts)}")
        else:
            par += f" in a single process on host {hosts[0]} (no MPI)"
        self.parallel_summary = par

    def text_for(self, prompt_text):
        words = prompt_text.split()
        snippet = " ".join(words[:8]) + (" ..." if len(words) > 8 else "")
        snippet = snippet.replace('"', "'")
        return (f"[sparkops lab stand-in, not TensorRT-LLM; stands in for trtllm-serve "
                f'{self.version}] Received "{snippet}". '
                f"{self.spec_summary}; {self.parallel_summary}.")

    def prometheus_text(self):
        """Prometheus exposition for /prometheus/metrics (return_perf_metrics: true).

        Honest by construction: a single info gauge naming the stand-in, the version
        it stands in for and the validated configuration.  None of trtllm-serve's own
        metrics (trtllm_*: token counters, spec-decode acceptance, latencies) is
        emitted, not even as zeros, so no speed or acceptance can be derived from it.
        """
        spec = self.spec or {}
        labels = {
            "standin_for": "trtllm-serve",
            "trtllm_version": self.version,
            "standin_version": self.version + "-sparkops-lab-standin",
            "model": self.model_id,
            "decoding_type": spec.get("decoding_type", ""),
            "max_draft_len": str(spec.get("max_draft_len", "")),
            "draft_model": self.draft_path or "",
        }
        body = ",".join(f'{k}="{_prom_escape(v)}"' for k, v in labels.items())
        return (
            "# HELP sparkops_lab_standin_info sparkops lab STAND-IN for trtllm-serve of "
            f"TensorRT-LLM {self.version}, NOT TensorRT-LLM: no model runs, so no "
            "performance metric (throughput, latency, acceptance) is reported.\n"
            "# TYPE sparkops_lab_standin_info gauge\n"
            f"sparkops_lab_standin_info{{{body}}} 1\n")


def _prom_escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


FAULTS_ENV = "SPARKOPS_STANDIN_FAULTS"
# Lab-only fault switches that reproduce known TensorRT-LLM bugs.
KNOWN_FAULTS = {
    # NVIDIA/TensorRT-LLM#16377: gpt-oss + Eagle3 on trtllm-serve returns empty tool_calls and
    # content (reasoning_content set); works with speculation off.
    "drop_tool_calls_with_speculation",
}
_TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


RUNTIME_FAULT_FILE_ENV = "SPARKOPS_STANDIN_FAULT_FILE"
RUNTIME_FAULT_FILE = "/tmp/sparkops-standin-faults"
RUNTIME_FAULTS = {"wedge_completions", "unauthorized", "crash_on_start"}
WEDGE_SECONDS = 600.0


def runtime_faults(text, pid, pgid):
    """The runtime faults of the fault file's text that hold for this process (pid, process group pgid)."""
    held = set()
    for line in (text or "").splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        name = words[0]
        if name not in RUNTIME_FAULTS:
            _err(f"{TAG} WARNING: {RUNTIME_FAULT_FILE_ENV}: unknown runtime fault {name!r} ignored; known: "
                 f"{', '.join(sorted(RUNTIME_FAULTS))}")
            continue
        if len(words) > 1 and words[1] not in (str(pid), str(pgid)):
            continue
        held.add(name)
    return held


def runtime_faults_now():
    path = os.environ.get(RUNTIME_FAULT_FILE_ENV) or RUNTIME_FAULT_FILE
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return set()
    return runtime_faults(text, os.getpid(), os.getpgrp())


def faults_from_env():
    raw = os.environ.get(FAULTS_ENV, "")
    names = [x.strip() for x in raw.split(",") if x.strip()]
    unknown = sorted(set(names) - KNOWN_FAULTS)
    if unknown:
        raise StandinError(f"{FAULTS_ENV}: unknown fault(s) {', '.join(unknown)}; known: "
                           f"{', '.join(sorted(KNOWN_FAULTS))}")
    return set(names)


def model_type(model_path):
    """``model_type`` from the model's config.json ("" when unreadable)."""
    try:
        with open(os.path.join(str(model_path), "config.json"), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, TypeError):
        return ""
    return str(data.get("model_type", "")) if isinstance(data, dict) else ""


def parse_tools(req):
    """Validate ``tools``/``tool_choice`` like the OpenAI schema; returns (tools, choice)."""
    tools = req.get("tools")
    choice = req.get("tool_choice")
    if tools is None:
        if choice not in (None, "none"):
            raise HttpError(400, "tool_choice is set but no tools are given", param="tool_choice")
        return [], "none"
    if not isinstance(tools, list):
        raise HttpError(400, "tools must be a list", param="tools")
    names = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function" or \
                not isinstance(tool.get("function"), dict):
            raise HttpError(400, f"tools.{i}: must be {{type: function, function: {{...}}}}",
                            param="tools")
        fn = tool["function"]
        name = fn.get("name")
        if not isinstance(name, str) or not _TOOL_NAME_RE.match(name):
            raise HttpError(400, f"tools.{i}.function.name: must be 1-64 letters, digits, _ or -",
                            param="tools")
        params = fn.get("parameters", {})
        if not isinstance(params, dict):
            raise HttpError(400, f"tools.{i}.function.parameters: must be an object",
                            param="tools")
        names.append(name)
    if choice is None:
        choice = "auto" if tools else "none"
    if isinstance(choice, dict):
        named = (choice.get("function") or {}).get("name") if choice.get("type") == "function" \
            else None
        if named not in names:
            raise HttpError(400, "tool_choice names a function that is not in tools",
                            param="tool_choice")
        return tools, named
    if choice not in ("none", "auto"):
        raise HttpError(400, "tool_choice must be none, auto or {type: function, function: "
                        "{name: ...}}", param="tool_choice")
    return tools, choice


def _schema_value(name, schema, prompt_text):
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    # The first capitalised word that does not start a sentence (a name, e.g. a city).
    words = re.findall(r"(?<![.?!]\s)(?<!^)(?<=\s)[A-Z][A-Za-z-]+", prompt_text.strip())
    return words[0] if words else name


def tool_call_for(tools, choice, prompt_text):
    """The stand-in's tool call: the named tool, else the first; arguments from its schema."""
    fn = next((t["function"] for t in tools if t["function"]["name"] == choice),
              tools[0]["function"])
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    args = {k: _schema_value(k, props.get(k, {}), prompt_text)
            for k in (params.get("required") or [])}
    return {"id": "chatcmpl-tool-" + uuid.uuid4().hex, "type": "function",
            "function": {"name": fn["name"], "arguments": json.dumps(args)}}


class HttpError(Exception):
    def __init__(self, status, message, etype="BadRequestError", param=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.etype = etype
        self.param = param


def _pieces(text):
    return re.findall(r"\S+\s*", text)


def _count_words(text):
    return len(text.split())


def _content_text(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and \
                    isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return " ".join(parts)
    raise HttpError(400, "messages[].content must be a string or a list of content parts",
                    param="messages")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    # uvicorn-style access log on stdout
    def log_request(self, code="-", size="-"):
        try:
            phrase = HTTPStatus(int(code)).phrase
        except (ValueError, TypeError):
            phrase = ""
        _out(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - '
             f'"{self.command} {self.path} {self.request_version}" {code} {phrase}')

    def log_message(self, fmt, *args):  # errors from http.server
        _err("WARNING:  " + (fmt % args))

    @property
    def st(self):
        return self.server.standin

    # --- helpers -----------------------------------------------------------
    def end_headers(self):
        self.send_header(STANDIN_HEADER, f"trtllm-serve {self.st.version} stand-in, "
                                         "NOT TensorRT-LLM")
        super().end_headers()

    def _send(self, status, body=b"", ctype="application/json"):
        self.send_response(status)
        if body or ctype:
            self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status, obj):
        self._send(status, json.dumps(obj).encode())

    def _error(self, exc):
        self._json(exc.status, {"object": "error", "message": exc.message,
                                "type": exc.etype, "param": exc.param, "code": exc.status})

    def _body(self):
        length = self.headers.get("content-length")
        if length is None:
            raise HttpError(411, "Content-Length required")
        try:
            n = int(length)
        except ValueError:
            raise HttpError(400, "bad Content-Length")
        if n > 16 * 1024 * 1024:
            raise HttpError(413, "request body too large")
        raw = self.rfile.read(n)
        try:
            data = json.loads(raw.decode("utf-8") or "null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise HttpError(400, f"request body is not valid JSON: {exc}")
        if not isinstance(data, dict):
            raise HttpError(400, "request body must be a JSON object")
        return data

    # --- routing -----------------------------------------------------------
    GET_ROUTES = {"/health", "/health_generate", "/version", "/v1/models", "/metrics",
                  "/prometheus/metrics"}
    POST_ROUTES = {"/v1/completions", "/v1/chat/completions"}

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path in self.POST_ROUTES:
            return self._json(405, {"detail": "Method Not Allowed"})
        if path not in self.GET_ROUTES:
            return self._json(404, {"detail": "Not Found"})
        if path in ("/health", "/health_generate"):
            return self._send(200, b"", ctype=None)
        if path == "/version":
            return self._json(200, {"version": STANDIN_VERSION})
        if path == "/metrics":
            return self._json(200, [])
        if path == "/prometheus/metrics":
            # Mounted by trtllm-serve only with return_perf_metrics: true.
            if not self.st.perf_metrics:
                return self._json(404, {"detail": "Not Found"})
            return self._send(200, self.st.prometheus_text().encode(),
                              ctype="text/plain; version=0.0.4; charset=utf-8")
        if path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{
                "id": self.st.model_id, "object": "model",
                "created": int(self.server.started), "owned_by": OWNER}]})

    do_HEAD = do_GET

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        if path in self.GET_ROUTES:
            return self._json(405, {"detail": "Method Not Allowed"})
        if path not in self.POST_ROUTES:
            return self._json(404, {"detail": "Not Found"})
        faults = runtime_faults_now()
        if "unauthorized" in faults:
            return self._json(401, {"error": "Unauthorized"})
        if "wedge_completions" in faults:
            # A wedged scheduler: the request is accepted and never answered (the client's timeout ends it).
            time.sleep(WEDGE_SECONDS)
            return None
        try:
            req = self._body()
            self._check_model(req)
            max_tokens = self._max_tokens(req, path)
            n = req.get("n", 1)
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 16:
                raise HttpError(400, "n must be an integer between 1 and 16", param="n")
            stream = req.get("stream", False)
            if not isinstance(stream, bool):
                raise HttpError(400, "stream must be a boolean", param="stream")
            opts = req.get("stream_options") or {}
            include_usage = bool(isinstance(opts, dict) and opts.get("include_usage"))
            tools, tool_choice = [], "none"
            if path == "/v1/chat/completions":
                prompt_text, prompt_tokens = self._chat_prompt(req)
                tools, tool_choice = parse_tools(req)
                chat = True
            else:
                prompt_text, prompt_tokens = self._completion_prompt(req)
                chat = False
        except HttpError as exc:
            return self._error(exc)
        text = self.st.text_for(prompt_text)
        pieces = _pieces(text)
        finish = "stop"
        if max_tokens is not None and len(pieces) > max_tokens:
            pieces = pieces[:max_tokens]
            finish = "length"
        out_text = "".join(pieces).rstrip() if finish == "length" else "".join(pieces)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces) * n,
                 "total_tokens": prompt_tokens + len(pieces) * n}
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        model = self.st.model_id
        if chat and tools and tool_choice != "none" and self.st.harmony:
            return self._tool_answer(rid, created, model, tools, tool_choice, prompt_text,
                                     prompt_tokens, n, stream, include_usage)
        if stream:
            return self._stream(chat, rid, created, model, pieces, finish, n, usage,
                                include_usage)
        if chat:
            choices = [{"index": i, "message": {"role": "assistant", "content": out_text,
                                                "reasoning_content": None, "tool_calls": []},
                        "logprobs": None, "finish_reason": finish, "stop_reason": None}
                       for i in range(n)]
            obj = "chat.completion"
        else:
            choices = [{"index": i, "text": out_text, "logprobs": None,
                        "finish_reason": finish, "stop_reason": None} for i in range(n)]
            obj = "text_completion"
        self._json(200, {"id": rid, "object": obj, "created": created, "model": model,
                         "choices": choices, "usage": usage,
                         "system_fingerprint": FINGERPRINT})

    def _tool_answer(self, rid, created, model, tools, choice, prompt_text, prompt_tokens, n,
                     stream, include_usage):
        dropped = bool(self.st.spec) and "drop_tool_calls_with_speculation" in self.st.faults
        calls = [] if dropped else [tool_call_for(tools, choice, prompt_text)]
        name = calls[0]["function"]["name"] if calls else tools[0]["function"]["name"]
        reasoning = f"The user asks something the {name} tool answers. I should call {name}."
        finish = "tool_calls" if calls else "stop"
        completion = len(_pieces(reasoning)) + (8 if calls else 0)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion * n,
                 "total_tokens": prompt_tokens + completion * n}
        message = {"role": "assistant", "content": None if calls else "",
                   "reasoning_content": reasoning, "tool_calls": calls}
        if stream:
            return self._stream_message(rid, created, model, message, finish, n, usage,
                                        include_usage)
        choices = [{"index": i, "message": dict(message), "logprobs": None,
                    "finish_reason": finish, "stop_reason": None} for i in range(n)]
        self._json(200, {"id": rid, "object": "chat.completion", "created": created,
                         "model": model, "choices": choices, "usage": usage,
                         "system_fingerprint": FINGERPRINT})

    def _start_sse(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def _stream_message(self, rid, created, model, message, finish, n, usage, include_usage):
        self._start_sse()
        chunks = []
        for i in range(n):
            chunks.append([{"index": i, "delta": {"role": "assistant", "content": ""},
                            "logprobs": None, "finish_reason": None}])
            chunks.append([{"index": i, "delta": {"reasoning_content": message["reasoning_content"]},
                            "logprobs": None, "finish_reason": None}])
            if message["tool_calls"]:
                calls = [dict(c, index=k) for k, c in enumerate(message["tool_calls"])]
                chunks.append([{"index": i, "delta": {"tool_calls": calls}, "logprobs": None,
                                "finish_reason": None}])
            chunks.append([{"index": i, "delta": {}, "logprobs": None,
                            "finish_reason": finish, "stop_reason": None}])
        try:
            for choices in chunks:
                chunk = {"id": rid, "object": "chat.completion.chunk", "created": created,
                         "model": model, "system_fingerprint": FINGERPRINT, "choices": choices}
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            if include_usage:
                chunk = {"id": rid, "object": "chat.completion.chunk", "created": created,
                         "model": model, "system_fingerprint": FINGERPRINT, "choices": [],
                         "usage": usage}
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _check_model(self, req):
        if "model" not in req:
            raise HttpError(400, "model: Field required", param="model")
        if req["model"] != self.st.model_id:
            raise HttpError(404, f"The model `{req['model']}` does not exist. This server "
                            f"serves `{self.st.model_id}`.", etype="NotFoundError",
                            param="model")

    def _max_tokens(self, req, path):
        key = "max_tokens"
        value = req.get("max_tokens")
        if value is None and path == "/v1/chat/completions":
            key = "max_completion_tokens"
            value = req.get("max_completion_tokens")
        if value is None:
            return 16 if path == "/v1/completions" else None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise HttpError(400, f"{key} must be an integer >= 1", param=key)
        return value

    def _chat_prompt(self, req):
        msgs = req.get("messages")
        if msgs is None:
            raise HttpError(400, "messages: Field required", param="messages")
        if not isinstance(msgs, list) or not msgs:
            raise HttpError(400, "messages must be a non-empty list", param="messages")
        last_user = ""
        total = 0
        for m in msgs:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise HttpError(400, "each message must be an object with a string role",
                                param="messages")
            text = _content_text(m.get("content"))
            total += _count_words(text)
            if m["role"] == "user":
                last_user = text
        if not last_user:
            last_user = _content_text(msgs[-1].get("content"))
        return last_user, total

    def _completion_prompt(self, req):
        prompt = req.get("prompt")
        if prompt is None:
            raise HttpError(400, "prompt: Field required", param="prompt")
        if isinstance(prompt, str):
            return prompt, _count_words(prompt)
        if isinstance(prompt, list) and prompt and all(isinstance(x, str) for x in prompt):
            return prompt[0], sum(_count_words(x) for x in prompt)
        if isinstance(prompt, list) and prompt and \
                all(isinstance(x, int) and not isinstance(x, bool) for x in prompt):
            return f"<{len(prompt)} token ids>", len(prompt)
        raise HttpError(400, "prompt must be a string, a list of strings or a list of "
                        "token ids", param="prompt")

    def _stream(self, chat, rid, created, model, pieces, finish, n, usage, include_usage):
        self._start_sse()
        obj = "chat.completion.chunk" if chat else "text_completion"

        def emit(choices, extra=None):
            chunk = {"id": rid, "object": obj, "created": created, "model": model,
                     "system_fingerprint": FINGERPRINT, "choices": choices}
            if extra:
                chunk.update(extra)
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()

        try:
            for i in range(n):
                if chat:
                    emit([{"index": i, "delta": {"role": "assistant", "content": ""},
                           "logprobs": None, "finish_reason": None}])
                for j, piece in enumerate(pieces):
                    if finish == "length" and j == len(pieces) - 1:
                        piece = piece.rstrip()
                    if chat:
                        emit([{"index": i, "delta": {"content": piece}, "logprobs": None,
                               "finish_reason": None}])
                    else:
                        emit([{"index": i, "text": piece, "logprobs": None,
                               "finish_reason": None}])
                if chat:
                    emit([{"index": i, "delta": {}, "logprobs": None,
                           "finish_reason": finish, "stop_reason": None}])
                else:
                    emit([{"index": i, "text": "", "logprobs": None,
                           "finish_reason": finish, "stop_reason": None}])
            if include_usage:
                emit([], {"usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


class StandinHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host, port, state):
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.standin = state
        self.started = time.time()
        super().__init__((host, port), Handler, bind_and_activate=False)

    def server_bind(self):
        # HTTPServer.server_bind() resolves the FQDN of the bind address, which can
        # stall for seconds in a container without DNS; the name is not needed.
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = self.server_address[1]


# ---------------------------------------------------------------------------
# Process roles
# ---------------------------------------------------------------------------

def _load_seconds():
    raw = os.environ.get(LOAD_SECONDS_ENV, "1")
    try:
        return max(0.0, float(raw))
    except ValueError:
        _err(f"{TAG} WARNING: {LOAD_SECONDS_ENV}={raw!r} is not a number; using 1")
        return 1.0


def _install_stop_handlers(stop):
    def handler(signum, frame):
        stop.set()
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _tell_workers(world, message):
    if world.comm is None:
        return
    for r in range(1, world.size):
        try:
            world.comm.send(message, dest=r, tag=_TAG_SHUTDOWN)
        except Exception as exc:  # pragma: no cover - MPI failure paths
            _err(f"{TAG} WARNING: could not notify rank {r}: {exc}")


def run_rank0(p, world):
    if "crash_on_start" in runtime_faults_now():
        _err(f"{TAG} ERROR: runtime fault crash_on_start ({RUNTIME_FAULT_FILE_ENV}): exiting before serving")
        _tell_workers(world, {"shutdown": True, "error": "crash_on_start"})
        return 1
    stop = threading.Event()
    _install_stop_handlers(stop)
    state = ServeState(p, world)
    host, port = p.eff["host"], p.eff["port"]
    try:
        httpd = StandinHTTPServer(host, port, state)
        httpd.server_bind()
    except OSError as exc:
        msg = f"Failed to bind socket to {host}:{port}: {exc}"
        _err(f"{TAG} ERROR: {msg}")
        _tell_workers(world, {"shutdown": True, "error": msg})
        return 1
    _out(f"{TAG} simulating model load for "
         f"{_load_seconds():g}s (the port is bound but not listening: connections are "
         "refused until startup completes)")
    if stop.wait(_load_seconds()):
        httpd.server_close()
        _tell_workers(world, {"shutdown": True})
        return 0
    _out("[TRT-LLM] [I] get signal from executor worker")
    pid = os.getpid()
    _err(f"INFO:     Started server process [{pid}]")
    _err("INFO:     Waiting for application startup.")
    httpd.server_activate()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                              name="standin-http", daemon=True)
    thread.start()
    state.ready.set()
    _err("INFO:     Application startup complete.")
    shown = f"[{host}]" if ":" in host else host
    _err(f"INFO:     Uvicorn running on http://{shown}:{port} (Press CTRL+C to quit)")
    while not stop.wait(0.5):
        if not thread.is_alive():  # pragma: no cover
            break
    _err("INFO:     Shutting down")
    httpd.shutdown()
    httpd.server_close()
    _err("INFO:     Waiting for application shutdown.")
    _tell_workers(world, {"shutdown": True})
    _err("INFO:     Application shutdown complete.")
    _err(f"INFO:     Finished server process [{pid}]")
    return 0


def run_worker(world):
    stop = threading.Event()
    _install_stop_handlers(stop)
    _out(f"{TAG} rank {world.rank} ({socket.gethostname()}): stand-in worker rank is idle; "
         "rank 0 serves HTTP")
    req = world.comm.irecv(source=0, tag=_TAG_SHUTDOWN)
    deadline = None
    while True:
        done, msg = req.test()
        if done:
            if isinstance(msg, dict) and msg.get("error"):
                _err(f"{TAG} ERROR: rank 0 failed: {msg['error']}; rank {world.rank} stops")
                return 1
            _out(f"{TAG} rank {world.rank}: shutdown received from rank 0")
            return 0
        if stop.is_set():
            # SIGTERM reaches every rank under mpirun; give rank 0 a moment to say goodbye.
            if deadline is None:
                deadline = time.monotonic() + 5.0
            elif time.monotonic() > deadline:
                try:
                    req.Cancel()
                except Exception:  # pragma: no cover
                    pass
                return 0
        time.sleep(0.1)


def serve_cli(argv):
    _out(BANNER)
    _err(BANNER)
    if VERSION_ERROR:
        _err(f"{TAG} ERROR: {VERSION_ERROR}")
        return 1
    try:
        p = prepare(argv)
    except SystemExit as exc:  # --help
        return exc.code or 0
    world = World()
    try:
        if _under_mpi():
            world = _mpi_world()
    except StandinError as exc:
        _err(f"{TAG} ERROR: {exc}")
        return 1
    for w in p.warnings:
        if world.rank == 0:
            _err(f"{TAG} WARNING: {w}")
    message, code = agree(p, world)
    if message:
        if code == 2 and world.comm is None:
            _err(message)
        else:
            prefix = f"{TAG} ERROR" + (f" [rank {world.rank}]" if world.comm is not None else "")
            for line in message.splitlines():
                _err(f"{prefix}: {line}")
        return code
    if world.rank == 0:
        spec = p.eff.get("speculative_config")
        _out(f"{TAG} target model {p.model} -> {p.model_path}")
        if spec:
            _out(f"{TAG} speculative_config: decoding_type={spec['decoding_type']} "
                 f"max_draft_len={spec['max_draft_len']} draft={p.draft_path}")
        if world.comm is not None:
            ranks = ", ".join(f"rank {i} on {h}" for i, h in enumerate(world.hosts))
            _out(f"{TAG} MPI world of {world.size}: {ranks}; all ranks agree on the "
                 f"configuration (sha256 {p.digest[:12]}) and found the models")
        return run_rank0(p, world)
    return run_worker(world)
