#!/bin/sh
# Entrypoint of a simulated DGX Spark (sparkops.specdec lab).
#  1. Renames the Docker-network interfaces to the ConnectX-7 names and adds the
#     second (uncabled) port as dummy interfaces that stay down.
#  2. Installs the lab's pinned SSH host key and the controller's authorized key.
#  3. Applies the netplan files as systemd-networkd would at boot (networkd_boot.py).
#  4. Loads the ufw rules when ufw is enabled, as ufw.service does at boot.
#  5. Starts a Docker engine (Docker-in-Docker) and then sshd in the foreground.
# LAB_DOWN_IFS: pairs of interface names to create down (port 0 of the CX-7).
# LAB_IFMAP: space-separated "IPV4PREFIX=NAME" pairs; the interface holding an
# address starting with IPV4PREFIX is renamed NAME and its address removed (the
# netplan_qsfp role assigns the fabric addresses, as on a fresh Spark; after that,
# networkd_boot.py applies its netplan file at every start, as a Spark's boot does).
set -eu

for pair in ${LAB_IFMAP:-}; do
  prefix=${pair%%=*}; name=${pair#*=}
  ip link show "$name" >/dev/null 2>&1 && continue
  dev=$(ip -o -4 addr show | awk -v p="$prefix" 'index($4, p) == 1 {print $2; exit}')
  [ -n "$dev" ] || { echo "lab-entrypoint: no interface with an address in $prefix" >&2; exit 1; }
  ip link set "$dev" down
  ip link set "$dev" name "$name"
  ip addr flush dev "$name"
  ip link set "$name" up
done
# The uncabled port: two interfaces that stay down. A veth pair, since the
# "dummy" link type needs a kernel module the host may not have loaded.
set -- ${LAB_DOWN_IFS:-}
while [ $# -ge 2 ]; do
  ip link show "$1" >/dev/null 2>&1 || ip link add "$1" type veth peer name "$2"
  shift 2
done

# Boot-time addressing, as systemd-networkd does it on a Spark: the netplan files in /etc/netplan (e.g. the
# fabric addresses netplan_qsfp wrote) are applied again at every start of the node (a "reboot").
python3 /usr/local/lib/sparkops-lab/networkd_boot.py || echo "lab-entrypoint: networkd_boot.py failed; the node boots without those addresses" >&2

# Boot-time firewall, as ufw.service does on a Spark (ExecStart=/lib/ufw/ufw-init start quiet): when
# /etc/ufw/ufw.conf says ENABLED=yes (ufw enable wrote it), the rules in /etc/ufw are loaded again; otherwise nothing
# happens. A restart of the node container starts a new network namespace without any iptables rule, as a reboot
# does. Before dockerd and sshd, so nothing listens while the rules are missing (rules naming an interface match it
# by name, so the renaming above may come first).
if [ -x /lib/ufw/ufw-init ]; then
  /lib/ufw/ufw-init start quiet || echo "lab-entrypoint: ufw-init start failed; the node boots without its firewall rules" >&2
fi

if [ -d /run/sparkops-lab/hostkeys ]; then
  install -m 0600 /run/sparkops-lab/hostkeys/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key
  install -m 0644 /run/sparkops-lab/hostkeys/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_ed25519_key.pub
else
  ssh-keygen -A
fi
if [ -f /run/sparkops-lab/authorized_keys ]; then
  install -d -o spark -g spark -m 0700 /home/spark/.ssh
  # Keep keys added later by the ssh_mesh role: only add the controller key.
  touch /home/spark/.ssh/authorized_keys
  grep -qxF "$(cat /run/sparkops-lab/authorized_keys)" /home/spark/.ssh/authorized_keys \
    || cat /run/sparkops-lab/authorized_keys >> /home/spark/.ssh/authorized_keys
  chown spark:spark /home/spark/.ssh/authorized_keys; chmod 0600 /home/spark/.ssh/authorized_keys
fi

# Docker-in-Docker on a cgroup v1 host without --privileged: remount the
# hierarchies read-write so the inner engine can create cgroups.
for d in /sys/fs/cgroup/*; do
  [ -d "$d" ] && [ ! -L "$d" ] || continue
  opts=$(awk -v m="$d" '$2 == m {print $4}' /proc/mounts | tr , '\n' \
    | grep -vE '^(ro|rw|nosuid|nodev|noexec|relatime)$' | paste -sd, -)
  [ -n "$opts" ] || continue
  grep -q " $d cgroup ro," /proc/mounts || continue
  umount "$d" && mount -t cgroup -o "rw,nosuid,nodev,noexec,relatime,$opts" cgroup "$d"
done
# After a hard stop (docker stop/kill of the node) the old pid files stay and dockerd would refuse to start.
rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
# LAB_INSECURE_REGISTRY (host:port, set by tests/lab/up.yml): the lab registry, plain HTTP, which dockerd
# would otherwise refuse to pull from (as a site mirror without TLS is configured on a real host).
if [ -n "${LAB_INSECURE_REGISTRY:-}" ]; then
  dockerd --bridge=none --iptables=false --ip6tables=false --insecure-registry "$LAB_INSECURE_REGISTRY" >/var/log/dockerd.log 2>&1 &
else
  dockerd --bridge=none --iptables=false --ip6tables=false >/var/log/dockerd.log 2>&1 &
fi

mkdir -p /run/sshd
exec /usr/sbin/sshd -D -e
