# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filters of the specdec_server role's tool-call smoke test (the logic is in plugin_utils/_toolcall.py).

- ``model | sparkops.specdec.tool_smoke_request(max_tokens)``: the chat-completions body.
- ``response_json | sparkops.specdec.tool_call_verdict``: ``{ok, symptom, name, arguments, finish_reason,
  message}``.
"""

from __future__ import annotations

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _toolcall


def tool_smoke_request(model, max_tokens=512):
    return _toolcall.request(str(model), int(max_tokens))


def tool_call_verdict(response):
    return _toolcall.verdict(response)


class FilterModule(object):
    def filters(self):
        return {"tool_smoke_request": tool_smoke_request, "tool_call_verdict": tool_call_verdict}
