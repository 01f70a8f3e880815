#!/usr/bin/env bash
# Build the sparkops.specdec lab images and save each engine stand-in as a tarball
# (the trtllm_container role loads it on each node, as on an air-gapped host).
# One engine image per TensorRT-LLM version the stand-in models, all from the same
# Dockerfile and module: only the last layers (ARG/ENV TRT_LLM_VERSION, LABEL) differ.
#   LAB_BASE_IMAGE     optional registry base image (see images/base/build-base.sh)
#   LAB_STATE_DIR      where the tarballs go (default: <repo>/.lab)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=${LAB_STATE_DIR:-$(cd "$here/../.." && pwd)/.lab}
base=sparkops-lab/base:bookworm
# Keep in step with SUPPORTED_VERSIONS in images/engine/sparkops_standin.py (a unit test checks).
engine_versions="1.3.0rc12 1.4.0rc1"
mkdir -p "$state/images"
"$here/images/base/build-base.sh" "$base"
# huggingface_hub wheels for the images, fetched here with the controller's pip (which
# knows this machine's index and certificates) and installed offline in the images.
HF_HUB_VERSION=${HF_HUB_VERSION:-2.4.0}
wheels="$state/wheels/huggingface_hub-$HF_HUB_VERSION"
if [ ! -f "$wheels/.complete" ]; then
  rm -rf "$wheels"; mkdir -p "$wheels"
  python3 -m pip download --quiet --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any \
    --dest "$wheels" "huggingface_hub==$HF_HUB_VERSION"
  touch "$wheels/.complete"
fi
build() {  # build TAG DIR [docker build args...]; prints "changed TAG" when the image ID moved
  local tag=$1 dir=$2 before after ctx
  shift 2
  before=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
  ctx="$state/build/$(basename "$dir")"
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp -a "$dir/." "$ctx/"
  cp -a "$wheels" "$ctx/wheels"
  docker build -q --build-arg BASE_IMAGE="$base" --build-arg HF_HUB_VERSION="$HF_HUB_VERSION" "$@" -t "$tag" "$ctx" >/dev/null
  after=$(docker image inspect -f '{{.Id}}' "$tag")
  [ "$before" = "$after" ] || echo "changed $tag"
}
build sparkops-lab/node:bookworm "$here/images/node"
build sparkops-lab/hf-hub:latest "$here/images/hub"
for version in $engine_versions; do
  engine=sparkops-lab/trtllm-standin:$version
  build "$engine" "$here/images/engine" --build-arg TRT_LLM_VERSION="$version"
  id=$(docker image inspect -f '{{.Id}}' "$engine")
  tar="$state/images/trtllm-standin-$version.tar"
  if [ ! -s "$tar" ] || [ "$(cat "$tar.id" 2>/dev/null)" != "$id" ]; then
    docker save -o "$tar.tmp" "$engine" && chmod 0644 "$tar.tmp" && mv "$tar.tmp" "$tar" && echo "$id" > "$tar.id"
    echo "changed $tar"
  fi
done
