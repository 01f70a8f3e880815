# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE: the tool-call smoke test of a deployed server (role specdec_server).

Why: NVIDIA/TensorRT-LLM#16377 (open since July 2026): gpt-oss-120b with Eagle3 speculative decoding on
trtllm-serve answers a tool call with an empty ``tool_calls`` list and empty ``content`` (the
``reasoning_content`` still says it decided to call the tool); with speculation off it works. Related:
#8615 (``<|channel|>!!!!`` runs of corrupted tokens) and #10612 (the Harmony channel sequence not generated).
Source: ../shared/reference/trtllm-versions-bench.md section 2.3.

- ``wanted(mode, tiktoken)``: whether the deployment runs the test (``auto``: gpt-oss, i.e. Harmony targets).
- ``request(model, max_tokens)``: the OpenAI chat-completions body (one ``get_weather`` function, tool_choice
  ``auto``, temperature 0).
- ``verdict(response)``: whether the answer is a usable call of that function, the symptom when not, and a
  one-line message naming the setting and the fixes.
"""

from __future__ import annotations

import json
import re

MODES = ("auto", "always", "never")
SETTING = "specdec_server_tool_smoke_test"
TOOL_NAME = "get_weather"
REQUIRED_ARGS = ("city",)
PROMPT = "What is the weather in Paris right now? Use the get_weather tool."
TOOL = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": list(REQUIRED_ARGS),
        },
    },
}
# Harmony's corrupted-channel symptom (#8615): a run of exclamation marks.
_BANG_RUN = re.compile(r"!{4,}")


def wanted(mode, tiktoken):
    """(run, why) for the setting ``mode`` and a plan whose target is gpt-oss (``tiktoken`` true)."""
    mode = str(mode)
    if mode == "always":
        return True, "%s is always" % SETTING
    if mode == "never":
        return False, "%s is never" % SETTING
    if tiktoken:
        return True, "the target is gpt-oss (known TensorRT-LLM issue #16377: empty tool calls with EAGLE-3)"
    return False, "the target is not gpt-oss (%s auto tests tool calls on gpt-oss only)" % SETTING


def request(model, max_tokens=512):
    """The request body of the smoke test."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "tools": [TOOL],
        "tool_choice": "auto",
        "max_tokens": int(max_tokens),
        "temperature": 0,
    }


def _message(response):
    if not isinstance(response, dict):
        return None, None
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, None
    msg = choices[0].get("message")
    return (msg if isinstance(msg, dict) else None), choices[0].get("finish_reason")


def verdict(response):
    """Check a chat-completions answer to ``request()``.

    Returns ``{ok, symptom, name, arguments, finish_reason, message}``; ``symptom`` is one of ``None``,
    ``no_answer``, ``empty`` (#16377), ``corrupted`` (#8615), ``length``, ``text_only``, ``wrong_function``,
    ``bad_arguments``.
    """
    msg, finish = _message(response)
    out = {"ok": False, "symptom": None, "name": None, "arguments": None, "finish_reason": finish, "message": ""}
    fixes = ("serve without speculation (specdec_server_method: none) or another image, or set %s: never "
             "if this endpoint serves no tool calls" % SETTING)
    if msg is None:
        out.update(symptom="no_answer", message="%s: the tool-call request got no chat message back (%s); check "
                   "the server log." % (SETTING, json.dumps(response)[:200]))
        return out
    calls = msg.get("tool_calls") or []
    content = msg.get("content") or ""
    reasoning = msg.get("reasoning_content") or ""
    if not isinstance(calls, list):
        calls = []
    if _BANG_RUN.search(str(content)) or _BANG_RUN.search(str(reasoning)):
        out.update(symptom="corrupted", message="%s: the answer holds a run of '!' (corrupted Harmony channel "
                   "tokens, TensorRT-LLM issue #8615); %s." % (SETTING, fixes))
        return out
    if not calls:
        if not str(content).strip():
            out.update(symptom="empty", message="%s: the server answered the tool call with no tool_calls and no "
                       "content (known TensorRT-LLM issue #16377 with EAGLE-3 on gpt-oss); %s." % (SETTING, fixes))
        elif finish == "length":
            out.update(symptom="length", message="%s: the answer hit max_tokens before any tool call; raise "
                       "specdec_server_tool_smoke_max_tokens." % SETTING)
        else:
            out.update(symptom="text_only", message="%s: the server answered in text instead of calling %s (does "
                       "it parse tool calls? trtllm-serve needs --tool_parser for models other than gpt-oss); %s."
                       % (SETTING, TOOL_NAME, fixes))
        return out
    fn = calls[0].get("function") if isinstance(calls[0], dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    out["name"] = name
    if name != TOOL_NAME:
        out.update(symptom="wrong_function", message="%s: the server called %r instead of %s; %s."
                   % (SETTING, name, TOOL_NAME, fixes))
        return out
    raw = fn.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        args = None
    missing = [k for k in REQUIRED_ARGS if not isinstance(args, dict) or k not in args]
    if not isinstance(args, dict) or missing:
        out.update(symptom="bad_arguments", message="%s: the call of %s has arguments %s that are not a JSON "
                   "object with %s; %s." % (SETTING, TOOL_NAME, str(raw)[:100], ", ".join(REQUIRED_ARGS), fixes))
        return out
    out.update(ok=True, arguments=args,
               message="%s: the server called %s with %s." % (SETTING, TOOL_NAME, json.dumps(args, sort_keys=True)))
    return out
