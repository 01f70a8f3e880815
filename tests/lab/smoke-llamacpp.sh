#!/usr/bin/env bash
# Smoke test of the lab's real engine, loopback only: run sparkops-lab/llamacpp-server with
# `--network none` and the two GGUFs of .lab/gguf mounted read-only, start llama-server with
# real draft-target speculation on 127.0.0.1 inside the container, send one chat completion
# from inside it (python3 urllib) and require llamacpp:spec_decode_num_draft_tokens_total > 0.
#   LAB_STATE_DIR  lab state dir (default: <repo>/.lab)
#   IMAGE          image (default: lab_llamacpp_image of lab_vars.yml)
#   N_MAX          --spec-draft-n-max (default 4)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=${LAB_STATE_DIR:-$(cd "$here/../.." && pwd)/.lab}
image=${IMAGE:-$(sed -n 's/^lab_llamacpp_image: *//p' "$here/lab_vars.yml")}
n_max=${N_MAX:-4}
target=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
draft=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
for f in "$target" "$draft"; do
  [ -s "$state/gguf/$f" ] || { echo "missing $state/gguf/$f: run tests/lab/fetch-gguf.py" >&2; exit 1; }
done
name=sparkops-llamacpp-smoke-$$
trap 'docker rm -f "$name" >/dev/null 2>&1 || true' EXIT
docker run -d --name "$name" --network none -v "$state/gguf:/models:ro" "$image" sleep infinity >/dev/null
docker exec "$name" sh -c "llama-server -m /models/$target -md /models/$draft \
  --spec-type draft-simple --spec-draft-n-max $n_max --spec-draft-n-min 0 -t 2 --poll 0 --spec-draft-poll 0 \
  -c 4096 --metrics --slots --alias sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF --host 127.0.0.1 --port 8080 \
  >/tmp/llama-server.log 2>&1 &"
docker exec -i "$name" python3 - <<'PY'
import json, re, sys, time, urllib.request
base = "http://127.0.0.1:8080"
t0 = time.time()
while True:
    try:
        with urllib.request.urlopen(base + "/health", timeout=5) as r:
            if r.status == 200:
                break
    except Exception:
        pass
    if time.time() - t0 > 180:
        sys.exit("llama-server not healthy after 180 s")
    time.sleep(0.5)
print("healthy after %.1fs" % (time.time() - t0))
body = {"model": "sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF", "temperature": 0, "max_tokens": 128,
        "messages": [{"role": "user", "content": "Write a Python function that checks whether a number is prime."}]}
req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
t1 = time.time()
with urllib.request.urlopen(req, timeout=600) as r:
    out = json.load(r)
print("chat completion in %.1fs: %r" % (time.time() - t1, out["choices"][0]["message"]["content"][:160]))
print("usage:", json.dumps(out.get("usage")))
print("timings:", json.dumps(out.get("timings")))
with urllib.request.urlopen(base + "/v1/models", timeout=10) as r:
    print("models:", [m["id"] for m in json.load(r)["data"]])
with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
    metrics = r.read().decode()
lines = [l for l in metrics.splitlines() if l.startswith("llamacpp:spec_decode")]
print("\n".join(lines))
m = re.search(r"^llamacpp:spec_decode_num_draft_tokens_total\s+(\S+)", metrics, re.M)
if not m or float(m.group(1)) <= 0:
    sys.exit("FAIL: no drafted tokens in /metrics")
print("OK: %s draft tokens" % m.group(1))
PY
