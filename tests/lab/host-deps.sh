#!/usr/bin/env bash
# Make sure this machine has a running Docker engine and debootstrap (Debian/Ubuntu).
# Installs docker.io and debootstrap from the distribution when they are missing, and
# starts dockerd in the background when no engine answers and systemd is not running.
set -euo pipefail
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then
    $sudo systemctl start docker
  else
    log=${TMPDIR:-/tmp}/sparkops-dockerd.log
    # Close every inherited descriptor above 2 first: a lock held by the caller (e.g. the lab's
    # `flock /tmp/sparkops-lab.lock make lab-up`) must not live on in the long-running dockerd.
    $sudo bash -c 'for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null
      nohup dockerd >"$0" 2>&1 </dev/null &' "$log"
  fi
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "Docker engine did not start (see $log)" >&2; exit 1; }
fi
