# Run on a head by molecule/layouts verify (docker exec ... python3 -c): one chat completion from the server on
# loopback; prints the answer's text (the engine stand-in names the MPI world it was started in).
import json
import urllib.request
body = {"model": "nvidia/Qwen3-235B-A22B-FP4", "messages": [{"role": "user", "content": "Paris is great because"}],
        "max_tokens": 64}
request = urllib.request.Request("http://127.0.0.1:8355/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
print(json.load(urllib.request.urlopen(request, timeout=30))["choices"][0]["message"]["content"])
