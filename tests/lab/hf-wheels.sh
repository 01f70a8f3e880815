#!/usr/bin/env bash
# Fetch the huggingface_hub wheels the lab images install offline (the `hf` CLI), once, into
# <state>/wheels/huggingface_hub-<version>, with the controller's pip (which knows this machine's
# index and certificates). Prints that directory. Used by build-images.sh and build-llamacpp.sh.
#   hf-wheels.sh STATE_DIR VERSION
set -euo pipefail
state=$1 version=$2
wheels="$state/wheels/huggingface_hub-$version"
if [ ! -f "$wheels/.complete" ]; then
  rm -rf "$wheels"; mkdir -p "$wheels"
  python3 -m pip download --quiet --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any \
    --dest "$wheels" "huggingface_hub==$version" >&2
  touch "$wheels/.complete"
fi
echo "$wheels"
