# -*- coding: utf-8 -*-
"""sparkops.specdec.specdec_loadgen against the fake llama-server of test_specdec_loadgen, made to check an API key
as llama-server does with --api-key-file (every path but /health needs "Authorization: Bearer <key>", else 401):
the benchmark's load generator sends specdec_api_key on every request and metrics read, and never returns it."""

from __future__ import annotations

import json

import pytest

from ansible_collections.sparkops.specdec.tests.unit.plugins.modules import test_specdec_loadgen as tl

KEY = "lab-api-key-0123456789abcdef"


@pytest.fixture
def keyed_server():
    fake = tl.Fake()
    fake.metrics = [tl.fixture_text("llamacpp-metrics-before.txt"), tl.fixture_text("llamacpp-metrics-after.txt")]
    fake.auth = []
    base = tl.make_handler(fake)

    class Keyed(base):
        def _refuse(self):
            fake.auth.append((self.command, self.path, self.headers.get("Authorization")))
            if self.path in ("/health", "/v1/health") or self.headers.get("Authorization") == "Bearer " + KEY:
                return False
            if self.command == "POST":
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(401, json.dumps({"error": {"message": "Invalid API Key", "type": "authentication_error",
                                                  "code": 401}}))
            return True

        def do_GET(self):
            if not self._refuse():
                base.do_GET(self)

        def do_POST(self):
            if not self._refuse():
                base.do_POST(self)

    with tl.serving(fake, Keyed):
        yield fake


def test_every_request_carries_the_key_and_the_result_does_not(keyed_server):
    result = tl.run({"url": keyed_server.url, "prompts": ["x"], "warmup_requests": 0, "engine": "llamacpp",
                     "api_key": KEY})
    assert all(r["ok"] for r in result["requests"])
    assert keyed_server.auth and {a for _c, _p, a in keyed_server.auth} == {"Bearer " + KEY}
    assert {p for _c, p, _a in keyed_server.auth} >= {"/v1/models", "/metrics", "/v1/chat/completions"}
    assert KEY not in json.dumps(result)


def test_without_the_key_the_server_refuses(keyed_server):
    result = tl.run({"url": keyed_server.url, "prompts": ["x"], "warmup_requests": 0, "engine": "llamacpp"},
                    expect="fail")
    assert "401" in result["msg"]
    assert {a for _c, _p, a in keyed_server.auth} == {None}
