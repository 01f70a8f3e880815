# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE: node and container plumbing of the docker_group and trtllm_container roles, as pure
functions (no Ansible, no I/O). Not a public API of sparkops.specdec.

* trtllm_container: the ``community.docker.docker_container`` parameters of the long-lived engine container
  (environment, mounts, devices, labels) from the role's settings, the bind mounts with the type each source must
  have and the problems of the sources found on the node, the consent rule for recreating a running
  container, the image facts the plan reads (``trtllm_container_image_info``), and which image with sshd a
  multi-node container runs (the image itself, a derived or named one, or a derived one to build first).
The ssh_mesh role's node state (keys, marked blocks, container mesh files) is module_utils/_ssh_mesh.py's.

Every refusal is one line naming the setting or the node and the fix; callers raise it as their error.
"""

from __future__ import annotations

import re

from ansible_collections.sparkops.specdec.plugins.module_utils import _layout
from ansible_collections.sparkops.specdec.plugins.module_utils._ssh_mesh import CONTAINER_HOST_KEY, MESH_DIR

# ---------------------------------------------------------------------------------------------
# trtllm_container
# ---------------------------------------------------------------------------------------------

ROLE_LABEL = "io.sparkops.specdec.role"
ENTRYPOINT_LABEL = "io.sparkops.specdec.entrypoint-sha1"
# Where the container sees its pinned sshd host key, and its mesh directory (the container root's ~/.ssh): the
# container mesh key, authorized_keys and known_hosts, all made by ssh_mesh in the host key directory (MESH_DIR).
# Nothing of the deploy user's ~/.ssh enters the container.
CONTAINER_HOST_KEY_DIR = "/run/sparkops/ssh"
CONTAINER_SSH_DIR = "/root/.ssh"
# The addresses the container's sshd listens on (this node's fabric IPs), read by the entrypoint.
LISTEN_ENV = "SSHD_LISTEN_ADDRESSES"
VERSION_ENV = "TRT_LLM_VERSION"
VERSION_LABEL = "org.opencontainers.image.version"
# Container settings every multi-node container needs (from the fabric).
_MULTINODE_INPUTS = ("hostfile_hosts", "fabric_interfaces")
_TRUE = ("1", "true", "yes", "on", "y", "t")


def _bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return str(value).strip().lower() in _TRUE


def _list(value):
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


# Engine vllm: its cache root on the node (under specdec_state_dir, mounted at the same path in the container).
VLLM_CACHE_ENV = "VLLM_CACHE_ROOT"
VLLM_CACHE_DIR = "vllm-cache"


class ContainerError(ValueError):
    """A one-line refusal (setting, problem, fix)."""


def uses_sshd(settings):
    """Whether the engine container runs sshd: a multi-node container of engine trtllm (mpirun reaches the worker
    over it). Engine vllm across Sparks starts vllm serve on each node itself (no sshd, no mpirun)."""
    return _bool(settings.get("multinode")) and (settings.get("engine") or "trtllm") == "trtllm"


def container_spec(settings):
    """The community.docker.docker_container parameters of the engine container.

    settings: name, image, engine (trtllm, llamacpp), multinode, gpus, infiniband_device, ulimits, ipc_mode, shm_size, cuda_env, env,
    fabric_interfaces, nccl_ib_hca, hostfile_hosts, state_dir, hf_cache (host directory), container_hf_cache_dir,
    home (the deploy user's), host_key_dir, ssh_port, sshd_listen_addresses, entrypoint_sha1; optional layout,
    bootstrap, management_interface, accept_four_node_ring (module_utils/_layout.fabric_env; default: today's pair),
    management_address (this node's ansible_host: VLLM_HOST_IP of engine vllm with bootstrap management_interface).

    The OpenMPI hostfile and the container sshd stay on the fabric addresses with either bootstrap: mpirun only
    starts its daemons over SSH there; the bootstrap interface is what NCCL_SOCKET_IFNAME, UCX_NET_DEVICES and
    OMPI_MCA_btl/oob_tcp_if_include name (docs/layouts.md).

    Multi-node: sshd on ssh_port (SSH_PORT) and on the sshd_listen_addresses only (SSHD_LISTEN_ADDRESSES), the
    NCCL/UCX/OpenMPI interface variables on the fabric interfaces, the OpenMPI hostfile, one rank per node; mounted
    read-only: the pinned sshd host key and the container mesh directory as /root/.ssh (mesh key, authorized_keys,
    known_hosts), nothing of the deploy user's ~/.ssh.
    Engine llamacpp: one node only; the image's ENTRYPOINT (llama-server in llama.cpp's images) is replaced by the
    entrypoint script. Raises ContainerError for a multi-node container without the fabric inputs, or of llamacpp.
    """
    s = settings
    multinode = _bool(s.get("multinode"))
    hosts = _list(s.get("hostfile_hosts"))
    interfaces = _list(s.get("fabric_interfaces"))
    if multinode and (len(hosts) < 2 or not interfaces):
        raise ContainerError(
            "A multi-node container needs trtllm_container_hostfile_hosts (one fabric IP per node, got %s) and "
            "trtllm_container_fabric_interfaces (got %s): run it after netplan_qsfp, as playbooks/two_sparks.yml "
            "does, or set trtllm_container_multinode: false." % (hosts, interfaces))
    llama = (s.get("engine") or "trtllm") == "llamacpp"
    if multinode and llama:
        raise ContainerError(
            "specdec_engine: llamacpp serves on one Spark (no sshd, no MPI); use playbooks/single_spark.yml "
            "(trtllm_container_multinode: false), or specdec_engine: trtllm.")
    # Engine vllm across Sparks: each node runs its own vllm serve (the head) or vllm serve --headless (a worker);
    # torch.distributed rendezvous at --master-addr, no sshd, no mpirun: the fabric environment only.
    sshd = uses_sshd(s)
    listen = [str(a) for a in _list(s.get("sshd_listen_addresses"))]
    if sshd and not listen:
        raise ContainerError(
            "A multi-node container needs trtllm_container_sshd_listen_addresses (this node's fabric IPs, "
            "netplan_qsfp_fabric.ips; its sshd listens there only): run it after netplan_qsfp, as "
            "playbooks/two_sparks.yml does, or set them.")
    state_dir = s["state_dir"]
    env = dict(s.get("cuda_env") or {})
    env.update(s.get("env") or {})
    if multinode:
        # The NCCL/UCX/OpenMPI environment of the layout (module_utils/_layout.fabric_env, the one function every engine
        # takes it from; a pair's is today's, byte for byte). NCCL_IB_HCA is set below, as for one node.
        layout = s.get("layout") or "direct"
        fabric = _layout.fabric_env(
            "direct" if layout == _layout.AUTO else layout, interfaces, (), hosts,
            bootstrap=s.get("bootstrap") or "fabric_interfaces",
            management_interface=s.get("management_interface") or _layout.DEFAULT_MANAGEMENT_INTERFACE,
            accept_four_node_ring=_bool(s.get("accept_four_node_ring")), state_dir=state_dir,
            engine=s.get("engine") or "trtllm")
        env.update(fabric["env"])
    if multinode and not sshd and listen:
        # vLLM's own name for this node's address (its multi-node docs): the first fabric address; with the bootstrap
        # over the management interface, the node's management address (its ansible_host, on that interface: the
        # nccl_interface_info check), where the head's --master-addr points too.
        mgmt = s.get("bootstrap") == "management_interface" and s.get("management_address")
        env["VLLM_HOST_IP"] = str(mgmt) if mgmt else listen[0]
    if sshd:
        env.update({
            "SSH_PORT": str(s["ssh_port"]),
            LISTEN_ENV: " ".join(listen),
        })
    hca = _list(s.get("nccl_ib_hca"))
    if hca:
        env["NCCL_IB_HCA"] = ",".join(hca)
    if s.get("engine") == "vllm":
        # vLLM's compile and kernel caches (torch.compile, CUDA graphs' warm-up; VLLM_CACHE_ROOT, default
        # ~/.cache/vllm in the container, lost with it) on the node, in the state directory the container mounts at
        # the same path: only the first start of a model is cold. A user's own VLLM_CACHE_ROOT (specdec_server_env or
        # the CUDA env) wins.
        env.setdefault(VLLM_CACHE_ENV, "%s/%s" % (str(state_dir).rstrip("/"), VLLM_CACHE_DIR))
    volumes = [_volume(m) for m in container_mounts(s)]
    spec = {
        "name": s["name"],
        "image": s["image"],
        "state": "started",
        "restart_policy": "unless-stopped",
        # An init process reaps the detached server's processes (the entrypoint's sshd does not).
        "init": True,
        "network_mode": "host",
        "ipc_mode": s.get("ipc_mode") or "host",
        "ulimits": _list(s.get("ulimits")),
        "env": env,
        "labels": {ROLE_LABEL: "trtllm_container", ENTRYPOINT_LABEL: s["entrypoint_sha1"]},
        "volumes": volumes,
        "command": ["bash", state_dir + "/entrypoint.sh"],
    }
    if llama or s.get("engine") == "vllm":
        # llama.cpp server images set ENTRYPOINT to llama-server itself (ggml-org's Dockerfiles): our entrypoint
        # replaces it, so that the container idles and the plan's server.sh starts llama-server. vllm/vllm-openai's
        # ENTRYPOINT is `vllm serve` (NVIDIA's vLLM runbook passes the model as the container's arguments): the same.
        spec["entrypoint"] = ["bash"]
        spec["command"] = [state_dir + "/entrypoint.sh"]
    if s.get("shm_size"):
        spec["shm_size"] = s["shm_size"]
    if _bool(s.get("gpus")):
        spec["device_requests"] = [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    if s.get("infiniband_device"):
        spec["devices"] = ["%s:%s" % (s["infiniband_device"], s["infiniband_device"])]
    return spec


# The bind mounts of the engine container, each with the type its source on the node must have. Docker creates a
# missing source as an empty root-owned directory, silently: a missing file (the sshd host key before ssh_mesh made it)
# becomes a directory, and the container's sshd never starts. engine_container checks them before it creates the
# container (mount_problems).
_RUN_SSH_MESH = ("run the ssh_mesh role on this node before trtllm_container (playbooks/two_sparks.yml does), which "
                 "creates it")


def container_mounts(settings):
    """The bind mounts of the engine container: [{'source', 'target', 'read_only', 'type', 'what', 'fix'}].

    type is ``file`` or ``directory`` (what the source on the node must be); what names the mount and its setting;
    fix says what makes the source right. settings: as container_spec (hf_cache, container_hf_cache_dir, state_dir,
    multinode, host_key_dir).
    """
    s = settings
    state_dir = str(s["state_dir"])
    mounts = [
        {"source": str(s["hf_cache"]), "target": str(s["container_hf_cache_dir"]), "read_only": False,
         "type": "directory", "what": "the Hugging Face cache (specdec_hf_cache_dir)",
         "fix": "the trtllm_container role creates it before the container; set specdec_hf_cache_dir to a directory"},
        {"source": state_dir, "target": state_dir, "read_only": False, "type": "directory",
         "what": "the state directory (specdec_state_dir)",
         "fix": "the trtllm_container role creates it before the container; set specdec_state_dir to a directory"},
    ]
    if uses_sshd(s):
        key_dir = str(s["host_key_dir"]).rstrip("/")
        mounts += [
            {"source": "%s/%s" % (key_dir, CONTAINER_HOST_KEY),
             "target": "%s/%s" % (CONTAINER_HOST_KEY_DIR, CONTAINER_HOST_KEY), "read_only": True, "type": "file",
             "what": "the container sshd host key (in specdec_container_host_key_dir)", "fix": _RUN_SSH_MESH},
            {"source": "%s/%s" % (key_dir, MESH_DIR), "target": CONTAINER_SSH_DIR, "read_only": True,
             "type": "directory", "what": "the container mesh directory (in specdec_container_host_key_dir)",
             "fix": _RUN_SSH_MESH},
        ]
    return mounts


def _volume(mount):
    return "%s:%s%s" % (mount["source"], mount["target"], ":ro" if mount.get("read_only") else "")


def _split_volume(volume):
    """(source, target) of a docker_container ``volumes`` entry ``source:target[:options]``."""
    parts = str(volume).split(":")
    return parts[0], (parts[1] if len(parts) > 1 else "")


def _found_type(stat):
    if not stat.get("exists"):
        return None
    if stat.get("isdir"):
        return "directory"
    if stat.get("isreg"):
        return "file"
    return "special file" if not stat.get("islnk") else "dangling symbolic link"


def mount_problems(spec, stat_results):
    """One line per bind mount of ``spec`` whose source on the node is missing or of the wrong type, else [].

    stat_results: the loop results of ansible.builtin.stat (follow: true) over container_mounts(), each with
    ``item`` (the mount: source, type, what, fix) and ``stat`` (exists, isdir, isreg), or ``failed`` and ``msg``.
    Each line names the mount (what, source, target), the problem and the fix. A bind mount of the spec that has no
    stat result is reported too (it was not checked).
    """
    by_source = {}
    for result in stat_results or []:
        item = (result or {}).get("item") or {}
        if item.get("source") and not result.get("skipped"):
            by_source[str(item["source"])] = result
    problems = []
    for volume in (spec or {}).get("volumes") or []:
        source, target = _split_volume(volume)
        if not source.startswith("/"):
            continue  # a named Docker volume: Docker manages it
        result = by_source.get(source)
        if result is None:
            problems.append("Bind mount %s -> %s was not checked (no stat of it in mount_stats); stat every source of "
                            "sparkops.specdec.trtllm_container_mounts as the trtllm_container role does." % (source, target))
            continue
        mount = result["item"]
        head = "Bind mount of %s, %s -> %s" % (mount.get("what") or "a host path", source, target)
        want = mount.get("type") or "directory"
        if result.get("failed"):
            problems.append("%s: cannot be checked (%s); fix the path or its parent directories' permissions, then "
                            "re-run." % (head, " ".join(str(result.get("msg") or "stat failed").split())[:200]))
            continue
        found = _found_type(result.get("stat") or {})
        if found == want:
            continue
        if found is None:
            problem = ("does not exist, and Docker would create an empty directory there%s"
                       % (" where a file belongs" if want == "file" else ""))
            fix = mount.get("fix") or "create it"
        elif want == "file" and found == "directory":
            problem = ("is a directory where a file belongs (Docker made it when a container started before the file "
                       "existed)")
            fix = "remove it if it is empty (rmdir %s) or move it away, then %s" % (source, mount.get("fix") or "create the file")
        else:
            problem = "is a %s where a %s belongs" % (found, want)
            fix = "move it away, then %s" % (mount.get("fix") or "create the %s" % want)
        problems.append("%s: %s; %s. Nothing was changed." % (head, problem, fix))
    return problems


def plan_differences(plan):
    """Names of what docker_container (check mode, diff on) would change, e.g. ['env', 'volumes']."""
    diff = (plan or {}).get("diff") or {}
    before, after = diff.get("before") or {}, diff.get("after") or {}
    names = sorted(k for k in set(before) | set(after) if k != "running" and before.get(k) != after.get(k))
    if diff.get("image_different") and "image" not in names:
        names.insert(0, "image")
    return names


def is_running(container):
    """Whether a docker inspect result (or None) is a running container."""
    return bool(((container or {}).get("State") or {}).get("Running"))


def recreate_refusal(plan, allow_recreate, name):
    """The one-line refusal when the plan would recreate (or update) a running container without consent, else None.

    plan: the check-mode result of docker_container: changed, and container = the inspect result of the container
    as it is now (None when there is none).
    """
    if not (plan or {}).get("changed") or not is_running(plan.get("container")) or _bool(allow_recreate):
        return None
    names = plan_differences(plan)
    what = ", ".join(names) if names else "image, environment, mounts or entrypoint"
    return ("The running container %s has other settings than requested (%s). Recreating it stops any server in it; "
            "re-run with -e trtllm_container_allow_recreate=true to recreate it." % (name, what))


def sshd_wait_address(spec):
    """Where the action waits for the container's sshd: its first listen address (127.0.0.1 when it names none)."""
    listen = str(((spec or {}).get("env") or {}).get(LISTEN_ENV) or "").split()
    return listen[0] if listen else "127.0.0.1"


# Before mpirun, the head waits until the container sshd of every node answers (SSH banner) on its hostfile address:
# each node's own wait (engine_container) proves only that its sshd answered on that node, once; a container that
# Docker's restart policy starts (after a node restart) or restarts again may not listen when the head's mpirun
# connects. The module sparkops.specdec.container_sshd_wait probes; the decisions are here.
SSH_BANNER = b"SSH-"


def sshd_targets(hostfile_hosts, listen_addresses):
    """What the head probes before mpirun: [{'node', 'address'}], one per hostfile address, in its order (the module
    container_sshd_wait probes each on its own option port).

    hostfile_hosts: trtllm_container_hostfile_hosts (the addresses mpirun's ssh connects to, head first);
    listen_addresses: node -> the addresses its container sshd listens on (SSHD_LISTEN_ADDRESSES of its spec), for
    every node of the deployment. Raises ContainerError when a hostfile address is no node's sshd address (mpirun
    would reach no container sshd there), naming it and the fix.
    """
    owners = {}
    for node, addresses in (listen_addresses or {}).items():
        for address in _list(addresses):
            owners.setdefault(str(address), str(node))
    targets = []
    for address in [str(a) for a in _list(hostfile_hosts)]:
        node = owners.get(address)
        if node is None:
            raise ContainerError(
                "trtllm_container_hostfile_hosts: %s is not an address the container sshd of any node of the "
                "deployment listens on (%s); mpirun's ssh would reach no container there. Set "
                "trtllm_container_hostfile_hosts to one fabric address per node (link 1, head first), as "
                "playbooks/two_sparks.yml does, or add it to that node's trtllm_container_sshd_listen_addresses."
                % (address, "; ".join("%s: %s" % (n, ", ".join(_list(a)) or "none")
                                      for n, a in (listen_addresses or {}).items()) or "no node published them"))
        targets.append({"node": node, "address": address})
    return targets


def banner_answer(data):
    """Whether the first bytes an endpoint sent are an SSH server's banner (an sshd, not just an open port)."""
    return bytes(data or b"").startswith(SSH_BANNER)


def sshd_round(targets, answers):
    """One round of probes -> the targets that did not answer: [(target, reason)], [] when every one answered.

    answers: address -> '' (the banner came) or the reason it did not (connection refused, timed out, ...). The head
    waits until one round has every target answering: a container in a restart loop answers now and then, and a
    round where another node refuses is not ready for mpirun.
    """
    return [(t, answers.get(t["address"], "not probed")) for t in targets if answers.get(t["address"], "not probed")]


def sshd_wait_failure(missing, head, container, timeout):
    """The one-line error when, after ``timeout`` s, the head still cannot reach every node's container sshd."""
    where = "; ".join("%s at %s:%s (%s)" % (t["node"], t["address"], t["port"], reason) for t, reason in missing)
    nodes = ", ".join(dict.fromkeys(t["node"] for t, _reason in missing))
    port = missing[0][0]["port"] if missing else ""
    return ("The container sshd of %s does not answer from %s (the head, where mpirun starts) after %s s: %s. "
            "Check on %s that the container %s runs (docker ps; docker inspect %s shows a restart loop in "
            "State.Restarting and RestartCount), that its sshd started (docker logs %s names the fabric address it "
            "waits for), that those fabric addresses are up (ip -br addr), and that no firewall drops port %s between "
            "the nodes' fabric addresses; then re-run (trtllm_container_start_timeout sets the wait)."
            % (nodes, head, timeout, where, nodes, container, container, container, port))


def mpi_hostname_problem(rc, stdout, stderr, hostfile_hosts, container, head, port):
    """'' when ``mpirun -np N hostname`` in the head's container printed N distinct host names (N = the hostfile's
    hosts) with exit status 0, else the one-line error (what it printed, and what to check)."""
    hosts = list(hostfile_hosts or [])
    names = set(line.strip() for line in str(stdout or "").splitlines() if line.strip())
    if rc == 0 and len(names) == len(hosts):
        return ""
    return ("'mpirun -np %d hostname' in %s on %s did not print %d distinct host names (rc=%s): %s %s. Check the "
            "hostfile addresses (%s) against `ip addr`, and that the containers trust each other's keys on port %s "
            "(ssh_mesh role)." % (len(hosts), container, head, len(hosts), rc, " ".join(str(stdout or "").split()),
                                  " ".join(str(stderr or "").split()), ", ".join(str(h) for h in hosts), port))


# The image the multi-node container runs: one with sshd (the TensorRT-LLM release image has none). Our derived image
# says so in labels: that it has sshd and which base image (ID) it was built from, so a new base rebuilds it.
SSHD_LABEL = "io.sparkops.specdec.sshd"
SSHD_BASE_LABEL = "io.sparkops.specdec.sshd-base"
SSHD_BIN = "/usr/sbin/sshd"
SSHD_SUFFIX = "-sparkops-sshd"
# The probe run in a throw-away container of an image (no network): prints sshd=yes or sshd=no.
SSHD_PROBE = "if [ -x %s ]; then echo sshd=yes; else echo sshd=no; exit 3; fi" % SSHD_BIN


def probe_has_sshd(result):
    """Whether a probe says the image has sshd: True/False as is, or a docker_container (detach: false) result, by
    its exit status (0 = sshd there) or else its output."""
    if isinstance(result, bool):
        return result
    result = result or {}
    if result.get("skipped"):
        return False
    if "status" in result:
        return result.get("status") == 0
    return "sshd=yes" in str(((result.get("container") or {}).get("Output")) or "")


def sshd_image_name(image):
    """The default name of the derived image of ``image``: its tag (or digest) with -sparkops-sshd appended.

    nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12 -> nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12-sparkops-sshd;
    repo@sha256:<hex> -> repo:sha256-<12 hex>-sparkops-sshd; repo -> repo:latest-sparkops-sshd.
    """
    image = str(image)
    repo, at, digest = image.partition("@")
    if at:
        algo, hexdigest = (digest.split(":", 1) + [""])[:2]
        return "%s:%s-%s%s" % (repo, algo, hexdigest[:12], SSHD_SUFFIX)
    slash = repo.rfind("/")
    colon = repo.rfind(":")
    if colon > slash:
        return repo + SSHD_SUFFIX
    return repo + ":latest" + SSHD_SUFFIX


def sshd_dockerfile(base, base_id):
    """The Dockerfile of the derived image: the base image plus openssh-server (apt, dnf or apk), nothing else.

    The package host keys are removed (the container uses its pinned key); the labels name sshd and the base ID.
    """
    return "\n".join([
        "# Managed by sparkops.specdec (trtllm_container): %s plus openssh-server, built once on the node." % base,
        "FROM %s" % base,
        "USER root",
        "RUN set -e; \\",
        "    if command -v apt-get >/dev/null 2>&1; then \\",
        "      apt-get update; \\",
        "      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssh-server openssh-client; \\",
        "      rm -rf /var/lib/apt/lists/*; \\",
        "    elif command -v dnf >/dev/null 2>&1; then dnf install -y openssh-server openssh-clients; dnf clean all; \\",
        "    elif command -v apk >/dev/null 2>&1; then apk add --no-cache openssh-server openssh-client; \\",
        "    else echo 'no apt-get, dnf or apk in %s to install openssh-server with' >&2; exit 1; fi; \\" % base,
        "    rm -f /etc/ssh/ssh_host_*; \\",
        "    test -x %s" % SSHD_BIN,
        'LABEL %s="%s" %s="%s"' % (SSHD_LABEL, SSHD_BIN, SSHD_BASE_LABEL, base_id),
        "",
    ])


_BUILD_CAUSES = (
    re.compile(r"Temporary failure resolving '[^']+'"),
    re.compile(r"Could not resolve host:? '?[^' ,]+'?"),
    re.compile(r"Failed to fetch \S+\s+[^'\\\n]*"),
    re.compile(r"E: [^'\\\n]+"),
    re.compile(r"no apt-get, dnf or apk in \S+"),
)


def sshd_build_failure(message, image, base, host):
    """The one-line error of a failed build of the derived image: the first cause found in docker's (long) message
    (DNS, fetch, apt error), and the way out for an air-gapped node."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(message or ""))
    cause = ""
    for pattern in _BUILD_CAUSES:
        found = pattern.search(text)
        if found:
            cause = found.group(0).strip()
            break
    if not cause:
        cause = " ".join(text.split())[:200] or "no message"
    return ("Building %s (%s plus openssh-server) on %s failed: %s. It needs apt's network once; on an air-gapped node "
            "build it elsewhere and load it (trtllm_container README, \"Air-gapped nodes\"), or set "
            "trtllm_container_sshd_image to an image with openssh-server already on the node." % (image, base, host, cause))


# Causes of a failed pull (the Docker daemon's error text, as community.docker.docker_image reports it), first match
# wins: (pattern, what it means, the fix). Texts: moby's registry and distribution errors (distribution/errors.go,
# registry/errors.go), e.g. "manifest unknown", "pull access denied", "unauthorized: authentication required",
# "http: server gave HTTP response to HTTPS client", Go's net errors ("no such host", "connection refused", "i/o timeout").
_PULL_CAUSES = (
    (re.compile(r"manifest unknown|manifest for \S+ not found|not found: manifest", re.I),
     "the registry has no image under that tag or digest (manifest unknown)",
     "check the name and the tag or digest (the registry's page, or RepoDigests of docker image inspect where it was "
     "pulled)"),
    (re.compile(r"pull access denied|unauthorized|authentication required|denied: |requested access .* is denied",
                re.I),
     "the registry refused the deploy user's credentials",
     "log in on the node as the deploy user (for nvcr.io: docker login nvcr.io, user $oauthtoken, password an NGC API "
     "key) or check that the repository exists"),
    (re.compile(r"server gave HTTP response to HTTPS client", re.I),
     "the registry speaks plain HTTP and dockerd expects HTTPS",
     "add the registry to insecure-registries in /etc/docker/daemon.json and restart dockerd, or serve it with TLS"),
    (re.compile(r"x509: |certificate signed by unknown authority|tls: ", re.I),
     "dockerd does not trust the registry's TLS certificate",
     "install the registry's CA under /etc/docker/certs.d/<registry>/ca.crt"),
    (re.compile(r"no space left on device", re.I),
     "the node's Docker storage is full",
     "free space (docker system df, docker image prune) and re-run"),
    (re.compile(r"no such host|server misbehaving|temporary failure in name resolution|connection refused|network is "
                r"unreachable|i/o timeout|TLS handshake timeout|context deadline exceeded|Client.Timeout", re.I),
     "the node cannot reach the registry",
     "check the node's DNS, route and dockerd's proxy (HTTPS_PROXY in its systemd environment); on an air-gapped node "
     "docker save the image elsewhere and set trtllm_container_image_source: archive"),
)


def image_fetch_failure(message, image, source, host, archive="", setting="trtllm_container_image"):
    """The one-line error of a failed pull (or load) of the engine image on ``host``: what the Docker daemon's message
    means and the fix, with the daemon's own words (first 240 characters) for the record.

    message: the ``msg`` of the failed community.docker.docker_image task. source: trtllm_container_image_source
    (``pull`` or ``archive``); archive: trtllm_container_image_archive. Nothing has changed on the node when this is
    raised: the pull and load come before any container or server change."""
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(message or "")).split())
    said = text[:240] + ("..." if len(text) > 240 else "") if text else "no message"
    tail = "Nothing was changed (no container recreated, no server stopped)."
    if source == "archive":
        return ("%s: %s could not load %s from the archive %s (trtllm_container_image_archive): %s. Check that the file "
                "is a docker save of that image, readable by the deploy user, and that the node's Docker storage has "
                "room. %s" % (setting, host, image, archive or "(not set)", said, tail))
    for pattern, meaning, fix in _PULL_CAUSES:
        if pattern.search(text):
            return "%s: %s could not pull %s: %s; %s. Docker said: %s. %s" % (
                setting, host, image, meaning, fix, said, tail)
    return "%s: %s could not pull %s. Docker said: %s. Check the reference and the node's access to its registry. %s" % (
        setting, host, image, said, tail)


def _has_label(inspect, name, value=None):
    got = _labels(inspect).get(name)
    return bool(got) and (value is None or got == value)


def sshd_image_plan(settings, base_info, named_info, probes=None):
    """Which image the container runs so that it has sshd, and whether to build it first (nothing is installed at
    container start).

    settings: multinode, image (trtllm_container_image), sshd_image (trtllm_container_sshd_image, "" = the default
    derived name), sshd_build (trtllm_container_sshd_build). base_info / named_info: the docker image inspect of the
    image and of the derived (or named) image on the node, None when absent. probes: image name -> True/False (it has
    /usr/sbin/sshd), from running SSHD_PROBE in the image.

    Returns {'image', 'build', 'probe', 'dockerfile', 'reason'}: probe is an image name to probe first (then call
    again with its result), build says to build ``image`` from ``dockerfile``. Order: a single-node container or a
    base not on the node (check mode) runs the base as is; the derived/named image when it is on the node and current
    (our labels with this base's ID, or named by the user and has sshd); the base when it has sshd; else the derived
    image, built when trtllm_container_sshd_build. Raises ContainerError (one line) when there is no usable image.
    """
    s = settings
    base = str(s["image"])
    probes = dict((name, probe_has_sshd(result)) for name, result in (probes or {}).items())
    plan = {"image": base, "build": False, "probe": "", "probe_command": ["/bin/sh", "-c", SSHD_PROBE],
            "dockerfile": "", "reason": ""}
    if not _bool(s.get("multinode")):
        plan["reason"] = "single node: no sshd needed"
        return plan
    if not uses_sshd(s):
        plan["reason"] = "engine vllm: vllm serve on each node (--headless workers), no sshd needed"
        return plan
    named = str(s.get("sshd_image") or "")
    derived = named or sshd_image_name(base)
    if not base_info:
        plan["reason"] = "%s is not on the node (check mode): the sshd check runs once it is" % base
        return plan
    base_id = str(base_info.get("Id") or "")
    if named_info and derived != base:
        if _has_label(named_info, SSHD_LABEL) and (named or _has_label(named_info, SSHD_BASE_LABEL, base_id)):
            plan.update(image=derived, reason="%s has sshd (built by sparkops.specdec)" % derived)
            return plan
        if named:
            if derived not in probes:
                plan["probe"] = derived
                return plan
            if probes[derived]:
                plan.update(image=derived, reason="%s (trtllm_container_sshd_image) has sshd" % derived)
                return plan
            raise ContainerError(
                "trtllm_container_sshd_image %s has no %s: name an image with openssh-server, or set "
                "trtllm_container_sshd_image: \"\" to use (or build) %s." % (derived, SSHD_BIN, sshd_image_name(base)))
    if _has_label(base_info, SSHD_LABEL):
        plan["reason"] = "%s has sshd (built by sparkops.specdec)" % base
        return plan
    if base not in probes:
        plan["probe"] = base
        return plan
    if probes[base]:
        plan["reason"] = "%s has sshd" % base
        return plan
    if not _bool(s.get("sshd_build")) and named:
        raise ContainerError(
            "trtllm_container_sshd_image %s is not on the node and trtllm_container_image %s has no %s: load it there "
            "(trtllm_container_image_source: archive with its tarball, or docker load), or set "
            "trtllm_container_sshd_build: true to build it (apt needs the network once)." % (named, base, SSHD_BIN))
    if not _bool(s.get("sshd_build")):
        raise ContainerError(
            "trtllm_container_image %s has no %s and trtllm_container_sshd_build is false: set "
            "trtllm_container_sshd_build: true (apt needs the network once), or load an image with openssh-server "
            "(built elsewhere: see the trtllm_container README) and name it in trtllm_container_sshd_image."
            % (base, SSHD_BIN))
    plan.update(image=derived, build=True, dockerfile=sshd_dockerfile(base, base_id),
                reason="%s has no sshd: building %s from it (once)" % (base, derived))
    return plan


def _env_list(inspect):
    return list(((inspect or {}).get("Config") or {}).get("Env") or [])


def _labels(inspect):
    return dict(((inspect or {}).get("Config") or {}).get("Labels") or {})


def image_names_version(inspect):
    """Whether the image itself says its TensorRT-LLM version (TRT_LLM_VERSION or the OCI version label)."""
    if any(e.startswith(VERSION_ENV + "=") and len(e) > len(VERSION_ENV) + 1 for e in _env_list(inspect)):
        return True
    return bool(_labels(inspect).get(VERSION_LABEL))


def needs_package_version(inspect, override):
    """Read the tensorrt_llm package in the container: only for an image that names no version, without override."""
    return bool(inspect) and not override and not image_names_version(inspect)


_SPEC_TYPE_LINE = re.compile(r"^\s*--spec-type\s+([A-Za-z0-9_,-]+)", re.M)


def llama_spec_types(help_text):
    """The ``--spec-type`` values a ``llama-server --help`` lists (llama.cpp ``common/arg.cpp`` prints them as one
    comma-separated word after the flag), [] when it has no such flag, None when there is no help text at all."""
    if not help_text:
        return None
    found = _SPEC_TYPE_LINE.search(str(help_text))
    return found.group(1).split(",") if found else []


def image_info(name, inspect, package_version="", reference="", container=None, spec_types=None):
    """trtllm_container_image_info: name, id, the TRT_LLM_* environment, labels, package_version; with the image
    reference (trtllm_container_image): digest (the pinned one, else ""), repo_digests (the image's RepoDigests), and
    container_image_id, the id of the image the container runs (Image of its inspect; "" without a container). A
    multi-node container runs the derived image with sshd, so container_image_id differs from id there."""
    inspect = inspect or {}
    info = {
        "name": name,
        "id": inspect.get("Id") or "",
        "env": [e for e in _env_list(inspect) if e.startswith("TRT_LLM_")],
        "labels": _labels(inspect),
        "package_version": (package_version or "").strip(),
        "digest": image_reference(reference)["digest"] if reference else "",
        "repo_digests": [str(d) for d in inspect.get("RepoDigests") or []],
        "container_image_id": str((container or {}).get("Image") or ""),
    }
    if spec_types is not None:
        # Engine llamacpp: the --spec-type values the image's llama-server --help lists.
        info["spec_types"] = list(spec_types)
    return info


# ---------------------------------------------------------------------------------------------
# Image references pinned by digest, and the same image on every node of a deployment
# ---------------------------------------------------------------------------------------------

DIGEST_ALGORITHM = "sha256"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DIGEST_EXAMPLE = "nvcr.io/nvidia/tensorrt-llm/release@sha256:<64 hex digits>"


def digest_problem(digest):
    """Why ``digest`` (the part after ``@`` of an image reference) is not a Docker image digest, else "".

    Docker (distribution) content digests of images are ``sha256:`` and 64 lowercase hex digits."""
    digest = str(digest)
    algo, colon, hexdigest = digest.partition(":")
    if not colon:
        return "%s has no algorithm; a digest is sha256:<64 hex digits>" % (digest or "the empty digest")
    if algo != DIGEST_ALGORITHM:
        return "%s uses the algorithm %s; image digests are sha256:<64 hex digits>" % (digest, algo or "(none)")
    if _HEX64.fullmatch(hexdigest):
        return ""
    if re.fullmatch(r"[0-9a-fA-F]{64}", hexdigest):
        return "%s has upper-case hex digits; Docker writes them in lower case" % digest
    bad = sorted(set(c for c in hexdigest if c not in "0123456789abcdefABCDEF"))
    if bad:
        return "%s has characters that are not hex digits (%s)" % (digest, "".join(bad)[:10])
    return "%s has %d hex digits; a sha256 digest has 64" % (digest, len(hexdigest))


def image_reference(image, setting="trtllm_container_image"):
    """The parts of an image reference ``[registry/]repository[:tag][@sha256:<64 hex>]``.

    Returns {'image', 'repository', 'tag', 'digest', 'pinned'}: repository without tag or digest, tag "" when none,
    digest "" when the reference is not pinned. Raises ContainerError (one line naming ``setting``, the problem and
    the fix) for a reference with a malformed digest.
    """
    image = str(image or "").strip()
    repo, at, digest = image.partition("@")
    if at:
        problem = digest_problem(digest) if repo else "there is no repository before @"
        if problem:
            raise ContainerError(
                "%s: %s is not a valid reference pinned by digest: %s; copy the whole digest from the registry or from "
                "RepoDigests of docker image inspect on a machine that pulled it, e.g. %s. Nothing was changed."
                % (setting, image, problem, _DIGEST_EXAMPLE))
    slash, colon = repo.rfind("/"), repo.rfind(":")
    name, tag = (repo[:colon], repo[colon + 1:]) if colon > slash else (repo, "")
    return {"image": image, "repository": name, "tag": tag, "digest": digest if at else "", "pinned": bool(at)}


def pinned_source_problem(image, source, setting="trtllm_container_image"):
    """The one-line refusal of a reference pinned by digest loaded from an archive, else "".

    ``docker load`` of a ``docker save`` tarball gives the image no RepoDigests (Docker's classic image store): the
    loaded image could never be found under ``repo@sha256:...``, and Docker would try to pull it. Raises
    ContainerError for a malformed digest (image_reference)."""
    ref = image_reference(image, setting)
    if not ref["pinned"] or source != "archive":
        return ""
    return ("%s: %s is pinned by digest, but trtllm_container_image_source is archive and docker load records no "
            "registry digest (a loaded image has no RepoDigests), so the loaded image can never match it; name the "
            "archive's image by its tag (e.g. %s:TAG), or set trtllm_container_image_source: pull to pull it by "
            "digest. Nothing was changed." % (setting, ref["image"], ref["repository"]))


def image_identity(image, inspect, setting="trtllm_container_image"):
    """The id of the image ``image`` names on a node, checked against its digest: {'id', 'digest', 'repo_digests',
    'present'}.

    inspect: ``docker image inspect`` of the image on the node (the ``image`` result of community.docker.docker_image,
    which finds a pinned image by its RepoDigests and does not pull it again), {} or None when absent (check mode).
    A pinned reference must be among the image's RepoDigests (``repository@sha256:...``); raises ContainerError
    otherwise (an image found by another name or id is not the pinned one)."""
    ref = image_reference(image, setting)
    inspect = inspect or {}
    digests = [str(d) for d in inspect.get("RepoDigests") or []]
    out = {"id": str(inspect.get("Id") or ""), "digest": ref["digest"], "repo_digests": digests,
           "present": bool(inspect.get("Id"))}
    if not out["present"] or not ref["pinned"]:
        return out
    wanted = "%s@%s" % (ref["repository"], ref["digest"])
    if wanted not in digests and not any(d.endswith("@" + ref["digest"]) for d in digests):
        raise ContainerError(
            "%s: the image found for %s on this node (id %s) does not carry that digest (its RepoDigests: %s); remove "
            "it (docker image rm %s) and re-run to pull the pinned image. Nothing was changed."
            % (setting, ref["image"], out["id"][:19], ", ".join(digests) or "none: built or loaded locally", out["id"][:19]))
    return out


def _image_id(value):
    """The image id of a docker_image result ({'image': inspect}), an inspect result ({'Id'}) or an id string."""
    if isinstance(value, str):
        return value
    value = value or {}
    if isinstance(value.get("image"), dict):
        value = value["image"]
    return str(value.get("Id") or "")


NOTHING_CHANGED = "Nothing was changed (no container recreated, no server stopped)."


def same_image_problem(images, image, setting="trtllm_container_image", consequence=NOTHING_CHANGED):
    """The one-line refusal when the nodes of one deployment hold different images under ``image``, else "".

    The one comparison of the collection: the trtllm_container role after the pull (filter trtllm_image_problems),
    the plan (specdec_plan, from the trtllm_container_image_info facts) and the preflight's ``same_image`` row all
    call it. images: node -> its image (an id, a docker image inspect, or the docker_image result with ``image``), in
    the deployment's order; nodes without an image (check mode, not pulled yet) are left out. TP=2 ranks must run one
    engine build: the line names every node with its full id, and the fix, then ``consequence`` (what the caller did
    not do; "" for a report that changes nothing anyway)."""
    ids = [(str(host), _image_id(value)) for host, value in (images or {}).items()]
    ids = [(host, iid) for host, iid in ids if iid]
    if len(set(iid for _host, iid in ids)) < 2:
        return ""
    try:
        pinned = image_reference(image, setting)["pinned"]
    except ContainerError:  # a malformed digest has its own refusal (image_reference); the advice to pin still fits
        pinned = False
    fix = "on the node whose image is not the one you want, docker tag the right image as %s (or docker image rm it " \
          "and re-run: the role pulls or loads it again)" % image
    if not pinned:
        fix += ", and pin it by digest (%s: repo@sha256:...) so that every node pulls the same image" % setting
    line = ("%s: the nodes of this deployment hold different images under %s (%s); TP=2 ranks must run one engine "
            "build: %s." % (setting, image, ", ".join("%s: %s" % hi for hi in ids), fix))
    return "%s %s" % (line, consequence) if consequence else line
