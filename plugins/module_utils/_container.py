# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE: node and container plumbing of the docker_group, ssh_mesh and trtllm_container roles, as pure
functions (no Ansible, no I/O). Not a public API of sparkops.specdec.

* trtllm_container: the ``community.docker.docker_container`` parameters of the long-lived engine container
  (environment, mounts, devices, labels) from the role's settings, the consent rule for recreating a running
  container, and the image facts the plan reads (``trtllm_container_image_info``).
* ssh_mesh: the node's mesh identity from its probe, the directories that need creating or fixing, the public keys
  read from the node, and the three marked blocks every node writes (``authorized_keys``, the pinned host keys,
  ``~/.ssh/config``) plus the peer addresses to verify.

Every refusal is one line naming the setting or the node and the fix; callers raise it as their error.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------------------
# trtllm_container
# ---------------------------------------------------------------------------------------------

ROLE_LABEL = "io.sparkops.specdec.role"
ENTRYPOINT_LABEL = "io.sparkops.specdec.entrypoint-sha1"
# Where the container sees the deploy user's ~/.ssh (the entrypoint copies it to /root/.ssh) and the pinned host key.
CONTAINER_SSH_COPY = "/tmp/.ssh"
CONTAINER_HOST_KEY_DIR = "/run/sparkops/ssh"
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


class ContainerError(ValueError):
    """A one-line refusal (setting, problem, fix)."""


def container_spec(settings):
    """The community.docker.docker_container parameters of the engine container.

    settings: name, image, engine (trtllm, llamacpp), multinode, gpus, infiniband_device, ulimits, ipc_mode, shm_size, cuda_env, env,
    fabric_interfaces, nccl_ib_hca, hostfile_hosts, state_dir, hf_cache (host directory), container_hf_cache_dir,
    home (the deploy user's), host_key_dir, ssh_port, entrypoint_sha1.

    Multi-node: sshd on ssh_port (SSH_PORT), the NCCL/UCX/OpenMPI interface variables on the fabric interfaces,
    the OpenMPI hostfile, one rank per node, the deploy user's ~/.ssh and the pinned host key mounted read-only.
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
            "specdec_server_engine: llamacpp serves on one Spark (no sshd, no MPI); use playbooks/single_spark.yml "
            "(trtllm_container_multinode: false), or specdec_server_engine: trtllm.")
    state_dir = s["state_dir"]
    env = dict(s.get("cuda_env") or {})
    env.update(s.get("env") or {})
    if multinode:
        joined = ",".join(interfaces)
        env.update({
            "NCCL_SOCKET_IFNAME": joined,
            "UCX_NET_DEVICES": joined,
            "OMPI_MCA_btl_tcp_if_include": joined,
            "OMPI_MCA_oob_tcp_if_include": joined,
            "OMPI_MCA_orte_default_hostfile": state_dir + "/openmpi-hostfile",
            "OMPI_MCA_rmaps_ppr_n_pernode": "1",
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "SSH_PORT": str(s["ssh_port"]),
        })
    hca = _list(s.get("nccl_ib_hca"))
    if hca:
        env["NCCL_IB_HCA"] = ",".join(hca)
    volumes = ["%s:%s" % (s["hf_cache"], s["container_hf_cache_dir"]), "%s:%s" % (state_dir, state_dir)]
    if multinode:
        volumes += ["%s/.ssh:%s:ro" % (s["home"], CONTAINER_SSH_COPY),
                    "%s:%s:ro" % (s["host_key_dir"], CONTAINER_HOST_KEY_DIR)]
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
    if llama:
        # llama.cpp server images set ENTRYPOINT to llama-server itself (ggml-org's Dockerfiles): our entrypoint
        # replaces it, so that the container idles and the plan's server.sh starts llama-server.
        spec["entrypoint"] = ["bash"]
        spec["command"] = [state_dir + "/entrypoint.sh"]
    if s.get("shm_size"):
        spec["shm_size"] = s["shm_size"]
    if _bool(s.get("gpus")):
        spec["device_requests"] = [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    if s.get("infiniband_device"):
        spec["devices"] = ["%s:%s" % (s["infiniband_device"], s["infiniband_device"])]
    return spec


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


def image_info(name, inspect, package_version=""):
    """trtllm_container_image_info: name, id, the TRT_LLM_* environment, labels, package_version."""
    return {
        "name": name,
        "id": (inspect or {}).get("Id") or "",
        "env": [e for e in _env_list(inspect) if e.startswith("TRT_LLM_")],
        "labels": _labels(inspect),
        "package_version": (package_version or "").strip(),
    }


# ---------------------------------------------------------------------------------------------
# ssh_mesh
# ---------------------------------------------------------------------------------------------

# The peers' pinned host keys live in a file of their own, named by the mesh's Host block as the only user
# known-hosts file for the peers' addresses: a stale or re-keyed entry elsewhere cannot vouch for a peer.
KNOWN_HOSTS = "known_hosts_sparkops"
NODE_HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
CONTAINER_HOST_KEY = "ssh_host_ed25519_key"
# Keys of the read's ``name=value`` lines.
_READ_KEYS = ("user", "home", "ssh_dir", "key_dir", "mesh_key", "container_key", "mesh_pub", "host_pub", "container_pub")


class MeshError(ValueError):
    """A one-line refusal about the mesh (user, nodes, keys)."""


def parse_read(lines):
    """The ssh_mesh read of a node (``name=value`` lines of both its parts) as a dict; unknown names are ignored."""
    out = {}
    for line in lines or []:
        name, sep, value = str(line).partition("=")
        if sep and name in _READ_KEYS and name not in out:
            out[name] = value.strip()
    return out


def _stat(text):
    parts = (text or "").split("|")
    if len(parts) != 4:
        return None
    return {"type": parts[0], "mode": parts[1], "owner": parts[2], "group": parts[3]}


def mesh_node(read, me, addresses, host_key_dir, key_name):
    """This node's mesh identity from its read: user, home, addresses, public keys, and what to create or fix.

    - fix_dirs: ~/.ssh (a directory of the user, 0700) and the container host key directory (root:root, 0700) when
      they are not so (the file module then creates or fixes them);
    - create_keys: the mesh key (as the user) and the container sshd host key (as root) whose private key is missing
      (ssh-keygen then creates it; an existing key is never replaced);
    - pubs: the public keys read (mesh, host = node sshd, container), '' for a key not there yet.
    Raises MeshError when the read has no user or home, or the node sshd has no ed25519 host key.
    """
    if not read.get("user") or not read.get("home"):
        raise MeshError("ssh_mesh: the read of %s printed no user and home (%s)." % (me, read))
    user, home = read["user"], read["home"]
    if not read.get("host_pub"):
        raise MeshError("ssh_mesh: %s has no ed25519 host key for its sshd (%s); the mesh pins it. Create it "
                        "(ssh-keygen -A) and re-run." % (me, NODE_HOST_KEY))
    fix = []
    for want, have in (({"path": home + "/.ssh", "owner": user}, _stat(read.get("ssh_dir"))),
                       ({"path": host_key_dir, "owner": "root", "group": "root"}, _stat(read.get("key_dir")))):
        if (not have or have["type"] != "directory" or have["mode"] != "700" or have["owner"] != want["owner"]
                or have["group"] != want.get("group", have["group"])):
            fix.append(want)
    create = []
    if not read.get("mesh_key"):
        create.append({"role": "mesh", "path": "%s/.ssh/%s" % (home, key_name), "owner": user,
                       "comment": "%s@%s sparkops-mesh" % (user, me)})
    if not read.get("container_key"):
        create.append({"role": "container", "path": "%s/%s" % (host_key_dir, CONTAINER_HOST_KEY), "owner": "root",
                       "comment": "trtllm-container@%s" % me})
    return {
        "user": user,
        "home": home,
        "addresses": [str(a) for a in _list(addresses)],
        "fix_dirs": fix,
        "create_keys": create,
        "pubs": {"mesh": read.get("mesh_pub", ""), "host": read["host_pub"], "container": read.get("container_pub", "")},
    }


def same_user(users, group):
    """Raise MeshError unless every node of the group has the same cluster user; users: host -> user or None."""
    missing = [h for h, u in users.items() if not u]
    if missing:
        raise MeshError("ssh_mesh: %s of group %s did not run the mesh (not in this play, e.g. --limit); the mesh needs "
                        "every node of the group." % (", ".join(missing), group))
    if len(set(users.values())) > 1:
        raise MeshError("The cluster user differs between nodes (%s). MPI and the runbook need the same user name on both "
                        "Sparks: set ssh_mesh_user or ansible_user." % ", ".join("%s: %s" % hu for hu in users.items()))


def node_pubs(node, created):
    """A node's public keys: as read, or as printed by ssh-keygen for a key created in this run.

    created: the loop results of the key creation (each with item.role and stdout, the new public key), or None.
    """
    pubs = dict(node.get("pubs") or {})
    for result in created or []:
        role = (result.get("item") or {}).get("role")
        lines = str(result.get("stdout") or "").strip().splitlines()
        if role and lines:
            pubs[role] = lines[-1].strip()
    return pubs


def _type_and_key(line):
    return " ".join(line.split()[0:2])


def mesh_files(me, nodes, pubs, key_name, ssh_port):
    """The marked blocks of one node's ~/.ssh and the peer addresses to verify.

    me: this node's inventory name; nodes: host -> mesh_node() (group order); pubs: host -> node_pubs().
    Returns {'files': [{'name', 'block'} for authorized_keys, KNOWN_HOSTS, config], 'peers': [address, ...]}.
    A key that is not there (check mode on a new node) is left out.
    """
    trusted, pinned, everyone = [], [], []
    for host, node in nodes.items():
        keys = pubs.get(host) or {}
        addresses = node["addresses"]
        everyone += addresses
        if keys.get("mesh"):
            trusted.append(keys["mesh"])
        if keys.get("host"):
            pinned.append("%s %s" % (",".join(addresses), _type_and_key(keys["host"])))
        if keys.get("container"):
            names = ",".join("[%s]:%s" % (a, ssh_port) for a in addresses)
            pinned.append("%s %s" % (names, _type_and_key(keys["container"])))
    config = "\n".join([
        "Host %s" % " ".join(everyone),
        "    IdentityFile ~/.ssh/%s" % key_name,
        "    IdentitiesOnly yes",
        "    UserKnownHostsFile ~/.ssh/%s" % KNOWN_HOSTS,
    ])
    peers = [a for host, node in nodes.items() if host != me for a in node["addresses"]]
    return {
        "files": [
            {"name": "authorized_keys", "block": "\n".join(trusted)},
            {"name": KNOWN_HOSTS, "block": "\n".join(pinned)},
            {"name": "config", "block": config},
        ],
        "peers": peers,
    }
