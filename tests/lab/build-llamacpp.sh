#!/usr/bin/env bash
# Build the lab's REAL engine image, llama.cpp `llama-server` (CPU), from the llama.cpp tree
# vendored in the PyPI sdist of llama-cpp-python, and save it as a tarball beside the
# TensorRT-LLM stand-ins. The sdist is fetched once with the controller's pip and cached
# under the lab state dir; docker's layer cache makes a second run take seconds (the first
# compile takes 10-17 min on 2 cores). Prints "changed ..." when the image or tarball moved.
#   LAB_STATE_DIR            lab state dir (default: <repo>/.lab)
#   LLAMA_CPP_PYTHON_VERSION sdist to take llama.cpp from (default 0.3.36)
#   HF_HUB_VERSION           huggingface_hub for the `hf` CLI in the image (default 2.4.0)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=${LAB_STATE_DIR:-$(cd "$here/../.." && pwd)/.lab}
base=sparkops-lab/base:bookworm
pyver=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
HF_HUB_VERSION=${HF_HUB_VERSION:-2.4.0}
mkdir -p "$state/src" "$state/images" "$state/build"
"$here/images/base/build-base.sh" "$base" >/dev/null

# 1. The sdist (source only: --no-binary; never installed).
sdist="$state/src/llama_cpp_python-$pyver.tar.gz"
if [ ! -s "$sdist" ]; then
  python3 -m pip download --quiet --no-deps --no-binary :all: --dest "$state/src" "llama-cpp-python==$pyver"
fi
src="$state/src/llama_cpp_python-$pyver"
if [ ! -f "$src/.unpacked" ]; then
  rm -rf "$src"
  tar -C "$state/src" -xzf "$sdist"
  touch "$src/.unpacked"
fi
tree="$src/vendor/llama.cpp"
[ -f "$tree/tools/server/CMakeLists.txt" ] || { echo "no llama.cpp server tree in $sdist" >&2; exit 1; }
# The llama.cpp commit the sdist vendors: first "llama.cpp@<hash>" of its CHANGELOG section.
commit=$(awk -v v="## [$pyver]" '$0 == v {f=1; next} f && /^## \[/ {exit} f' "$src/CHANGELOG.md" \
  | grep -o 'llama\.cpp@[0-9a-f]\{7,40\}' | head -n1 | cut -d@ -f2)
[ -n "$commit" ] || { echo "cannot find the llama.cpp commit of llama-cpp-python $pyver in its CHANGELOG" >&2; exit 1; }
tag=sparkops-lab/llamacpp-server:$commit
tar="$state/images/llamacpp-server-$commit.tar"

# 2. huggingface_hub wheels for the `hf` CLI (same cache as build-images.sh).
wheels=$("$here/hf-wheels.sh" "$state" "$HF_HUB_VERSION")

# 3. Build context: Dockerfile + the tree (hard links, no copy) + wheels.
ctx="$state/build/llamacpp"
rm -rf "$ctx"; mkdir -p "$ctx"
cp -a "$here/images/llamacpp/." "$ctx/"
cp -al "$tree" "$ctx/llama.cpp" 2>/dev/null || cp -a "$tree" "$ctx/llama.cpp"
rm -rf "$ctx/llama.cpp/.git"
cp -a "$wheels" "$ctx/wheels"
before=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
log="$state/build/llamacpp-build.log"
started=$(date +%s)
if [ -z "$before" ]; then
  echo "llama-server image $tag: compiling llama.cpp $commit (first build: 10-17 min on 2 cores; docker's layer" \
    "cache makes later builds take seconds); progress every ${LAB_PROGRESS_INTERVAL:-30}s, full log: $log"
fi
docker build --build-arg BASE_IMAGE="$base" --build-arg HF_HUB_VERSION="$HF_HUB_VERSION" \
  --build-arg LLAMA_CPP_COMMIT="$commit" --build-arg LLAMA_CPP_PYTHON_VERSION="$pyver" \
  -t "$tag" "$ctx" >"$log" 2>&1 &
build_pid=$!
# Progress: the build's last step (docker's "Step N/M") and cmake's last percentage, at a steady cadence.
while kill -0 "$build_pid" 2>/dev/null; do
  for _ in $(seq 1 "${LAB_PROGRESS_INTERVAL:-30}"); do kill -0 "$build_pid" 2>/dev/null || break 2; sleep 1; done
  step=$(grep -o '^Step [0-9]*/[0-9]*' "$log" | tail -n1 || true)
  pct=$(grep -o '^\[ *[0-9]*%\]' "$log" | tail -n1 | tr -d '[] ' || true)
  echo "llama-server image: $(( $(date +%s) - started ))s elapsed${step:+, $step}${pct:+, compile $pct}"
done
if ! wait "$build_pid"; then
  tail -n 40 "$log" >&2
  echo "llama-server image build failed (full log: $log)" >&2
  exit 1
fi
echo "llama-server image $tag ready in $(( $(date +%s) - started ))s (log: $log)"
after=$(docker image inspect -f '{{.Id}}' "$tag")
[ "$before" = "$after" ] || echo "changed $tag"

# 4. Tarball for the nodes, re-saved only when the image ID moved.
if [ ! -s "$tar" ] || [ "$(cat "$tar.id" 2>/dev/null)" != "$after" ]; then
  docker save -o "$tar.tmp" "$tag" && chmod 0644 "$tar.tmp" && mv "$tar.tmp" "$tar" && echo "$after" > "$tar.id"
  echo "changed $tar"
fi
