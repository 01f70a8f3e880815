# -*- coding: utf-8 -*-
"""sparkops.specdec.specdec_loadgen against a fake llama-server on 127.0.0.1 (loopback only).

The fake streams /v1/chat/completions in llama.cpp's shape (ggml-org/llama.cpp
tools/server/server-task.cpp, to_json_oaicompat_chat_stream at commit 00efb3e184262872916bf136b3df63c1822a19bd:
one chunk per token delta, a chunk with finish_reason and an empty delta, with include_usage a chunk with
empty choices and usage, the timings object on the last chunk, then data: [DONE]) and serves the
fixture metrics texts at /metrics. Tokens come in bursts (speculation), with a pause between them, so
the recorded chunk times are checked by ORDER and count, never by duration."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible.module_utils import basic

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench
from ansible_collections.sparkops.specdec.plugins.modules import specdec_loadgen
from ansible_collections.sparkops.specdec.tests.unit.plugins.modules.conftest import module_failure, run_module

FIX = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'bench')
# How long a held chat request waits for its partner (Fake.pair_from). A module that keeps two requests in flight
# sends the partner at once; only one that sends them one by one lets this run out (the test then fails on
# max_in_flight, after this wait, instead of hanging).
PAIR_WAIT = 30


class Fake(object):
    def __init__(self):
        self.bodies = []
        self.metrics = []  # texts served in turn by /metrics
        self.chat_status = 200
        self.words = ['def', ' f', '(x', '):', ' return', ' x']
        self.burst = 3
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.truncate = False
        # From the chat request of this index on (0-based, in arrival order), each one is held before its answer
        # until a second one is in flight, two at a time (None: none is held). So a client that keeps two requests
        # in flight is SEEN to, whatever the scheduling, and one that does not leaves max_in_flight at 1.
        self.pair_from = None
        self.pairs = threading.Barrier(2)


def make_handler(fake):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *args):
            pass

        def _send(self, status, body, ctype='application/json'):
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == '/v1/models':
                self._send(200, json.dumps({'object': 'list', 'data': [{'id': 'qwen2.5-coder-1.5b'}]}))
            elif self.path == '/metrics' and fake.metrics:
                text = fake.metrics.pop(0) if len(fake.metrics) > 1 else fake.metrics[0]
                self._send(200, text, 'text/plain; version=0.0.4')
            else:
                self._send(404, json.dumps({'error': {'code': 404, 'message': 'File Not Found'}}))

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
            with fake.lock:
                fake.bodies.append(body)
                arrival = len(fake.bodies) - 1
            if fake.chat_status != 200:
                self._send(fake.chat_status, json.dumps({'error': {'message': 'context too long'}}))
                return
            with fake.lock:
                fake.in_flight += 1
                fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
            answered = []

            def answer():
                # The request leaves the count BEFORE the client can see its end ([DONE] or the stream's close):
                # a client that sends its next request on [DONE] must not find this one still counted.
                if not answered:
                    answered.append(True)
                    with fake.lock:
                        fake.in_flight -= 1
            try:
                if fake.pair_from is not None and arrival >= fake.pair_from:
                    with contextlib.suppress(threading.BrokenBarrierError):
                        fake.pairs.wait(PAIR_WAIT)  # broken: no partner came, max_in_flight stays 1
                self.send_response(200)
                self.send_header('Content-Type', 'text/event-stream')
                self.send_header('Transfer-Encoding', 'chunked')
                self.end_headers()

                def event(obj):
                    data = ('data: %s\n\n' % (obj if isinstance(obj, str) else json.dumps(obj))).encode()
                    self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
                    self.wfile.flush()

                base = {'id': 'chatcmpl-1', 'object': 'chat.completion.chunk', 'model': body['model'], 'created': 1}
                event(dict(base, choices=[{'index': 0, 'finish_reason': None,
                                           'delta': {'role': 'assistant', 'content': None}}]))
                for i, word in enumerate(fake.words):
                    if i and i % fake.burst == 0:
                        time.sleep(0.02)  # the next verification step
                    choice = {'index': 0, 'finish_reason': None, 'delta': {'content': word}}
                    if body.get('logprobs'):  # llama-server: one content entry per token, top_logprobs runner-ups
                        top = [{'token': word, 'logprob': -0.5, 'bytes': list(word.encode())},
                               {'token': ' alt', 'logprob': -1.25, 'bytes': list(b' alt')}][:body['top_logprobs']]
                        choice['logprobs'] = {'content': [{'id': i, 'token': word, 'logprob': -0.5,
                                                           'bytes': list(word.encode()), 'top_logprobs': top}]}
                    event(dict(base, choices=[choice]))
                if not fake.truncate:
                    event(dict(base, choices=[{'index': 0, 'finish_reason': 'stop', 'delta': {}}]))
                    event(dict(base, choices=[], usage={'completion_tokens': len(fake.words), 'prompt_tokens': 12,
                                                        'total_tokens': 12 + len(fake.words)},
                               timings={'prompt_n': 12, 'predicted_n': len(fake.words), 'predicted_per_second': 20.5,
                                        'draft_n': 4, 'draft_n_accepted': 3}))
                    answer()
                    event('[DONE]')
                answer()
                self.wfile.write(b'0\r\n\r\n')
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client may close as soon as it has read [DONE]
            finally:
                answer()

    return Handler


@contextlib.contextmanager
def serving(fake, handler):
    """Serve ``handler`` on a loopback port in a thread while the block runs; ``fake.url`` is its base URL."""
    httpd = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.url = 'http://127.0.0.1:%d' % httpd.server_address[1]
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server():
    fake = Fake()
    with serving(fake, make_handler(fake)):
        yield fake


def fixture_text(name):
    with open(os.path.join(FIX, name)) as handle:
        return handle.read()


def run(args, expect='exit'):
    return run_module(specdec_loadgen, args) if expect == 'exit' else module_failure(specdec_loadgen, args)


def test_streams_records_and_scrapes(server, loopback_only, tmp_path, monkeypatch):
    proc = tmp_path / 'proc'
    (proc / 'pressure').mkdir(parents=True)
    (proc / 'pressure' / 'cpu').write_text('some avg10=1.00 avg60=0.50 avg300=0.10 total=123\n')
    (proc / 'meminfo').write_text('MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n')
    monkeypatch.setattr(specdec_loadgen, 'PROC', str(proc))
    server.metrics = [fixture_text('llamacpp-metrics-before.txt'), fixture_text('llamacpp-metrics-after.txt')]
    server.pair_from = 1  # the warm-up (request 0) goes alone; the 4 measured ones are answered two by two
    result = run({'url': server.url, 'engine': 'llamacpp', 'concurrency': 2, 'num_requests': 4, 'max_tokens': 16,
                  'prompts': ['Write f.', {'id': 'sys', 'system': 'Be brief.', 'prompt': 'Hi', 'max_tokens': 8}],
                  'extra_body': {'ignore_eos': True}, 'warmup_requests': 1})
    assert result['changed'] is False and result['model'] == 'qwen2.5-coder-1.5b'
    assert result['warmup'] == 1 and len(server.bodies) == 5
    assert result['metrics_path'] == '/metrics'
    assert 'spec_decode_num_draft_tokens_total 108' in result['metrics_before']
    assert 'spec_decode_num_draft_tokens_total 540' in result['metrics_after']
    body = server.bodies[-1]
    assert body['stream'] is True and body['stream_options'] == {'include_usage': True}
    assert body['temperature'] == 0.0 and body['seed'] == 0 and body['ignore_eos'] is True
    # Requests run two at a time, so the server may receive them in either order: find them by content.
    sys_bodies = [b for b in server.bodies if b['messages'][0]['role'] == 'system']
    assert len(sys_bodies) == 2
    assert sys_bodies[0]['messages'] == [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi'}]
    assert sys_bodies[0]['max_tokens'] == 8 and server.bodies[0]['max_tokens'] == 16
    assert server.max_in_flight == 2 and not server.pairs.broken  # two in flight at once, never more
    reqs = result['requests']
    assert [r['prompt_id'] for r in reqs] == ['0', 'sys', '0', 'sys']
    for rec in reqs:
        assert rec['ok'] and rec['error'] is None
        assert rec['text'] == 'def f(x): return x'
        assert rec['output_tokens'] == 6 and rec['prompt_tokens'] == 12 and rec['finish_reason'] == 'stop'
        assert len(rec['chunk_times']) == 6  # the role chunk has no content and is not counted
        assert rec['ttft'] == rec['chunk_times'][0]
        assert rec['chunk_times'] == sorted(rec['chunk_times']) and rec['e2e'] >= rec['chunk_times'][-1]
        assert rec['timings']['draft_n'] == 4
    assert result['wall_seconds'] > 0
    assert result['node']['mem_available_bytes_before'] == 8000000 * 1024
    assert result['node']['cpu_pressure_after'].startswith('some avg10=1.00')


def test_check_mode_sends_nothing(server):
    result = run({'url': server.url, 'prompts': ['x'], '_ansible_check_mode': True})
    assert result['skipped'] is True and result['requests'] == [] and server.bodies == []


def test_unreachable_endpoint_is_one_message(closed_port):
    result = run({'url': 'http://127.0.0.1:%d' % closed_port, 'prompts': ['x']}, expect='fail')
    assert result['msg'].startswith('cannot reach http://127.0.0.1:%d/v1/models' % closed_port)
    assert 'run this module on the head node' in result['msg']


def test_http_error_fails_with_the_first_error_and_keeps_records(server):
    server.chat_status = 400
    result = run({'url': server.url, 'prompts': ['x'], 'warmup_requests': 0, 'metrics_path': ''}, expect='fail')
    assert result['msg'].startswith('1 of 1 requests to %s/v1/chat/completions failed' % server.url)
    assert 'HTTP 400' in result['msg'] and 'context too long' in result['msg']
    assert result['requests'][0]['ok'] is False


def test_stream_without_done_or_usage_fails(server):
    server.truncate = True
    result = run({'url': server.url, 'prompts': ['x'], 'warmup_requests': 0, 'metrics_path': ''}, expect='fail')
    assert 'without [DONE]' in result['msg']


def test_missing_metrics_names_the_flags(server):
    result = run({'url': server.url, 'prompts': ['x'], 'engine': 'trtllm', 'warmup_requests': 0}, expect='fail')
    assert 'no Prometheus metrics' in result['msg'] and 'return_perf_metrics: true' in result['msg']
    assert '/prometheus/metrics: HTTP 404' in result['msg']


def test_auto_engine_falls_back_to_metrics(server):
    server.metrics = [fixture_text('trtllm-prometheus-before.txt')]
    result = run({'url': server.url, 'prompts': ['x'], 'warmup_requests': 0})
    assert result['metrics_path'] == '/metrics' and result['metrics_before'].startswith('# PROVENANCE')


def test_record_dir_keeps_the_raw_stream(server, tmp_path):
    server.metrics = [fixture_text('llamacpp-metrics-before.txt'), fixture_text('llamacpp-metrics-after.txt')]
    out = tmp_path / 'rec'
    result = run({'url': server.url, 'prompts': ['x'], 'warmup_requests': 0, 'record_dir': str(out),
                  'record_text': False})
    assert result['changed'] is True and 'text' not in result['requests'][0]
    raw = (out / 'request-0000.sse').read_text()
    assert raw.count('data: ') == 10 and raw.rstrip().endswith('data: [DONE]')
    assert 'draft_n_accepted' in raw
    assert (out / 'metrics-after.txt').read_text().count('540') == 1
    assert json.loads((out / 'run.json').read_text())['model'] == 'qwen2.5-coder-1.5b'


def test_parse_sse_line():
    assert specdec_loadgen.parse_sse_line(b': keep-alive\n') is None
    assert specdec_loadgen.parse_sse_line(b'data: [DONE]\r\n') == 'done'
    assert specdec_loadgen.parse_sse_line('data: {"a": 1}\n') == {'a': 1}
    assert specdec_loadgen.parse_sse_line(b'error: {"code": 500}\n') == {'error': {'code': 500}}


def test_top_logprobs_records_each_token_and_its_runner_ups(server):
    server.metrics = [fixture_text('llamacpp-metrics-before.txt')]
    got = run({'url': server.url, 'prompts': ['x'], 'num_requests': 1, 'warmup_requests': 0, 'top_logprobs': 2})
    body = server.bodies[-1]
    assert body['logprobs'] is True and body['top_logprobs'] == 2
    rec = got['requests'][0]
    assert ''.join(t['token'] for t in rec['tokens']) == rec['text'] == 'def f(x): return x'
    assert rec['tokens'][1] == {'token': ' f', 'logprob': -0.5, 'top': [[' f', -0.5], [' alt', -1.25]]}


def test_no_logprobs_asked_by_default_nor_without_text(server):
    server.metrics = [fixture_text('llamacpp-metrics-before.txt')]
    got = run({'url': server.url, 'prompts': ['x'], 'num_requests': 1, 'warmup_requests': 0})
    assert "logprobs" not in server.bodies[-1] and got['requests'][0]['tokens'] is None
    got = run({'url': server.url, 'prompts': ['x'], 'num_requests': 1, 'warmup_requests': 0, 'top_logprobs': 2,
               'record_text': False})
    assert "logprobs" not in server.bodies[-1] and 'tokens' not in got['requests'][0]


@pytest.mark.parametrize('args,msg', [
    ({'top_logprobs': 21}, 'top_logprobs must be 0 (none) to 20'),
    ({'concurrency': 0}, 'concurrency must be at least 1'),
    ({'prompts': []}, 'prompts is empty'),
    ({'prompts': [{'id': 'x'}]}, 'neither prompt nor messages'),
    ({'url': 'ftp://x'}, 'url must be http'),
])
def test_bad_options(args, msg, server):
    full = {'url': server.url, 'prompts': ['x']}
    full.update(args)
    assert msg in run(full, expect='fail')['msg']


@pytest.mark.parametrize('name', ['short', 'long'])
def test_shipped_prompt_sets_are_valid_loadgen_prompts(name):
    root = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'specdec_benchmark', 'files',
                        'prompts')
    with open(os.path.join(root, name + '.json')) as handle:
        doc = json.load(handle)
    assert doc['name'] == name and doc['description']
    jobs = specdec_loadgen.build_requests(doc['prompts'], None, 128)
    ids = [p['id'] for p in doc['prompts']]
    assert len(jobs) == len(ids) == len(set(ids)) >= 4
    assert any(i.startswith(('code', 'long-code')) for i in ids) and any('general' in i for i in ids)


def test_gpu_state_from_nvidia_smi_where_it_exists(server, loopback_only, monkeypatch):
    # The answer of a DGX Spark-like GPU to the query (GB10 reports no memory clock; power may be [N/A]).
    answers = iter(['0, 2418, 41, 12.50, 3\n', '0, 2505, 47, [N/A], 97\n'])
    calls = []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        return 0, next(answers), ''
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **kw: '/usr/bin/' + name)
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    server.metrics = [fixture_text('llamacpp-metrics-before.txt'), fixture_text('llamacpp-metrics-after.txt')]
    result = run({'url': server.url, 'engine': 'llamacpp', 'num_requests': 1, 'max_tokens': 8, 'prompts': ['Hi'],
                  'warmup_requests': 0})
    assert calls[0][1] == '--query-gpu=index,clocks.sm,temperature.gpu,power.draw,utilization.gpu'
    assert result['node']['gpu_before'].startswith('0, 2418') and '[N/A]' in result['node']['gpu_after']
    gpus = _bench.parse_gpu_query(result['node']['gpu_after'])
    assert gpus == [{'index': 0, 'sm_clock_mhz': 2505, 'temperature_c': 47, 'power_w': None, 'utilization_percent': 97}]
    figures = _bench._node_figures({'node': result['node']})
    assert figures['gpu_sm_clock_mhz_before'] == 2418 and figures['gpu_power_w_before'] == 12.5
    assert figures['gpu_power_w_after'] is None


def test_no_nvidia_smi_records_no_gpu(server, loopback_only, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **kw: None)
    server.metrics = [fixture_text('llamacpp-metrics-before.txt'), fixture_text('llamacpp-metrics-after.txt')]
    result = run({'url': server.url, 'engine': 'llamacpp', 'num_requests': 1, 'max_tokens': 8, 'prompts': ['Hi'],
                  'warmup_requests': 0})
    assert result['node']['gpu_before'] is None and result['node']['gpu_after'] is None
