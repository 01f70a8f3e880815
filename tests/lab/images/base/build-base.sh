#!/usr/bin/env bash
# Build the lab's Debian base image without a container registry.
#
# LAB_BASE_IMAGE  use this image instead (e.g. debian:bookworm-slim or ubuntu:24.04
#                 when a registry is reachable); it is tagged as TAG and nothing is built.
# LAB_DEBIAN_MIRROR  Debian mirror for debootstrap (default http://deb.debian.org/debian).
set -euo pipefail
tag=${1:?usage: build-base.sh TAG}
if [ -n "${LAB_BASE_IMAGE:-}" ]; then
  docker image inspect "$LAB_BASE_IMAGE" >/dev/null 2>&1 || docker pull "$LAB_BASE_IMAGE"
  docker tag "$LAB_BASE_IMAGE" "$tag"
  exit 0
fi
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag present"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install -y debootstrap" >&2; exit 1; }
dir=$(mktemp -d /tmp/sparkops-lab-rootfs.XXXXXX)
trap 'rm -rf "$dir"' EXIT
debootstrap --variant=minbase --include=python3,ca-certificates bookworm "$dir" \
  "${LAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  "${LAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}" > "$dir/etc/apt/sources.list.d/debian.sources"
rm -f "$dir/etc/apt/sources.list"
chroot "$dir" apt-get clean
tar -C "$dir" -c . | docker import -c 'CMD ["/bin/bash"]' - "$tag" >/dev/null
echo "built base image $tag"
