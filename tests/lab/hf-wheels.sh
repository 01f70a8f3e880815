#!/usr/bin/env bash
# Fetch the huggingface_hub wheels for the lab's platform (x86_64, Python 3.11, glibc 2.36), once, with the
# controller's pip (which knows this machine's index and certificates). Prints the directory.
#   hf-wheels.sh STATE_DIR VERSION          <state>/wheels/huggingface_hub-<version>: what the lab images install
#                                           offline (the `hf` CLI, the pre-provisioned venv of the node image)
#   hf-wheels.sh STATE_DIR VERSION nodes    <state>/wheels/nodes-huggingface_hub-<version>: the same wheels and pip,
#                                           the lab inventory's specdec_server_wheel_dir (the controller ships them to
#                                           the nodes, as an air-gapped controller does: tests reach no index)
# Used by build-images.sh and build-llamacpp.sh.
set -euo pipefail
state=$1 version=$2 kind=${3:-images}
case $kind in
  images) wheels="$state/wheels/huggingface_hub-$version"; extra=() ;;
  nodes) wheels="$state/wheels/nodes-huggingface_hub-$version"; extra=(pip) ;;
  *) echo "hf-wheels.sh: unknown kind $kind (images or nodes)" >&2; exit 2 ;;
esac
if [ ! -f "$wheels/.complete" ]; then
  rm -rf "$wheels"; mkdir -p "$wheels"
  python3 -m pip download --quiet --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any \
    --dest "$wheels" "huggingface_hub==$version" "${extra[@]}" >&2
  touch "$wheels/.complete"
fi
echo "$wheels"
