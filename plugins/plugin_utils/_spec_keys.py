# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE: the extra ``speculative_config`` keys a user may set, per engine and engine version (issue 38 item 4).

The plan (plugin_utils/_plan.py) writes the keys it owns itself (TensorRT-LLM: ``decoding_type``, the draft's
``speculative_model``/``speculative_model_dir``, ``max_draft_len``; vLLM: ``method``, ``model``, ``revision``,
``num_speculative_tokens``, ``draft_tensor_parallel_size``) and merges the user's extra keys under them:
``specdec_server_llm_api_options.speculative_config`` (engine trtllm, extra-llm-api-config.yml) and
``specdec_server_speculative_config`` (engine vllm, ``--speculative-config``). Both engines validate the mapping
strictly when the server starts (pydantic models); ``problems`` refuses the same mistakes before anything changes
on a host: an unknown key (with a "did you mean"), a value of the wrong type or out of range, a key of the other
engine's spelling, a key that only applies to another method, and the relations between keys.

A table of plain data, so that the "engines as adapters" work can take it over whole. Sources, per table:

* TensorRT-LLM: ``tensorrt_llm/llmapi/llm_args.py`` ``DecodingBaseConfig`` and its ``decoding_type`` classes
  (reference ``specdec-domain.md`` section 1.2, three stored versions of llm_args.py); the per-tag rules are the
  lab stand-in's (``tests/lab/images/engine/sparkops_standin.py`` VERSION_PROFILES: 1.3.0rc12 and 1.4.0rc1, with
  their sources there): ``max_draft_len`` > 0, ``max_total_draft_tokens`` optional int, ``eagle3_one_model`` only
  on the EAGLE classes (DraftTargetDecodingConfig has the base fields only). Renamed in the 1.3.0rc27 / 1.4.0rc1
  API reference: ``acceptance_window`` / ``acceptance_length_threshold`` -> ``acceptance_rate_window_size`` /
  ``acceptance_rate_threshold``; ``moe_backend`` and ``spec_dec_variant`` appear there (reference
  ``trtllm-versions-bench.md`` section 2.1). Keys the reference documents but the stand-in does not model are
  known (not refused) with their type unchecked (``ANY``).
* vLLM: ``SpeculativeConfig`` of ``vllm/config/speculative.py`` at vllm-project/vllm
  002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443 (the commit _plan.py cites): its fields, ``Field(ge=1)`` bounds, the
  ``RejectionSampleMethod`` / ``DraftSampleMethod`` literals, "prompt_lookup_min ... must be <= prompt_lookup_max",
  ``use_heterogeneous_vocab`` "Requires method='draft_model'", the synthetic acceptance rules
  (``_resolve_synthetic_acceptance_rates``), ``tensor_parallel_size`` ("Users should pass
  draft_tensor_parallel_size"). One table for every vLLM version (per-release differences are not verified).
"""

from __future__ import annotations

import difflib
import re

try:  # ansible-core requires packaging; the fallback keeps this module importable alone.
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover
    Version = None
    InvalidVersion = ValueError

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _text

INT, FLOAT, BOOL, STR, LIST, DICT, ANY = "int", "float", "bool", "str", "list", "dict", "any"
_TYPE_WORDS = {INT: "an integer", FLOAT: "a number", BOOL: "true or false", STR: "a string", LIST: "a list",
               DICT: "a mapping"}


def key(kind, low=None, high=None, choices=None, methods=None, since=None, until=None, instead=None):
    """One key's rule: its type; an inclusive range; allowed values; the sparkops methods it applies to (None: all);
    the engine versions that know it (``since`` <= version < ``until``); ``instead``: its name in the versions that
    renamed it (the other side of ``until``)."""
    return {"type": kind, "low": low, "high": high, "choices": choices, "methods": methods, "since": since,
            "until": until, "instead": instead}


# ---------------------------------------------------------------------------- TensorRT-LLM
_EAGLE = ("eagle3",)
TRTLLM_KEYS = {
    # DecodingBaseConfig (both modelled tags). max_draft_len is set by the plan (specdec_server_max_draft_len,
    # refused beside it by _plan.DEDICATED); a value given alone replaces the plan's.
    "max_draft_len": key(INT, low=1),
    "max_total_draft_tokens": key(INT, low=1),
    "max_concurrency": key(INT, low=1),
    "draft_len_schedule": key(DICT),
    "acceptance_window": key(INT, low=1, until="1.3.0rc27", instead="acceptance_rate_window_size"),
    "acceptance_length_threshold": key(FLOAT, until="1.3.0rc27", instead="acceptance_rate_threshold"),
    "acceptance_rate_window_size": key(INT, low=1, since="1.3.0rc27", instead="acceptance_window"),
    "acceptance_rate_threshold": key(FLOAT, low=0, high=1, since="1.3.0rc27", instead="acceptance_length_threshold"),
    "moe_backend": key(STR, since="1.3.0rc27"),
    "spec_dec_variant": key(ANY, since="1.3.0rc27"),
    "load_format": key(ANY),
    "allow_advanced_sampling": key(BOOL),
    "use_rejection_sampling": key(BOOL),
    "enable_penalty": key(BOOL),
    # EagleDecodingConfig / Eagle3DecodingConfig only.
    "eagle3_one_model": key(BOOL, methods=_EAGLE),
    "eagle_choices": key(LIST, methods=_EAGLE),
    "use_dynamic_tree": key(BOOL, methods=_EAGLE),
    "dynamic_tree_max_topK": key(INT, low=1, methods=_EAGLE),
    "max_non_leaves_per_layer": key(INT, low=1, methods=_EAGLE),
    "greedy_sampling": key(BOOL, methods=_EAGLE),
    "posterior_threshold": key(FLOAT, methods=_EAGLE),
    "eagle3_layers_to_capture": key(LIST, methods=_EAGLE),
    "eagle3_model_arch": key(STR, choices=("llama3", "mistral_large3"), methods=_EAGLE),
}
# Keys that are never the user's with engine trtllm -> why, and what to set instead.
TRTLLM_REFUSED = {
    "num_speculative_tokens": "is vLLM's name of the draft length; TensorRT-LLM's is max_draft_len, which the plan "
                              "sets from specdec_server_max_draft_len: set that instead",
    "num_eagle_layers": "applies to TensorRT-LLM's TensorRT backend only; trtllm-serve runs --backend pytorch here: "
                        "remove it",
    "method": "is vLLM's key; TensorRT-LLM's decoding_type is set by the plan from specdec_server_method: set that "
              "instead",
    "model": "is vLLM's key; the draft is set by the plan from specdec_server_draft_model: set that instead",
}

# ---------------------------------------------------------------------------- vLLM
# The sparkops methods whose vLLM method loads a second model (vLLM treats MTP layers as a draft model too);
# ngram drafts by prompt lookup and has none.
_MODEL = ("eagle3", "draft_target", "dflash", "mtp")
VLLM_KEYS = {
    "enforce_eager": key(BOOL, methods=_MODEL),
    "quantization": key(STR, methods=_MODEL),
    "moe_backend": key(STR, methods=_MODEL),
    "attention_backend": key(STR, methods=_MODEL),
    "kv_cache_dtype": key(STR, methods=_MODEL),
    "max_model_len": key(INT, low=1, methods=_MODEL),
    "code_revision": key(STR, methods=_MODEL),
    "draft_load_config": key(DICT, methods=_MODEL),
    "index_share_for_mtp_iteration": key(BOOL, methods=("mtp",)),
    "disable_padded_drafter_batch": key(BOOL, methods=_MODEL),
    "disable_eagle_block_drop": key(BOOL, methods=_MODEL),
    "use_local_argmax_reduction": key(BOOL),
    "use_heterogeneous_vocab": key(BOOL, methods=("draft_target",)),
    "parallel_drafting": key(BOOL, methods=_MODEL),
    "prompt_lookup_max": key(INT, low=1, methods=("ngram",)),
    "prompt_lookup_min": key(INT, low=1, methods=("ngram",)),
    "num_speculative_tokens_per_batch_size": key(LIST),
    "rejection_sample_method": key(STR, choices=("standard", "synthetic", "block")),
    "synthetic_acceptance_rates": key(LIST),
    "synthetic_acceptance_length": key(FLOAT, low=1),
    "draft_sample_method": key(STR, choices=("greedy", "probabilistic")),
}
VLLM_REFUSED = {
    "max_draft_len": "is TensorRT-LLM's name of the draft length; vLLM's is num_speculative_tokens, which the plan "
                     "sets from specdec_server_max_draft_len: set that instead",
    "decoding_type": "is TensorRT-LLM's key; vLLM's method is set by the plan from specdec_server_method: set that "
                     "instead",
    "speculative_model": "is TensorRT-LLM's key; vLLM's model is set by the plan from specdec_server_draft_model: "
                         "set that instead",
    "speculative_model_dir": "is TensorRT-LLM's key; vLLM's model is set by the plan from "
                             "specdec_server_draft_model: set that instead",
    "tensor_parallel_size": "is not the draft's parallelism (vLLM: \"Users should pass draft_tensor_parallel_size\"); "
                            "set specdec_server_draft_tp_size instead",
    "suffix_decoding_max_tree_depth": "applies to vLLM's method suffix only, which sparkops does not serve: remove it",
    "suffix_decoding_max_cached_requests": "applies to vLLM's method suffix only, which sparkops does not serve: "
                                           "remove it",
    "suffix_decoding_max_spec_factor": "applies to vLLM's method suffix only, which sparkops does not serve: remove it",
    "suffix_decoding_min_token_prob": "applies to vLLM's method suffix only, which sparkops does not serve: remove it",
    "enable_adaptive_verification": "applies to vLLM's method dspark only, which sparkops does not serve: remove it",
    "dspark_draft_topk": "applies to vLLM's method dspark only, which sparkops does not serve: remove it",
}

TABLES = {"trtllm": (TRTLLM_KEYS, TRTLLM_REFUSED), "vllm": (VLLM_KEYS, VLLM_REFUSED)}
ENGINE_NAMES = {"trtllm": "TensorRT-LLM", "vllm": "vLLM"}


# ---------------------------------------------------------------------------- checks
def _version(text):
    if text in (None, "") or Version is None:
        return None
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        return None


def _known_in(rule, version):
    """Whether an engine version knows the key (True when the version is not known: any version's key counts)."""
    if version is None:
        return True
    if rule["since"] and version < _version(rule["since"]):
        return False
    if rule["until"] and version >= _version(rule["until"]):
        return False
    return True


def _is_int(value):
    return not isinstance(value, bool) and (isinstance(value, int) or (isinstance(value, float) and value.is_integer()))


def _number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float))


def text_problem(value):
    """The one text rule's problem of a string value or key (plugin_utils/_text.py), else None."""
    return _text.problem(value)


def _type_problem(rule, value):
    kind = rule["type"]
    ok = {INT: _is_int, FLOAT: _number, BOOL: lambda v: isinstance(v, bool), STR: lambda v: isinstance(v, str),
          LIST: lambda v: isinstance(v, (list, tuple)), DICT: lambda v: isinstance(v, dict)}.get(kind)
    if ok is not None and not ok(value):
        return "%s is %s, not %s" % (_shown(value), _kind(value), _TYPE_WORDS[kind])
    if isinstance(value, str):
        line = text_problem(value)
        if line:
            return line
    if rule["choices"] and value not in rule["choices"]:
        guess = _closest(str(value), rule["choices"])
        return "%s is not one of %s%s" % (_shown(value), ", ".join(rule["choices"]),
                                          "; did you mean %s?" % guess if guess else "")
    low, high = rule["low"], rule["high"]
    if _number(value) and ((low is not None and value < low) or (high is not None and value > high)):
        span = ("at least %s" % low if high is None else "at most %s" % high if low is None
                else "from %s to %s" % (low, high))
        return "%s is out of range; set %s" % (_shown(value), span)
    return None


def _kind(value):
    if value is None:
        return "not set (null)"
    if isinstance(value, bool):
        return "true/false"
    return {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a mapping"}.get(
        type(value), "a %s" % type(value).__name__)


def _shown(value):
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _closest(word, candidates):
    match = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return match[0] if match else None


def _relations(engine, keys, method, max_draft_len):
    """(key, problem) pairs of the relations between keys (and the draft length the plan writes)."""
    out = []
    if engine == "vllm":
        low, high = keys.get("prompt_lookup_min"), keys.get("prompt_lookup_max")
        if _is_int(low) and _is_int(high) and low > high:
            out.append(("prompt_lookup_min", "%s is above prompt_lookup_max %s (vLLM: prompt_lookup_min must be <= "
                                             "prompt_lookup_max); lower it" % (low, high)))
        synthetic = keys.get("rejection_sample_method") == "synthetic"
        given = [k for k in ("synthetic_acceptance_rates", "synthetic_acceptance_length") if k in keys]
        for name in given if not synthetic else ():
            out.append((name, "applies only with rejection_sample_method: synthetic; set that, or remove it"))
        if synthetic and len(given) != 1:
            out.append(("rejection_sample_method", "synthetic needs exactly one of synthetic_acceptance_rates and "
                                                   "synthetic_acceptance_length (got %s)" % (
                                                       " and ".join(given) if given else "neither")))
        rates = keys.get("synthetic_acceptance_rates")
        if synthetic and isinstance(rates, (list, tuple)) and len(given) == 1:
            if not all(_number(r) and 0 <= r <= 1 for r in rates):
                out.append(("synthetic_acceptance_rates", "every entry must be a number from 0 to 1"))
            elif any(rates[i] > rates[i - 1] for i in range(1, len(rates))):
                out.append(("synthetic_acceptance_rates", "must be non-increasing (entry i is the chance that the "
                                                          "first i+1 drafts are all accepted)"))
            elif _is_int(max_draft_len) and len(rates) != int(max_draft_len):
                out.append(("synthetic_acceptance_rates", "has %d entries, but the draft length "
                                                          "(specdec_server_max_draft_len) is %d; give one per drafted "
                                                          "token" % (len(rates), int(max_draft_len))))
        length = keys.get("synthetic_acceptance_length")
        if synthetic and _number(length) and _is_int(max_draft_len) and length > int(max_draft_len) + 1:
            out.append(("synthetic_acceptance_length", "%s is above the draft length + 1 (%d, "
                                                       "specdec_server_max_draft_len %d)" % (
                                                           length, int(max_draft_len) + 1, int(max_draft_len))))
        schedule = keys.get("num_speculative_tokens_per_batch_size")
        if isinstance(schedule, (list, tuple)):
            for entry in schedule:
                if not (isinstance(entry, (list, tuple)) and len(entry) == 3 and all(_is_int(x) for x in entry)
                        and 1 <= entry[0] <= entry[1] and entry[2] >= 1):
                    out.append(("num_speculative_tokens_per_batch_size",
                                "%s is not [first batch size, last batch size, draft tokens] (integers, first <= "
                                "last, at least 1); write e.g. [[1, 4, 5], [5, 64, 2]]" % _shown(entry)))
                    break
    else:
        schedule = keys.get("draft_len_schedule")
        if isinstance(schedule, dict) and _is_int(max_draft_len):
            first = schedule.get(1, schedule.get("1"))
            if first is None or not _is_int(first) or int(first) != int(max_draft_len):
                out.append(("draft_len_schedule", "must map batch size 1 to the draft length "
                                                  "(specdec_server_max_draft_len %d), got %s; add 1: %d" % (
                                                      int(max_draft_len), "not set" if first is None else first,
                                                      int(max_draft_len))))
        total = keys.get("max_total_draft_tokens")
        draft = keys.get("max_draft_len", max_draft_len)
        if _is_int(total) and _is_int(draft) and total < draft:
            out.append(("max_total_draft_tokens", "%s is below the draft length %s (a chain of max_draft_len drafts "
                                                  "is max_draft_len tokens); set at least %s, or remove it" % (
                                                      total, draft, draft)))
    return out


def problems(engine, version, method, keys, setting, max_draft_len=None, owned=()):
    """One line per problem of the user's extra ``speculative_config`` keys ``keys`` (a mapping) of ``engine``
    (trtllm or vllm) at engine ``version`` (None: not known yet, every version's keys count) for the sparkops
    ``method``. ``setting``: the dotted name of the user's mapping, each line starts with ``setting.KEY:``.
    ``max_draft_len``: the draft length the plan writes. ``owned``: keys the plan reports itself (skipped)."""
    if engine not in TABLES or not isinstance(keys, dict) or method in (None, "none"):
        return []
    table, refused = TABLES[engine]
    name = ENGINE_NAMES[engine]
    parsed = _version(version)
    shown_version = "%s %s" % (name, version) if parsed is not None else name
    lines = []
    for item in sorted(keys, key=str):
        if item in owned:
            continue
        value = keys[item]
        where = "%s.%s" % (setting, item)
        if not isinstance(item, str) or text_problem(item) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", item):
            lines.append("%s: is not a speculative_config key (letters, digits and _); remove it." % (
                "%s.%s" % (setting, _shown(repr(item)[1:-1] if isinstance(item, str) else item))))
            continue
        if item in refused:
            lines.append("%s: %s." % (where, refused[item]))
            continue
        rule = table.get(item)
        if rule is None:
            guess = _closest(item, [k for k, r in table.items() if _known_in(r, parsed)])
            lines.append("%s: not a speculative_config key of %s; %s" % (
                where, shown_version, "did you mean %s?" % guess if guess else
                "remove it (docs/engines.md lists the keys sparkops knows)."))
            continue
        if not _known_in(rule, parsed):
            lines.append("%s: %s names it %s; rename it." % (where, shown_version, rule["instead"])
                         if rule["instead"] else
                         "%s: not known to %s (first in %s); remove it, or use a newer image." % (
                             where, shown_version, rule["since"]))
            continue
        if rule["methods"] and method not in rule["methods"]:
            lines.append("%s: applies only to method %s, not %s (specdec_server_method); remove it." % (
                where, " or ".join(rule["methods"]), method))
            continue
        problem = _type_problem(rule, value)
        if problem:
            lines.append("%s: %s." % (where, problem))
    bad = {line.split(":", 1)[0] for line in lines}
    for item, problem in _relations(engine, {k: v for k, v in keys.items() if "%s.%s" % (setting, k) not in bad},
                                    method, max_draft_len):
        lines.append("%s.%s: %s." % (setting, item, problem))
    return lines


# The setting that holds each engine's extra keys: (setting name, path inside it).
SETTINGS = {"trtllm": ("specdec_server_llm_api_options", ("speculative_config",)),
            "vllm": ("specdec_server_speculative_config", ())}


def settings_problems(settings, engine, version, method, max_draft_len=None, owned=()):
    """``problems`` of the extra keys a deployment's settings give ``engine`` (SETTINGS); a mapping that is not a
    mapping is the plan's to report (nothing here)."""
    if engine not in SETTINGS:
        return []
    name, path = SETTINGS[engine]
    keys = settings.get(name)
    for part in path:
        keys = keys.get(part) if isinstance(keys, dict) else None
    if not isinstance(keys, dict) or not keys:
        return []
    return problems(engine, version, method, keys, ".".join((name,) + path), max_draft_len, owned)
