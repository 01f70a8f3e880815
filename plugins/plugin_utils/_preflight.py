# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: used only by the action plugin
# sparkops.specdec.preflight_report. Not a public API; names and return shapes may change in
# any release without notice.
"""Tier-2 preflight of sparkops.specdec as pure functions (no Ansible, no I/O).

``playbooks/preflight.yml`` only gathers raw facts on every node (the read-only module
``preflight_info``, the ``nccl_interface_info`` module, the ``hf_download`` check-mode results) and hands them to
``build_checks``, which returns one entry per check and node: ``{id, node, status, message, fix}``
with status ``pass``, ``warn``, ``fail`` or ``skip``. The comparisons across nodes, the disk and
memory budgets, port ownership, image ids, hostfile vs fabric addresses and the NCCL environment
are decided here; ``summary`` and ``verdict`` turn the entries into the printed summary and the
play's verdict.

Facts of a node: ``{name: {'rc', 'stdout', 'stderr'}}`` per command (``preflight_info`` returns them as
``facts``; the older shell probe printed one line per command, ``NAME<TAB>RC<TAB>base64(stdout)<TAB>base64(stderr)``,
still read by ``parse_probe``), plus ``ssh_nodes`` / ``ssh_containers`` (one result per peer address), ``hub`` (the
node's own request to the Hub or mirror) and ``gpu`` (``docker run --gpus all IMAGE nvidia-smi -L``). The
classification of their raw outputs (``classify_ssh``, ``classify_hub``, ``classify_gpu_run``) is here too.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re

from ansible_collections.sparkops.specdec.plugins.module_utils import _container, _container_change, _firewall, _layout, _nccl
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings

STATUSES = ("pass", "warn", "fail", "skip")

# Report order of the checks (per node). The two-node checks run only with topology two_sparks.
CHECK_IDS = ("docker_nosudo", "gpu_runtime", "gpu_run", "ports_free", "endpoint_exposure", "clock_sync", "hf_access", "hub_reach",
             "same_user", "same_port", "link_speed", "fabric_ips", "ssh_nodes", "ssh_containers", "nccl_env", "same_image",
             "pending_change", "disk_space", "memory_budget", "mem_available")
# The one row of a node that could not be reached (none of CHECK_IDS is judged on it).
REACHABLE = "reachable"
TWO_NODE_CHECKS = frozenset(("same_port", "link_speed", "fabric_ips", "ssh_nodes", "ssh_containers", "nccl_env"))

FIXES = {
    "docker_nosudo": "Add the user to the docker group (role docker_group, or sudo usermod -aG docker $USER and log in "
                     "again).",
    "gpu_runtime": "Install the NVIDIA Container Toolkit (DGX OS ships it) and check: docker run --rm --gpus all %(image)s "
                   "nvidia-smi",
    "ports_free": "Stop that process, or set specdec_server_port / specdec_container_ssh_port to free ports.",
    "endpoint_exposure": "Bind one network: specdec_server_host: loopback (clients on the node) or management (clients on "
                         "the management network); with engine llamacpp set specdec_api_key (in Ansible Vault); "
                         "or admit only your client networks to the port with specdec_server_allowed_networks (ufw).",
    "clock_sync": "sudo timedatectl set-ntp true",
    "hf_access": "Set a valid token (specdec_server_hf_token / HF_TOKEN) and request access to each gated repo on the "
                 "Hub.",
    "same_user": "Use the same user name on every Spark (MPI and the runbook need it): set ansible_user.",
    "same_port": "Cable the same physical QSFP port on both Sparks (ibdev2netdev must show the same pair Up).",
    "link_speed": "Check the cable; on a switch disable auto-negotiation and force 200G (ethtool must show Speed: "
                  "200000Mb/s).",
    "fabric_ips": "Re-run two_sparks.yml so the hostfile is rewritten from the addresses on the interfaces (ip addr).",
    "nccl_env": "Recreate the container with the detected interfaces: two_sparks.yml -e "
                "trtllm_container_allow_recreate=true.",
    "same_image": "Pull or load the same image (by digest) on every node; trtllm_container_image should name a digest "
                  "or a fixed tag.",
    "pending_change": "Re-run the deployment: with the same trtllm_container_image it finishes the change (the kept "
                      "container goes once the new server serves); with the previous image and -e "
                      "trtllm_container_allow_recreate=true it gives the node the kept container back. teardown.yml "
                      "removes both.",
    "disk_space": "Free disk space or move the HF cache (specdec_hf_cache_dir) to a larger filesystem.",
    "memory_budget_tp1": "Use two Sparks (TP=2, two_sparks.yml) or a smaller/quantised model.",
    "memory_budget": "Use a smaller model or lower max_num_tokens.",
    "mem_available": "Drop the host page cache before loading (UMA): re-run preflight with -e preflight_drop_caches=true.",
    "gpu_run": "Check by hand: docker run --rm --gpus all %(image)s nvidia-smi -L (the runbook's GPU check).",
    "hub_reach": "Make the Hub, or the mirror in specdec_server_hf_endpoint, reachable from the node (DNS, proxy "
                 "https_proxy, firewall).",
    "ssh_nodes": "Re-run two_sparks.yml: ssh_mesh sets up passwordless SSH between the nodes on the fabric addresses.",
    "ssh_containers": "Re-run two_sparks.yml: ssh_mesh writes the containers' authorized_keys and known_hosts, "
                      "trtllm_container starts their sshd.",
    "unreached": "Make the node reachable (SSH, and sudo for the port check) and re-run preflight.",
}

# Defaults of the preflight settings (the one table of the playbook settings).
USABLE_MEMORY_BYTES = _settings.PLAYBOOK_SETTINGS["preflight_usable_memory_bytes"]["default"]
MEMORY_RESERVE_BYTES = _settings.PLAYBOOK_SETTINGS["preflight_memory_reserve_bytes"]["default"]
DISK_RESERVE_BYTES = _settings.PLAYBOOK_SETTINGS["preflight_disk_reserve_bytes"]["default"]
# memory_budget: weights per node + reserve must fit in this share of the usable memory (tenths).
MEMORY_SHARE_TENTHS = 9
DEFAULT_HF_CACHE = "~/.cache/huggingface"
# The NCCL/UCX/OpenMPI variables trtllm_container sets to the Up interfaces.
INTERFACE_ENV = ("NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "OMPI_MCA_btl_tcp_if_include")

_WS = re.compile(r"\s+")
# ss -Hltnp: `LISTEN 0 5 127.0.0.1:8355 0.0.0.0:* users:(("python3",pid=123,fd=3))`
_SS_USER = re.compile(r'\("(?P<name>[^"]*)",pid=(?P<pid>\d+)')


def one_line(text):
    """Every run of whitespace as one space, stripped."""
    return _WS.sub(" ", str(text or "")).strip()


# ---------------------------------------------------------------------------------------------
# Parsing raw facts
# ---------------------------------------------------------------------------------------------

def _b64(text):
    try:
        return base64.b64decode(text or "", validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def parse_probe(stdout):
    """Probe output -> {name: {'rc': int, 'stdout': str, 'stderr': str}} (malformed lines are ignored).

    stdout and stderr are stripped of trailing newlines (as the shell's ``$(...)`` does).
    """
    out = {}
    for line in str(stdout or "").splitlines():
        parts = line.split("\t")
        if len(parts) != 4 or not parts[0] or not re.match(r"^-?\d+$", parts[1]):
            continue
        out[parts[0]] = {"rc": int(parts[1]), "stdout": _b64(parts[2]).rstrip("\n"), "stderr": _b64(parts[3]).rstrip("\n")}
    return out


def merge_probe(registered):
    """A node's registered probe (a loop result, one item per part, or one plain result) -> its commands.

    Returns {name: {'rc', 'stdout', 'stderr'}} plus ``'_errors'``: {part: message} for parts that could
    not run at all (e.g. no sudo for the root part).
    """
    registered = registered or {}
    results = registered.get("results") if isinstance(registered, dict) and "results" in registered else [registered]
    merged = {"_errors": {}}
    for result in results or []:
        if not isinstance(result, dict):
            continue
        part = str(result.get("item", "probe"))
        if result.get("skipped"):
            continue
        facts = result.get("facts")
        parsed = dict(facts) if isinstance(facts, dict) else parse_probe(result.get("stdout"))
        if not parsed and (result.get("failed") or result.get("unreachable") or result.get("rc", 0) != 0):
            merged["_errors"][part] = one_line(result.get("msg") or result.get("stderr") or "the probe did not run")
        merged.update(parsed)
    return merged


def parse_listeners(text):
    """``ss -Hltnp`` output -> [(port, [(process name, pid), ...]), ...] in output order."""
    out = []
    for line in str(text or "").splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        local = fields[3]
        port = local.rsplit(":", 1)[-1] if ":" in local else ""
        if not port.isdigit():
            continue
        users = [(m.group("name"), int(m.group("pid"))) for m in _SS_USER.finditer(line)]
        out.append((int(port), users))
    return out


def parse_pids(text):
    """``docker top NAME -eo pid`` output -> set of pids (the header line is skipped)."""
    return {int(tok) for tok in str(text or "").split() if tok.isdigit()}


def foreign_listeners(listeners, ours, ports):
    """Listeners on ``ports`` whose processes are none of ``ours``: ["PORT NAME(pid PID)", ...], no duplicates."""
    found = []
    wanted = {int(p) for p in ports}
    for port, users in listeners:
        if port not in wanted or any(pid in ours for _name, pid in users):
            continue
        if users:
            text = "%d %s(pid %d)" % (port, users[0][0], users[0][1])
        else:
            text = "%d (process not shown)" % port
        if text not in found:
            found.append(text)
    return found


def mem_available_bytes(meminfo):
    """MemAvailable of /proc/meminfo in bytes, or None."""
    m = re.search(r"^MemAvailable:\s+(\d+)\s*kB", str(meminfo or ""), re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def parse_du(text):
    """``du -b --max-depth=N DIR`` output -> {path: bytes}."""
    out = {}
    for line in str(text or "").splitlines():
        size, dummy, path = line.partition("\t")
        if size.strip().isdigit() and path:
            out[path.rstrip("/")] = int(size)
    return out


def model_cache_dir(model):
    """Where specdec_server puts a model of the plan under the HF cache: its local_dir, else hub/models--ORG--NAME."""
    if model.get("local_dir"):
        return str(model["local_dir"]).strip("/")
    return "hub/models--" + str(model["repo"]).replace("/", "--")


def bytes_in_cache(du, model):
    """Bytes of a model already in the cache (0 when absent), from parse_du's map."""
    rel = "/" + model_cache_dir(model)
    for path, size in du.items():
        if path.endswith(rel):
            return size
    return 0


def hostfile_hosts(text):
    """Hosts of an OpenMPI hostfile (comments and blank lines skipped; the first word of each line)."""
    out = []
    for line in str(text or "").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line.split()[0])
    return out


def inspect_first(text):
    """The first object of ``docker (container|image) inspect`` JSON output, or {}."""
    try:
        doc = json.loads(text or "[]")
    except ValueError:
        return {}
    if isinstance(doc, list):
        doc = doc[0] if doc else {}
    return doc if isinstance(doc, dict) else {}


def image_id(text):
    """``docker image inspect NAME`` -> the image id ("" when unknown)."""
    return str(inspect_first(text).get("Id") or "")


def container_env(text):
    """``docker container inspect NAME`` -> its environment {NAME: value} (Config.Env)."""
    items = (inspect_first(text).get("Config") or {}).get("Env") or []
    out = {}
    for item in items if isinstance(items, list) else []:
        name, sep, value = str(item).partition("=")
        if sep:
            out[name] = value
    return out


def docker_runtimes(text):
    """The runtimes of ``docker info`` (the ``Runtimes:`` line), e.g. ['io.containerd.runc.v2', 'runc']."""
    for line in str(text or "").splitlines():
        name, sep, value = line.strip().partition(":")
        if sep and name == "Runtimes":
            return value.split()
    return []


def has_nvidia_runtime(text):
    """``docker info`` names an nvidia runtime."""
    return any("nvidia" in name for name in docker_runtimes(text))


def fabric_addresses(fabric):
    """IPv4 addresses (no prefix) on the logical-1 netdev of each CX-7 port, from nccl_interface_info."""
    out = []
    for iface in (fabric or {}).get("interfaces") or []:
        entry = _nccl.table_entry(iface.get("netdev"))
        if not entry or entry[1] != 1:
            continue
        for cidr in iface.get("ipv4") or []:
            try:
                out.append(str(ipaddress.ip_interface(cidr).ip))
            except ValueError:
                continue
    return out


# ---------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------

def _entry(check_id, node, status, message, fix):
    return {"id": check_id, "node": node, "status": status, "message": message, "fix": fix}


def _cmd(probe, name):
    return probe.get(name) or {"rc": None, "stdout": "", "stderr": ""}


def _missing(probe, name, part):
    """Why a command of the probe has no result (its part could not run), or None."""
    if name in probe:
        return None
    return (probe.get("_errors") or {}).get(part) or "the probe did not run %s" % name


def hf_summary(hf_results, models):
    """(bad messages, repos, sizes) of the hf_download check-mode results, in the plan's model order."""
    bad, repos, sizes = [], [], []
    for result in hf_results or []:
        repo = ((result.get("item") or {}).get("repo")) if isinstance(result.get("item"), dict) else None
        repos.append(repo or result.get("repo_id") or "?")
        if result.get("failed"):
            bad.append(one_line(result.get("msg") or "hf_download failed"))
        sizes.append(int(result.get("bytes_total") or 0))
    if not hf_results and models:
        bad.append("no Hub answer for %s" % ", ".join(m["repo"] for m in models))
    return bad, repos, sizes


def _model_sizes(ctx):
    """(unknown message or None, sizes per model, total, weights per node)."""
    bad, _repos, sizes = hf_summary(ctx["hf_results"], ctx["models"])
    total = sum(sizes)
    if bad or total == 0:
        return "skipped: model sizes unknown (hf_access failed)", sizes, total, 0
    tp = max(int(ctx["tp_size"] or 1), 1)
    per_node = 0
    for model, size in zip(ctx["models"], sizes):
        per_node += size // tp if model.get("role") == "target" else size
    return None, sizes, total, per_node


def check_docker_nosudo(node, probe, ctx):
    cmd = _cmd(probe, "docker_ps")
    if cmd["rc"] == 0:
        return "pass", "docker ps works without sudo"
    reason = one_line(cmd["stderr"]) or _missing(probe, "docker_ps", "user") or "rc=%s" % cmd["rc"]
    return "fail", "docker ps failed: " + reason


def check_gpu_runtime(node, probe, ctx):
    if not ctx["gpus"].get(node, True):
        return "skip", "skipped: this inventory has no GPU (trtllm_container_gpus: false)"
    cmd = _cmd(probe, "runtimes")
    if cmd["rc"] == 0 and has_nvidia_runtime(cmd["stdout"]):
        return "pass", "Docker has the nvidia runtime"
    if cmd["rc"] == 0:
        return "fail", "Docker has no nvidia runtime: runtimes %s" % (", ".join(docker_runtimes(cmd["stdout"])) or "none")
    reason = one_line(cmd["stderr"]) or _missing(probe, "runtimes", "user") or "rc=%s" % cmd["rc"]
    return "fail", "Docker has no nvidia runtime: docker info failed: " + reason


def check_ports_free(node, probe, ctx):
    listen = _cmd(probe, "listen")
    ports = (ctx["server_port"], ctx["ssh_port"])
    if listen["rc"] != 0:
        reason = one_line(listen["stderr"]) or _missing(probe, "listen", "root") or "rc=%s" % listen["rc"]
        return "fail", "cannot list the listening ports (ss -Hltnp as root): " + reason
    ours = parse_pids(_cmd(probe, "ours")["stdout"]) if _cmd(probe, "ours")["rc"] == 0 else set()
    foreign = foreign_listeners(parse_listeners(listen["stdout"]), ours, ports)
    if foreign:
        return "fail", "taken by another process: " + "; ".join(foreign)
    return "pass", "ports %s and %s are free or ours" % ports


def check_endpoint_exposure(node, probe, ctx):
    """Who may call the endpoint, from the plan (the bind address, the API key and specdec_server_allowed_networks):
    warns when the server listens on every interface without a key and without our host firewall. A firewall of the
    user's own is not looked at (the warning says so)."""
    head, exposure, host, port = ctx["head"], ctx["exposure"], ctx["bind_host"], ctx["server_port"]
    if not exposure:
        return "skip", "skipped: the plan names no bind address"
    if head and node != head:
        return "skip", "skipped: the server listens on the head (%s)" % head
    where = "%s:%s" % ("[%s]" % host if ":" in str(host) else host, port)
    allowed = ctx.get("allowed_networks") or []
    # An allow-list with a /0 (0.0.0.0/0, ::/0) admits every client: no restriction, judged as if there were none.
    if allowed and exposure != "loopback" and not _firewall.admits_everyone(allowed):
        return "pass", ("the endpoint listens on %s%s; the host firewall (ufw, specdec_server_allowed_networks) admits "
                        "only %s to port %s" % (where, "" if ctx["api_key"] else " with no API key", ", ".join(allowed),
                                                port))
    if exposure == "open_unauthenticated":
        return "warn", ("the endpoint listens on %s (every interface) with no API key: anyone on any network this node is "
                        "on can call it (a host firewall, if any, is not checked)" % where)
    if exposure == "open":
        return "pass", "the endpoint listens on %s (every interface) and requires the API key" % where
    if exposure == "loopback":
        return "pass", "the endpoint listens on %s: only the node itself can call it" % where
    return "pass", "the endpoint listens on %s only%s" % (where, " and requires the API key" if ctx["api_key"] else "")


def check_clock_sync(node, probe, ctx):
    cmd = _cmd(probe, "clock")
    if cmd["rc"] != 0:
        reason = one_line(cmd["stderr"]) or _missing(probe, "clock", "user") or "rc=%s" % cmd["rc"]
        return "skip", "skipped: timedatectl cannot report NTP sync on this node (no systemd?): " + reason
    value = cmd["stdout"].strip()
    if value == "yes":
        return "pass", "clock synchronised"
    return "fail", ("clock not synchronised: timedatectl reports NTPSynchronized=%s (registry pulls fail with a Root CA "
                    "error)" % value)


def check_hf_access(node, probe, ctx):
    bad, repos, _unused = hf_summary(ctx["hf_results"], ctx["models"])
    if bad:
        return "fail", " | ".join(bad)
    return "pass", "token and access OK for " + ", ".join(repos)


def check_same_user(node, probe, ctx):
    users = []
    for host in ctx["reached"]:
        user = _cmd(ctx["probes"][host], "user")["stdout"].strip() or "?"
        if user not in users:
            users.append(user)
    return ("pass" if len(users) == 1 else "fail"), "deploy user(s): " + ", ".join(users)


def _port_of(fabric):
    if not fabric or fabric.get("failed") or fabric.get("skipped"):
        return None
    return fabric.get("selected_port")


def check_same_port(node, probe, ctx):
    mine = ctx["fabric"].get(node) or {}
    if mine.get("failed"):
        return "fail", one_line(mine.get("msg")) or "nccl_interface_info failed"
    if ctx.get("layout") == "ring":
        # A ring cables both ports of every Spark (module_utils/_layout.cabling_problems: all four logical
        # interfaces Up, each cable's ends in one subnet once addressed).
        facts = {h: ctx["fabric"].get(h) for h in ctx["reached"]}
        problems = _layout.cabling_problems("ring", facts, list(ctx["reached"]))
        return ("fail", " ".join(problems)) if problems else ("pass", "ring: all four logical interfaces Up on %s"
                                                              % ", ".join(ctx["reached"]))
    by_node = [(h, _port_of(ctx["fabric"].get(h))) for h in ctx["reached"]]
    ports = {p for _h, p in by_node}
    text = "cabled port per node: " + ", ".join("%s: port %s" % (h, "unknown" if p is None else p) for h, p in by_node)
    return ("pass" if len(ports) == 1 and None not in ports else "fail"), text


def check_link_speed(node, probe, ctx):
    fabric = ctx["fabric"].get(node) or {}
    if fabric.get("failed") or not fabric.get("selected_interfaces"):
        return "skip", "skipped: no cabled port detected on this node (see same_port)"
    slow = [i for i in fabric.get("interfaces") or []
            if i.get("netdev") in fabric["selected_interfaces"] and isinstance(i.get("speed_mbps"), int)
            and not isinstance(i.get("speed_mbps"), bool) and i["speed_mbps"] < _nccl.EXPECTED_SPEED_MBPS]
    if slow:
        return "warn", "below %d Mb/s: %s at %s Mb/s" % (
            _nccl.EXPECTED_SPEED_MBPS, ", ".join(i["netdev"] for i in slow), ", ".join(str(i["speed_mbps"]) for i in slow))
    return "pass", "links at %d Mb/s" % _nccl.EXPECTED_SPEED_MBPS


def check_fabric_ips(node, probe, ctx):
    cmd = _cmd(probe, "hostfile")
    if cmd["rc"] != 0:
        return "skip", "skipped: no OpenMPI hostfile yet (not deployed)"
    hosts = hostfile_hosts(cmd["stdout"])
    node_ips = [ip for h in ctx["reached"] for ip in fabric_addresses(ctx["fabric"].get(h))]
    ok = len(hosts) == len(ctx["hosts"]) and all(h in node_ips for h in hosts)
    return ("pass" if ok else "fail"), "hostfile %s %s the fabric addresses %s" % (
        ", ".join(hosts), "matches" if ok else "does not match", ", ".join(node_ips))


def check_nccl_env(node, probe, ctx):
    cmd = _cmd(probe, "env")
    if cmd["rc"] != 0:
        reason = one_line(cmd["stderr"]) or _missing(probe, "env", "user") or ""
        return "skip", "skipped: cannot inspect container %s (not created yet, or Docker not usable): %s" % (
            ctx["container"], reason)
    env = container_env(cmd["stdout"])
    shown = ", ".join("%s=%s" % (name, env.get(name, "unset")) for name in INTERFACE_ENV)
    boot = ctx.get("bootstrap_env") or {}
    if all(boot.get(name) for name in INTERFACE_ENV):
        # specdec_nccl_bootstrap: management_interface: the plan's launch spec names the interface (the container's
        # environment comes from the same function, module_utils/_layout.fabric_env).
        ok = all(env.get(name, "") == boot[name] for name in INTERFACE_ENV)
        return ("pass" if ok else "fail"), "container has %s; the launch bootstraps over %s (specdec_nccl_bootstrap)" % (
            shown, boot["NCCL_SOCKET_IFNAME"])
    want = (ctx["fabric"].get(node) or {}).get("nccl_socket_ifname") or ""
    ok = bool(want) and all(env.get(name, "") == want for name in INTERFACE_ENV)
    return ("pass" if ok else "fail"), "container has %s; the Up interfaces are %s" % (shown, want or "unknown")


def check_same_image(node, probe, ctx):
    image = ctx["image"]
    if _cmd(probe, "image")["rc"] != 0:
        return "skip", "skipped: %s is not on this node yet (or Docker is not usable here)" % image
    ids = [(h, image_id(_cmd(ctx["probes"][h], "image")["stdout"]) if _cmd(ctx["probes"][h], "image")["rc"] == 0 else "")
           for h in ctx["hosts"] if h in ctx["probes"]]
    ids += [(h, "") for h in ctx["hosts"] if h not in ctx["probes"]]
    by_node = "image ids: " + ", ".join("%s=%s" % (h, i) for h, i in ids)
    problem = _container.same_image_problem(dict(ids), image, consequence="")  # the deploy's own comparison and line
    if problem:
        return "fail", problem
    if any(not i for _h, i in ids):
        return "skip", "skipped, not on every node yet: " + by_node
    return "pass", by_node


def check_pending_change(node, probe, ctx):
    """A container change an earlier run left pending (module_utils/_container_change.py): warns naming the kept
    container, its image, the change's image and this run's, since when, and what the next deployment does with it
    (the deployment's decision, _container_change.apply_decision, on what the image names tell; the warning says so).
    Fact ``pending_change`` of preflight_info: record (path), present, text, error, kept (docker container inspect of
    ``<container>-previous``: rc, stdout, stderr); the current container is the ``env`` inspect."""
    fact = probe.get("pending_change")
    if not isinstance(fact, dict):
        return "skip", "skipped: " + (_missing(probe, "pending_change", "user") or "no facts about a container change")
    path = fact.get("record") or "container-previous.json"
    if not fact.get("present"):
        return "pass", "no container change is pending (no %s)" % path
    record = _container_change.parse_record(fact.get("text"))
    if fact.get("error") or not record:
        return "warn", ("%s is there but is not a container change record of schema %d (%s): the next deployment "
                        "ignores it and keeps nothing" % (path, _container_change.SCHEMA_VERSION,
                                                          one_line(fact.get("error")) or "unreadable")), (
            "Remove %s, or run teardown.yml." % path)
    kept_cmd = fact.get("kept") or {}
    kept = inspect_first(kept_cmd.get("stdout")) if kept_cmd.get("rc") == 0 else {}
    env_cmd = _cmd(probe, "env")
    current = inspect_first(env_cmd["stdout"]) if env_cmd["rc"] == 0 else {}
    old_id = record["container"]["id"]
    if kept_cmd.get("rc") != 0 and "no such" not in str(kept_cmd.get("stderr") or "").lower():
        state = "unknown"  # Docker could not be read (not "no such container")
    elif kept.get("Id") == old_id:
        state = "present"
    elif not kept and current.get("Id") == old_id:
        state = "current"
    else:
        state = "absent" if not kept else "other"
    # The container under the record's name for the deployment's decision: its inspect, None when Docker says there is
    # none, True (there, unread) when the inspect failed otherwise.
    there = current or (None if "no such" in str(env_cmd.get("stderr") or "").lower() else True)
    settings = record["container"].get("settings") or {}
    where = {"present": "kept, stopped, as %s" % record["kept_name"],
             "absent": "recorded, but %s is gone" % record["kept_name"],
             "other": "recorded, but %s is another container" % record["kept_name"],
             "current": "recorded, but it runs as %s (an interrupted keep or restore)" % record["name"],
             "unknown": "kept as %s (Docker could not be read)" % record["kept_name"]}[state]
    message = ("a container change to %s is pending since %s: the previous container (id %s, image %s) is %s; this "
               "run asks for %s: %s" % (record["change"].get("image") or "?", record.get("kept_at") or "?",
                                        old_id[:12], settings.get("image") or "?", where, ctx["image"] or "?",
                                        _container_change.pending_outlook(record, state, ctx["image"], there)))
    if state in ("absent", "other", "current"):
        return "warn", message, ("Look at the containers (docker ps -a); once %s is the container to keep, remove %s "
                                 "and re-run." % (record["name"], path))
    return "warn", message


def check_disk_space(node, probe, ctx):
    unknown, sizes, total, _per_node = _model_sizes(ctx)
    if unknown:
        return "skip", unknown
    free_cmd = _cmd(probe, "disk_free")
    free = free_cmd["stdout"].strip()
    if free_cmd["rc"] != 0 or not free.isdigit():
        reason = one_line(free_cmd["stderr"]) or _missing(probe, "disk_free", "user") or "no answer"
        return "skip", "skipped: free disk space unknown (df): " + reason
    free = int(free)
    du = parse_du(_cmd(probe, "cache")["stdout"])
    present = sum(min(bytes_in_cache(du, m), size) for m, size in zip(ctx["models"], sizes))
    need = max(total - present, 0)
    reserve = ctx["disk_reserve"]
    fits = free >= need + reserve
    return ("pass" if fits else "fail"), (
        "%d bytes of models (%d already in the cache, %d to download) + %d bytes reserve (preflight_disk_reserve_bytes) "
        "%s %d bytes free under %s" % (total, present, need, reserve, "fit in" if fits else "do not fit in", free,
                                       ctx["hf_cache_dir"] or DEFAULT_HF_CACHE))


def check_memory_budget(node, probe, ctx):
    unknown, _unused, _total, per_node = _model_sizes(ctx)
    if unknown:
        return "skip", unknown
    reserve, usable = ctx["memory_reserve"], ctx["usable_memory"]
    fits = (per_node + reserve) * 10 <= usable * MEMORY_SHARE_TENTHS
    return ("pass" if fits else "fail"), (
        "weights per node %d bytes (target/tp_size %s + draft) + %d bytes reserve (preflight_memory_reserve_bytes) %s "
        "90%% of %d usable bytes (preflight_usable_memory_bytes); the KV cache takes its fraction of what is left"
        % (per_node, ctx["tp_size"], reserve, "fit in" if fits else "do not fit in", usable))


def check_mem_available(node, probe, ctx):
    unknown, _unused, _total, per_node = _model_sizes(ctx)
    if unknown:
        return "skip", unknown
    avail = mem_available_bytes(_cmd(probe, "meminfo")["stdout"])
    if avail is None:
        reason = one_line(_cmd(probe, "meminfo")["stderr"]) or _missing(probe, "meminfo", "user") or "no MemAvailable"
        return "skip", "skipped: MemAvailable unknown (/proc/meminfo): " + reason
    reserve = ctx["memory_reserve"]
    below = avail < per_node + reserve
    return ("warn" if below else "pass"), (
        "MemAvailable %d bytes %s %d bytes of weights + %d bytes reserve (preflight_memory_reserve_bytes)"
        % (avail, "is below" if below else "covers", per_node, reserve))


# ---------------------------------------------------------------------------------------------
# SSH between the nodes and between the containers (BatchMode, read-only)
# ---------------------------------------------------------------------------------------------

# (kind, pattern of ssh's or docker's stderr), first match wins.
SSH_KINDS = (
    ("no_container", re.compile(r"No such container|is not running|is restarting|is paused", re.I)),
    ("docker", re.compile(r"permission denied while trying to connect to the docker|Cannot connect to the Docker daemon",
                          re.I)),
    ("host_key", re.compile(r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|"
                            r"host key for \S+ has changed|No \S+ host key is known", re.I)),
    ("publickey", re.compile(r"Permission denied \(", re.I)),
    ("refused", re.compile(r"Connection refused", re.I)),
    ("timeout", re.compile(r"timed out|Timeout", re.I)),
    ("no_route", re.compile(r"No route to host|Network is unreachable|Cannot assign requested address", re.I)),
    ("dns", re.compile(r"Could not resolve hostname|Name or service not known|Temporary failure in name resolution",
                       re.I)),
    ("closed", re.compile(r"Connection closed|Connection reset|kex_exchange_identification|Broken pipe", re.I)),
    ("no_client", re.compile(r"ssh: (command )?not found|executable file not found|ssh: No such file", re.I)),
)
# `timeout` (coreutils) exits 124 when the whole command overran.
TIMEOUT_RC = 124

_SSH_WHAT = {
    "ssh_nodes": "ssh as the deploy user to the peer's sshd",
    "ssh_containers": "ssh from this node's container to the peer container's sshd",
}


def classify_ssh(rc, stderr):
    """An ``ssh -o BatchMode=yes ... true`` (maybe through ``docker exec``) result -> kind.

    ``ok``, one of SSH_KINDS (``no_container`` and ``docker``: the test could not run), or ``other``.
    """
    if rc == 0:
        return "ok"
    if rc == TIMEOUT_RC:
        return "timeout"
    text = str(stderr or "")
    for kind, pattern in SSH_KINDS:
        if pattern.search(text):
            return kind
    return "other"


def ssh_fix(check_id, kind, port, key_dir, container):
    """The fix of one SSH failure kind, for the node mesh (ssh_nodes) or the container mesh (ssh_containers)."""
    if check_id == "ssh_nodes":
        fixes = {
            "refused": "Nothing accepts SSH on port 22 of that peer address: start the peer's sshd (sudo systemctl "
                       "enable --now ssh) and check Port/ListenAddress in its /etc/ssh/sshd_config.",
            "publickey": "The peer does not accept this node's mesh key: re-run two_sparks.yml (ssh_mesh adds "
                         "~/.ssh/id_ed25519_sparkops.pub to the peer's ~/.ssh/authorized_keys); on the peer ~/.ssh must "
                         "be 0700 and owned by the user (sshd StrictModes).",
            "host_key": "The peer's host key is not the one pinned in ~/.ssh/known_hosts_sparkops (peer reinstalled?): "
                        "remove the stale line (ssh-keygen -R ADDRESS -f ~/.ssh/known_hosts_sparkops) and re-run "
                        "two_sparks.yml, which pins the current keys.",
        }
    else:
        fixes = {
            "refused": "The peer container's sshd does not listen on that address and port %s: is the container "
                       "running, and did its sshd find its fabric addresses (docker logs %s on the peer)? Port %s "
                       "taken by another process (see ports_free)? Re-run two_sparks.yml." % (port, container, port),
            "publickey": "The peer container does not accept this node's container mesh key from this address: "
                         "%s/mesh/authorized_keys on the peer must hold this node's key with this node's fabric "
                         "addresses in from=\"...\": re-run two_sparks.yml (ssh_mesh rewrites it)." % key_dir,
            "host_key": "The peer container's host key is not pinned in %s/mesh/known_hosts on this node (or the "
                        "peer's %s/ssh_host_ed25519_key changed): re-run two_sparks.yml." % (key_dir, key_dir),
        }
    common = {
        "timeout": "No answer within the connect timeout: check the cable and the links (ibdev2netdev), the "
                   "addresses on both nodes (ip addr) and any firewall on the fabric.",
        "no_route": "This node has no route to that address: the fabric link or address is missing on one node "
                    "(ibdev2netdev, ip addr; see same_port and fabric_ips).",
        "dns": "The peer name does not resolve: use the fabric addresses (the hostfile's).",
        "closed": "The peer's sshd closed the connection (MaxStartups, AllowUsers/DenyUsers, or sshd restarting): "
                  "read its log.",
        "no_client": "Install the OpenSSH client (on the node, or in the image for the containers).",
        "other": "Run the same command with -v to see why.",
    }
    fixes.update(common)
    return fixes.get(kind, common["other"])


def check_ssh(check_id, node, probe, ctx):
    """ssh_nodes / ssh_containers: every peer fabric address answered a BatchMode ssh with ``true``."""
    results = probe.get(check_id)
    if not isinstance(results, list):
        return "fail", "no %s result from this node (%s)" % (check_id, _missing(probe, check_id, "user") or "?"), None
    if not results:
        return "skip", ("skipped: no fabric address of a peer is known (see same_port and fabric_ips)"), None
    bad, skipped, good = [], [], []
    for res in results:
        target = "%s (%s)" % (res.get("address"), res.get("host"))
        kind = classify_ssh(res.get("rc"), res.get("stderr"))
        if kind == "ok":
            good.append(target)
        elif kind in ("no_container", "docker"):
            skipped.append((target, one_line(res.get("stderr"))))
        else:
            bad.append((target, kind, one_line(res.get("stderr")) or "rc=%s" % res.get("rc")))
    if bad:
        kinds = []
        for dummy, kind, dummy2 in bad:
            if kind not in kinds:
                kinds.append(kind)
        fix = " ".join(ssh_fix(check_id, k, ctx["ssh_port"], ctx["host_key_dir"], ctx["container"]) for k in kinds)
        return "fail", "%s failed: %s" % (_SSH_WHAT[check_id], "; ".join(
            "%s: %s: %s" % (t, k, e) for t, k, e in bad)), fix
    if skipped:
        return "skip", "skipped: cannot run ssh in container %s (not running, or Docker not usable here): %s" % (
            ctx["container"], skipped[0][1]), None
    return "pass", "%s works to %s" % (_SSH_WHAT[check_id], ", ".join(good)), None


def check_ssh_nodes(node, probe, ctx):
    return check_ssh("ssh_nodes", node, probe, ctx)


def check_ssh_containers(node, probe, ctx):
    return check_ssh("ssh_containers", node, probe, ctx)


# ---------------------------------------------------------------------------------------------
# The node's own reach to the Hub or the mirror
# ---------------------------------------------------------------------------------------------

# errno values of Linux (getaddrinfo: EAI_NONAME -2, EAI_AGAIN -3, EAI_NODATA -5).
_DNS_ERRNOS = frozenset((-2, -3, -5))
_ERRNO_KINDS = {111: "refused", 113: "no_route", 101: "no_route", 110: "timeout", 104: "closed"}


def classify_hub(hub):
    """The ``hub`` fact of preflight_info -> (kind, detail).

    kind: ``skipped``, ``http`` (detail: the status), ``dns``, ``refused``, ``no_route``, ``timeout``, ``closed``,
    ``tls_clock`` (certificate not yet valid), ``tls_expired``, ``tls_ca`` (unknown issuer: proxy or private CA),
    ``tls_name`` (host name mismatch), ``tls`` (other TLS errors), ``bad_url`` or ``other`` (detail: the error text).
    """
    hub = hub or {}
    if hub.get("skipped"):
        return "skipped", ""
    if hub.get("status") is not None:
        return "http", int(hub["status"])
    err = hub.get("error") or {}
    etype, errno_ = str(err.get("type") or ""), err.get("errno")
    text = " ".join((str(err.get("text") or ""), str(err.get("verify_message") or "")))
    low = text.lower()
    if etype == "bad_url":
        return "bad_url", one_line(text)
    if etype == "gaierror" or errno_ in _DNS_ERRNOS or "name or service not known" in low \
            or "temporary failure in name resolution" in low or "nodename nor servname" in low:
        return "dns", one_line(text)
    if "not yet valid" in low:
        return "tls_clock", one_line(text)
    if "has expired" in low or "certificate expired" in low:
        return "tls_expired", one_line(text)
    if "unable to get local issuer" in low or "self-signed" in low or "self signed" in low \
            or "unable to get issuer" in low:
        return "tls_ca", one_line(text)
    if "hostname mismatch" in low or "doesn't match" in low or "not valid for" in low:
        return "tls_name", one_line(text)
    if etype in ("timeout", "TimeoutError") or "timed out" in low:
        return "timeout", one_line(text)
    if etype == "ConnectionRefusedError" or "connection refused" in low:
        return "refused", one_line(text)
    if etype.startswith("SSL") or "ssl" in low or "tls" in low or "certificate" in low:
        return "tls", one_line(text)
    if isinstance(errno_, int) and errno_ in _ERRNO_KINDS:
        return _ERRNO_KINDS[errno_], one_line(text)
    if "no route to host" in low or "network is unreachable" in low:
        return "no_route", one_line(text)
    if "connection reset" in low or "remote end closed" in low or "remotedisconnected" in low.replace(" ", ""):
        return "closed", one_line(text)
    return "other", one_line(text) or etype or "no answer"


HUB_FIXES = {
    "dns": "The node cannot resolve the Hub's host name: fix its DNS (/etc/resolv.conf), or use a mirror it can "
           "resolve (specdec_server_hf_endpoint).",
    "refused": "Nothing listens at that host and port as seen from the node: check specdec_server_hf_endpoint (scheme "
               "and port), that the mirror runs, and the node's proxy settings (https_proxy).",
    "no_route": "The node has no route to the Hub: give it a route or a proxy (https_proxy), or use a mirror on "
                "its network (specdec_server_hf_endpoint).",
    "timeout": "No answer in time: a firewall drops the traffic, or the node needs a proxy (https_proxy) or a "
               "mirror (specdec_server_hf_endpoint).",
    "closed": "The connection was closed or reset: a proxy or firewall in the way; check https_proxy.",
    "tls_clock": "The node's clock is behind (the certificate is not yet valid): sudo timedatectl set-ntp true.",
    "tls_expired": "The certificate has expired, or the node's clock is ahead: check date on the node "
                   "(sudo timedatectl set-ntp true) and the mirror's certificate.",
    "tls_ca": "The certificate's issuer is not trusted on the node (a TLS-inspecting proxy or a mirror with a "
              "private CA): install the CA on the node (update-ca-certificates).",
    "tls_name": "The certificate does not name the endpoint's host: use the host name the mirror's certificate "
                "names in specdec_server_hf_endpoint.",
    "tls": "TLS handshake failed: check the proxy and the mirror's TLS setup.",
    "bad_url": "Set specdec_server_hf_endpoint to an http:// or https:// URL.",
    "other": FIXES["hub_reach"],
    "http_407": "The proxy wants credentials: set them in the node's https_proxy.",
    "http_429": "The Hub is rate-limiting this address: wait, or use a token and a mirror.",
    "http_5xx": "The Hub or mirror answers with a server error: retry later or check the mirror.",
    "http_404": "The endpoint answered but does not know the repo: a mirror without it, or a wrong endpoint path "
                "in specdec_server_hf_endpoint.",
}


def check_hub_reach(node, probe, ctx):
    hub = probe.get("hub")
    if not ctx["download"].get(node, True):
        return "skip", "skipped: specdec_server_download is false (the nodes download nothing)", None
    if not isinstance(hub, dict):
        return "fail", "no hub result from this node (%s)" % (_missing(probe, "hub", "user") or "?"), None
    url = hub.get("url") or "the endpoint"
    if hub.get("offline"):
        return "skip", "skipped: the node runs offline (HF_HUB_OFFLINE=%s in its environment)" % hub["offline"], None
    kind, detail = classify_hub(hub)
    if kind == "skipped":
        return "skip", "skipped: %s" % (hub.get("reason") or "not asked to contact the Hub"), None
    if kind == "http":
        status = detail
        if 200 <= status < 400:
            return "pass", "the node reached %s: HTTP %d" % (url, status), None
        if status in (401, 403):
            return "pass", ("the node reached %s: HTTP %d (no token is sent from here; access is the hf_access row)"
                            % (url, status)), None
        if status == 404:
            return "warn", "the node reached %s but it answered HTTP 404" % url, HUB_FIXES["http_404"]
        if status == 407:
            return "fail", "the node's proxy answered HTTP 407 (proxy authentication required) for %s" % url, \
                HUB_FIXES["http_407"]
        if status == 429:
            return "warn", "%s answered HTTP 429 (too many requests) to the node" % url, HUB_FIXES["http_429"]
        if status >= 500:
            return "fail", "%s answered HTTP %d to the node" % (url, status), HUB_FIXES["http_5xx"]
        return "warn", "%s answered HTTP %d to the node" % (url, status), FIXES["hub_reach"]
    words = {
        "dns": "DNS failure", "refused": "connection refused", "no_route": "no route", "timeout": "timed out",
        "closed": "connection closed", "tls_clock": "TLS error, certificate not yet valid (clock)",
        "tls_expired": "TLS error, certificate expired", "tls_ca": "TLS error, untrusted issuer",
        "tls_name": "TLS error, host name mismatch", "tls": "TLS error", "bad_url": "bad endpoint URL",
        "other": "error",
    }
    return "fail", "the node cannot reach %s: %s: %s" % (url, words[kind], detail), HUB_FIXES[kind]


# ---------------------------------------------------------------------------------------------
# GPU: the image run with --gpus all where the node has a GPU
# ---------------------------------------------------------------------------------------------

# (kind, pattern of docker's / the runtime's / nvidia-smi's output), first match wins.
GPU_KINDS = (
    ("docker", re.compile(r"permission denied while trying to connect to the docker|Cannot connect to the Docker daemon",
                          re.I)),
    ("no_image", re.compile(r"No such image|Unable to find image|pull access denied", re.I)),
    ("toolkit", re.compile(r"could not select device driver|unknown or invalid runtime name: nvidia|"
                           r"nvidia-container-runtime(-hook)?: (executable file )?not found|"
                           r"nvidia-container-cli: (command )?not found", re.I)),
    ("mismatch", re.compile(r"Driver/library version mismatch", re.I)),
    ("driver", re.compile(r"driver not loaded|nvml error|libnvidia-ml\.so|couldn't communicate with the NVIDIA driver|"
                          r"NVIDIA-SMI has failed|Failed to initialize NVML|no cuda-capable device", re.I)),
    ("no_device", re.compile(r"No devices were found|unknown device|device error", re.I)),
    ("no_smi", re.compile(r"\"?nvidia-smi\"?: executable file not found|nvidia-smi: (command )?not found", re.I)),
)
_GPU_LINE = re.compile(r"^GPU \d+: .*$", re.MULTILINE)

GPU_FIXES = {
    "toolkit": "Install the NVIDIA Container Toolkit and register it with Docker: sudo nvidia-ctk runtime configure "
               "--runtime=docker && sudo systemctl restart docker (DGX OS ships it).",
    "driver": "The host's NVIDIA driver is not usable: nvidia-smi on the host must work; reinstall the driver or "
              "reboot.",
    "mismatch": "The driver was upgraded without a reboot (driver/library version mismatch): reboot the node.",
    "no_device": "nvidia-smi in the container sees no GPU: check nvidia-smi on the host and the toolkit's cgroup "
                 "setting (no-cgroups in /etc/nvidia-container-runtime/config.toml).",
    "no_smi": "The runtime did not put nvidia-smi into the container: NVIDIA_DRIVER_CAPABILITIES must include "
              "utility (or all); check the toolkit's configuration.",
    "docker": FIXES["docker_nosudo"],
    "timeout": "docker run did not finish in time: look at the Docker daemon (journalctl -u docker) and nvidia-smi "
               "on the host.",
    "no_gpu_listed": "nvidia-smi -L listed no GPU: check nvidia-smi on the host.",
}


def classify_gpu_run(rc, stdout, stderr):
    """``docker run --rm --gpus all IMAGE nvidia-smi -L`` -> (kind, detail).

    kind: ``ok`` (detail: the GPU lines joined by ``; ``), ``no_gpu_listed``, ``timeout``, one of GPU_KINDS or
    ``other`` (detail: the output on one line).
    """
    out = str(stdout or "")
    if rc == 0:
        gpus = _GPU_LINE.findall(out)
        return ("ok", "; ".join(g.strip() for g in gpus)) if gpus else ("no_gpu_listed", one_line(out) or "no output")
    if rc == TIMEOUT_RC:
        return "timeout", one_line(stderr) or "rc=%d" % rc
    text = "%s\n%s" % (stderr or "", out)
    for kind, pattern in GPU_KINDS:
        if pattern.search(text):
            return kind, one_line(stderr) or one_line(out)
    return "other", one_line(stderr) or one_line(out) or "rc=%s" % rc


def check_gpu_run(node, probe, ctx):
    gpu = probe.get("gpu")
    if not isinstance(gpu, dict):
        return "fail", "no gpu result from this node (%s)" % (_missing(probe, "gpu", "user") or "?"), None
    image = ctx["image"]
    if not gpu.get("present"):
        return "skip", "skipped: no GPU on this node (no nvidia-smi on PATH, no /dev/nvidia*)", None
    if not ctx["gpus"].get(node, True):
        return "skip", "skipped: this inventory runs the container without GPUs (trtllm_container_gpus: false)", None
    if not gpu.get("ran"):
        return "skip", "skipped: %s is not on this node yet (preflight pulls nothing)" % image, None
    kind, detail = classify_gpu_run(gpu.get("rc"), gpu.get("stdout"), gpu.get("stderr"))
    if kind == "ok":
        return "pass", "docker run --gpus all %s nvidia-smi -L: %s" % (image, detail), None
    if kind == "no_image":
        return "skip", "skipped: %s is not on this node: %s" % (image, detail), None
    fix = GPU_FIXES.get(kind, FIXES["gpu_run"].replace("%(image)s", image))
    return "fail", "docker run --gpus all %s nvidia-smi -L failed (%s): %s" % (image, kind, detail), fix


CHECKS = {
    "docker_nosudo": check_docker_nosudo,
    "gpu_runtime": check_gpu_runtime,
    "gpu_run": check_gpu_run,
    "ports_free": check_ports_free,
    "endpoint_exposure": check_endpoint_exposure,
    "clock_sync": check_clock_sync,
    "hf_access": check_hf_access,
    "hub_reach": check_hub_reach,
    "same_user": check_same_user,
    "same_port": check_same_port,
    "link_speed": check_link_speed,
    "fabric_ips": check_fabric_ips,
    "ssh_nodes": check_ssh_nodes,
    "ssh_containers": check_ssh_containers,
    "nccl_env": check_nccl_env,
    "same_image": check_same_image,
    "pending_change": check_pending_change,
    "disk_space": check_disk_space,
    "memory_budget": check_memory_budget,
    "mem_available": check_mem_available,
}


def _fix(check_id, ctx):
    if check_id == "memory_budget" and int(ctx["tp_size"] or 1) == 1:
        return FIXES["memory_budget_tp1"]
    return FIXES[check_id].replace("%(image)s", str(ctx["image"]))


def context(hosts, probes, fabric=None, hf_results=None, plan=None, settings=None):
    """Normalise the inputs of build_checks (see there) into one dict."""
    settings = dict(settings or {})
    plan = plan or {}
    inner = plan.get("plan") or {}
    deployment = plan.get("deployment") or {}
    reached = [h for h in hosts if h in (probes or {})]
    return {
        "hosts": list(hosts),
        "reached": reached,
        "probes": {h: probes[h] for h in reached},
        "fabric": dict(fabric or {}),
        "hf_results": list(hf_results or []),
        "models": list(inner.get("models") or []),
        "tp_size": inner.get("tp_size") or 1,
        "server_port": inner.get("port"),
        "head": inner.get("head") or deployment.get("head"),
        "bind_host": inner.get("host"),
        "exposure": inner.get("exposure"),
        "api_key": bool(inner.get("api_key")),
        "allowed_networks": list(inner.get("allowed_networks") or []),
        # The bootstrap variables of the launch spec (specdec_nccl_bootstrap: management_interface; else none).
        "bootstrap_env": {k: v for k, v in (inner.get("rank_env") or {}).items() if k in INTERFACE_ENV},
        "image": deployment.get("image") or inner.get("image") or "",
        "two": (deployment.get("topology") or inner.get("topology") or "two_sparks") != "single_spark",
        # The fabric layout of the plan (direct, ring, switch; None for one Spark): the cabling check follows it.
        "layout": inner.get("layout"),
        "container": settings.get("container", ""),
        "ssh_port": settings.get("ssh_port"),
        "hf_cache_dir": settings.get("hf_cache_dir") or "",
        "gpus": dict(settings.get("gpus") or {}),
        "download": dict(settings.get("download") or {}),
        "host_key_dir": settings.get("host_key_dir") or "/etc/sparkops/trtllm-ssh",
        "usable_memory": int(settings.get("usable_memory_bytes", USABLE_MEMORY_BYTES)),
        "memory_reserve": int(settings.get("memory_reserve_bytes", MEMORY_RESERVE_BYTES)),
        "disk_reserve": int(settings.get("disk_reserve_bytes", DISK_RESERVE_BYTES)),
    }


def check_ids(two):
    return [c for c in CHECK_IDS if two or c not in TWO_NODE_CHECKS]


def unreachable_reasons(reach):
    """host -> why it could not be reached, from host -> its registered reach result (``ignore_unreachable``).

    Only the hosts whose result says ``unreachable``; the reason is the connection's message on one line."""
    out = {}
    for host, result in (reach or {}).items():
        if isinstance(result, dict) and result.get("unreachable"):
            out[str(host)] = one_line(result.get("msg")) or "the connection failed (no message)"
    return out


def build_checks(hosts, probes, fabric=None, hf_results=None, plan=None, settings=None, unreachable=None):
    """Every check on every node: a list of {id, node, status, message, fix}, node by node, in CHECK_IDS order.

    hosts: the play's nodes, in order. probes: host -> merge_probe() of the node's probe. A node in
    ``unreachable`` (host -> reason, unreachable_reasons()) or without a probe was not reached: it is one row,
    id REACHABLE, failed, saying so and why; its checks are not judged. fabric: host -> the nccl_interface_info result.
    hf_results: the hf_download check-mode loop results, in the plan's model order. plan: the registered
    specdec_plan result (``plan.models``, ``plan.port``, ``plan.tp_size``; ``deployment.image``,
    ``deployment.topology``). settings: container, ssh_port, hf_cache_dir, gpus (host -> bool), download
    (host -> bool, specdec_server_download), host_key_dir (specdec_container_host_key_dir),
    usable_memory_bytes, memory_reserve_bytes, disk_reserve_bytes.
    """
    unreachable = unreachable or {}
    probes = {h: probe for h, probe in (probes or {}).items() if h not in unreachable}
    ctx = context(hosts, probes, fabric, hf_results, plan, settings)
    entries = []
    for node in ctx["hosts"]:
        if node in unreachable:
            entries.append(_entry(REACHABLE, node, "fail", "unreachable: %s" % unreachable[node], FIXES["unreached"]))
            continue
        if node not in ctx["probes"]:
            entries.append(_entry(REACHABLE, node, "fail", "no facts from this node (it left the play earlier: "
                                  "unreachable, or its probe failed)", FIXES["unreached"]))
            continue
        for check_id in check_ids(ctx["two"]):
            verdict_ = CHECKS[check_id](node, ctx["probes"][node], ctx)
            status, message = verdict_[0], verdict_[1]
            fix = verdict_[2] if len(verdict_) > 2 and verdict_[2] else _fix(check_id, ctx)
            entries.append(_entry(check_id, node, status, message, fix))
    return entries


def summary(entries):
    """One line per entry: ``STATUS | id | node | message``."""
    return [" | ".join((e["status"].upper(), e["id"], e["node"], e["message"])) for e in entries]


def verdict(entries):
    """(passed, message): the failed checks as ``id | node | message | fix`` joined by `` || ``, or the pass line."""
    failed = [e for e in entries if e["status"] == "fail"]
    if failed:
        return False, " || ".join(" | ".join((e["id"], e["node"], e["message"], e["fix"])) for e in failed)
    return True, ("Preflight passed (%d checks; warnings and skips are in the summary and the report)." % len(entries))
