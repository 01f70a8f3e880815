"""The tool-call smoke test's verdict (plugin_utils/_toolcall.py) on answers shaped like trtllm-serve's."""

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _toolcall


def answer(tool_calls=None, content=None, reasoning=None, finish="tool_calls"):
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "openai/gpt-oss-120b",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content, "reasoning_content": reasoning,
                                     "tool_calls": tool_calls if tool_calls is not None else []}}]}


def call(name="get_weather", arguments='{"city": "Paris"}'):
    return {"id": "chatcmpl-tool-1", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_request_is_an_openai_tool_call_request():
    body = _toolcall.request("openai/gpt-oss-120b", 256)
    assert body["model"] == "openai/gpt-oss-120b"
    assert body["max_tokens"] == 256 and body["temperature"] == 0 and body["tool_choice"] == "auto"
    (tool,) = body["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == _toolcall.TOOL_NAME
    assert tool["function"]["parameters"]["required"] == ["city"]
    json.dumps(body)  # serialisable as the uri task sends it


def test_a_call_with_json_arguments_passes():
    v = _toolcall.verdict(answer([call()], reasoning="I should call get_weather."))
    assert v["ok"] is True and v["symptom"] is None
    assert v["name"] == "get_weather" and v["arguments"] == {"city": "Paris"}
    assert v["finish_reason"] == "tool_calls"


def test_arguments_as_an_object_pass_too():
    assert _toolcall.verdict(answer([call(arguments={"city": "Paris", "unit": "celsius"})]))["ok"] is True


def test_issue_16377_empty_tool_calls_and_content():
    # The shape reported in NVIDIA/TensorRT-LLM#16377: reasoning says it calls the tool, nothing else.
    v = _toolcall.verdict(answer([], content="", reasoning="The user wants weather. I should call get_weather.",
                                 finish="stop"))
    assert v["ok"] is False and v["symptom"] == "empty"
    assert "16377" in v["message"] and "specdec_server_method: none" in v["message"]
    assert v["message"].startswith("specdec_server_tool_smoke_test:") and "\n" not in v["message"]


def test_corrupted_channel_tokens():
    v = _toolcall.verdict(answer([], content="<|channel|>!!!!!!!!!!!!", finish="length"))
    assert v["symptom"] == "corrupted" and "8615" in v["message"]


@pytest.mark.parametrize("resp,symptom", [
    (answer([], content="It is sunny in Paris.", finish="stop"), "text_only"),
    (answer([], content="Let me think about the weather in", finish="length"), "length"),
    (answer([call(name="get_time")]), "wrong_function"),
    (answer([call(arguments="{city: Paris")]), "bad_arguments"),
    (answer([call(arguments='{"town": "Paris"}')]), "bad_arguments"),
    (answer([call(arguments="[]")]), "bad_arguments"),
    ({"object": "error", "message": "boom"}, "no_answer"),
    ({"choices": []}, "no_answer"),
    (None, "no_answer"),
])
def test_failures_name_their_symptom(resp, symptom):
    v = _toolcall.verdict(resp)
    assert v["ok"] is False and v["symptom"] == symptom
    assert v["message"].startswith("specdec_server_tool_smoke_test:") and "\n" not in v["message"]


@pytest.mark.parametrize("mode,gpt_oss,run", [
    ("auto", True, True), ("auto", False, False), ("always", False, True), ("never", True, False),
])
def test_wanted(mode, gpt_oss, run):
    got, why = _toolcall.wanted(mode, gpt_oss)
    assert got is run and why
