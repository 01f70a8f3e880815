# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: used only by the action plugin
# sparkops.specdec.teardown_plan. Not a public API; names and return shapes may change in any
# release without notice.
"""The teardown plan of sparkops.specdec as pure functions (no Ansible, no I/O).

``playbooks/teardown.yml`` reads each node (one probe: the container's state, the HF cache's
directories, the netplan file, the IPv4 addresses) and ``plan_node`` decides what goes:

* the container (and the server in it): always;
* the container a pending container change kept (``<name>-previous``, module_utils/_container_change.py) and its
  record ``<specdec_state_dir>/container-previous.json``: the container only when it is the one the record names
  (same container id), never another container of that name; the record when it is one of this container's;
* the models this collection downloads: only with ``teardown_remove_models``;
* the netplan file: only with ``teardown_remove_netplan`` and only if it carries netplan_qsfp's
  mark, together with its addresses on the ConnectX-7 interfaces that are present now; the
  management address (the Ansible connection) is never removed;
* the deployment state files ``<specdec_state_dir>/deployments/<id>.json``: they stay (the tuner's pick
  ``tuned`` in them is reused by a redeploy), but each one that records a running server is marked
  torn down (``running`` becomes null, the launch that ran becomes ``previous``, ``torn_down_at`` and
  ``updated_at`` are the teardown's time), so that the status reports ``torn_down``, not ``down``;
  with ``teardown_remove_state`` they go entirely (and with them the tuned picks);
* the SSH mesh: only with ``teardown_remove_mesh``; the play reads, on each node, what
  ``sparkops.specdec.ssh_mesh_keys`` with ``state: absent`` would change (check mode: our marked blocks in the
  cluster user's ``~/.ssh`` files, the container mesh files) and the node's plan removes it when there is
  something to remove; the user's mesh key and the pinned container host key stay.

``plan_message`` builds the confirmation (nothing is removed without ``confirm=yes``; check mode
only shows the plan). The probe format is the one of ``_preflight.parse_probe``.
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import json

from ansible_collections.sparkops.specdec.plugins.module_utils import _container_change, _nccl
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan
from ansible_collections.sparkops.specdec.plugins.plugin_utils._preflight import inspect_first, one_line

# netplan_qsfp writes this mark in the files it owns (same text as in _netplan).
NETPLAN_MARK = "Managed by sparkops.specdec"
# The directories this collection downloads into under the HF cache: the drafts, the tiktoken
# files, and each preset's target in the hub layout (hub/models--ORG--NAME); engines llamacpp and vllm keep
# their draft in the hub layout too.
MODEL_DIRS = (_plan.DRAFTS_SUBDIR, _plan.TIKTOKEN_SUBDIR) + tuple(
    "hub/models--" + preset[key].replace("/", "--") for preset in _plan.PRESETS.values()
    for key in (("target_model", "draft_model") if preset.get("engine") in ("llamacpp", "vllm") else ("target_model",))
    if preset.get(key))
CONFIRM_WORDS = ("yes", "true")
KEEP_MODELS = "models stay (add -e teardown_remove_models=true to remove them)"
KEEP_NETPLAN = "the netplan file and fabric addresses stay (add -e teardown_remove_netplan=true to remove them)"
KEEP_STATE = ("the deployment state files stay, marked torn down, with the tuner's picks a redeploy reuses (add "
              "-e teardown_remove_state=true to remove them)")
KEEP_MESH = ("the SSH mesh stays: the nodes still trust each other's mesh keys (add -e teardown_remove_mesh=true to "
             "remove our marked blocks in ~/.ssh and the container mesh files)")
MESH_KEYS_STAY = ("the cluster user's mesh key in ~/.ssh and the pinned container host key stay (a redeploy reuses "
                  "them; remove them by hand if no deployment will)")
REMOVE_STATE = ("the deployment state files go with teardown_remove_state, and with them the tuner's picks (tuned) "
                "a redeploy would have reused")


def confirmed(value):
    """``-e confirm=yes`` (or true, any case, also a boolean true)."""
    return str(value if value is not None else "").strip().lower() in CONFIRM_WORDS


def container_state(cmd):
    """``docker container inspect NAME`` (as a probe entry) -> exists, status, running, restarting."""
    cmd = cmd or {}
    if cmd.get("rc") != 0:
        error = one_line(cmd.get("stderr"))
        absent = not error or "no such" in error.lower()
        return {"exists": False, "status": None, "running": False, "restarting": False,
                "error": None if absent else error}
    state = inspect_first(cmd.get("stdout")).get("State") or {}
    return {"exists": True, "status": state.get("Status") or "unknown", "running": bool(state.get("Running")),
            "restarting": bool(state.get("Restarting")), "error": None}


def _inspect_id(cmd):
    """The container id of a ``docker container inspect`` probe entry ("" when it printed none)."""
    return str(inspect_first((cmd or {}).get("stdout")).get("Id") or "")


def kept_container(host, name, probe, record_path):
    """What teardown does about a pending container change on one node: (plan, removals, notes).

    probe: ``kept`` (docker container inspect <name>-previous) and ``record`` (cat of the record); a probe without
    them (an older play) has no pending change. record_path: the record's path on the node. The kept container is
    removed (by its id) only when it is the container the record names; a container of that name that the record
    does not name stays. The record goes when it is this container's (or unreadable: nothing can use it); a record
    of another container name stays, so that a teardown with that name still finds its container.
    """
    kept_as = _container_change.kept_name(name)
    plan = {"name": kept_as, "id": "", "status": None, "image": None, "requested": None, "remove": False,
            "record": record_path, "remove_record": False}
    items, notes = [], []
    record_cmd = probe.get("record") or {}
    kept = container_state(probe.get("kept"))
    kept_id = _inspect_id(probe.get("kept")) if kept["exists"] else ""
    if record_cmd.get("rc") != 0:
        if kept["exists"]:
            notes.append("%s: container %s stays: no record of sparkops.specdec names it (%s is absent); remove it with "
                         "docker rm if it is not needed." % (host, kept_as, record_path))
        return plan, items, notes
    record = _container_change.parse_record(record_cmd.get("stdout"))
    if record and record["name"] != name:
        notes.append("%s: %s records a change of container %s, not %s: it stays (run teardown.yml with "
                     "-e specdec_container_name=%s to remove that one)." % (host, record_path, record["name"], name,
                                                                            record["name"]))
        return plan, items, notes
    plan["remove_record"] = True
    if not record:
        items.append("unreadable container change record %s" % record_path)
        if kept["exists"]:
            notes.append("%s: container %s stays: %s cannot be read, so nothing says sparkops.specdec kept it; "
                         "remove it with docker rm if it is not needed." % (host, kept_as, record_path))
        return plan, items, notes
    settings = record["container"].get("settings") or {}
    plan.update(image=settings.get("image"), requested=record["change"].get("image"))
    about = "kept for the change from %s to %s" % (plan["image"] or "?", plan["requested"] or "?")
    if kept["exists"] and kept_id == record["container"]["id"]:
        plan.update(id=kept_id, status=kept["status"], remove=True)
        items.append("previous container %s (%s, %s)" % (kept_as, kept["status"], about))
    elif kept["exists"]:
        notes.append("%s: container %s stays: it is not the container %s names (id %s, not %s)." % (
            host, kept_as, record_path, kept_id[:12] or "?", record["container"]["id"][:12]))
    elif kept["error"]:
        # Docker did not answer: remove the recorded container if it exists (by its id: never another one).
        plan.update(id=record["container"]["id"], remove=True)
        notes.append("%s: cannot inspect container %s (%s); the container %s recorded (id %s) is removed if it "
                     "exists." % (host, kept_as, kept["error"], record_path, record["container"]["id"][:12]))
    items.append("container change record %s (%s)" % (record_path, about))
    return plan, items, notes


def our_model_dirs(cache, listing):
    """Existing directories of MODEL_DIRS under ``cache`` (absolute paths, MODEL_DIRS order).

    ``listing``: the directories found under the cache and under cache/hub, one path a line.
    """
    cache = str(cache or "").rstrip("/")
    found = {line.strip().rstrip("/") for line in str(listing or "").splitlines() if line.strip()}
    return [cache + "/" + rel for rel in MODEL_DIRS if cache and (cache + "/" + rel) in found]


def _address_text(entry):
    """A netplan ``addresses`` entry: "CIDR" or {CIDR: {label: ..., lifetime: ...}}."""
    if isinstance(entry, dict):
        return str(next(iter(entry), "")) if len(entry) == 1 else ""
    return str(entry)


def netplan_addresses(text):
    """(ours, [(cidr, dev), ...], problem): the ConnectX-7 addresses of a netplan file that carries our mark."""
    import yaml  # PyYAML ships with ansible-core; imported here so this module needs the stdlib only to load

    text = str(text or "")
    if NETPLAN_MARK not in text:
        return False, [], None
    try:
        doc = yaml.safe_load(text) or {}
        ethernets = ((doc.get("network") or {}).get("ethernets") or {}) if isinstance(doc, dict) else {}
    except yaml.YAMLError as exc:
        return True, [], "cannot read its addresses (%s)" % one_line(exc)[:120]
    out = []
    for dev, conf in ethernets.items() if isinstance(ethernets, dict) else []:
        if dev not in _nccl.CX7_NETDEVS or not isinstance(conf, dict):
            continue
        for entry in conf.get("addresses") or []:
            cidr = _address_text(entry)
            try:
                ipaddress.ip_interface(cidr)
            except ValueError:
                continue
            out.append((cidr, dev))
    return True, out, None


def present_addresses(ip_text):
    """``ip -o -4 addr show`` -> set of (cidr, dev) on the host now."""
    out = set()
    for line in str(ip_text or "").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "inet":
            out.add((fields[3], fields[1].rstrip(":").split("@")[0]))
    return out


def _is_management(cidr, management):
    try:
        return str(ipaddress.ip_interface(cidr).ip) == str(management)
    except ValueError:
        return False


def parse_state_listing(text):
    """The ``records`` probe: one line per state file, ``PATH<TAB>MODE<TAB>OWNER<TAB>GROUP<TAB>base64 content``.

    Returns [{path, mode (octal text, 4 digits), owner, group, text (None when it is not base64)}] in the listing's order.
    """
    out = []
    for line in str(text or "").splitlines():
        fields = line.split("\t")
        if len(fields) != 5 or not fields[0]:
            continue
        try:
            content = base64.b64decode(fields[4], validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            content = None
        mode = fields[1].strip()
        out.append({"path": fields[0], "mode": mode.zfill(4) if mode.isdigit() else None,
                    "owner": fields[2] or None, "group": fields[3] or None, "text": content})
    return out


def torn_down_state(state, now):
    """The state file once its deployment is torn down: ``running`` null, the launch that ran is ``previous``,
    ``torn_down_at`` and ``updated_at`` ``now``; everything else (desired, tuned, created_at) stays."""
    out = copy.deepcopy(state)
    out["previous"] = out.get("running")
    out["running"] = None
    out["torn_down_at"] = now
    out["updated_at"] = now
    return out


def state_files(host, listing, now, remove):
    """What teardown does with one node's deployment state files: (plan, removals, notes).

    listing: parse_state_listing() of the node's ``deployments/*.json``; now: the teardown's time (ISO 8601);
    remove: ``teardown_remove_state``. Each plan entry: path, deployment, action (``mark``: rewrite it with
    ``state``, the torn-down state (the play writes it as the specdec_server role does), same mode, owner and group;
    ``remove``), mode, owner, group. A file already marked (``running`` null) is left as it is: a second teardown
    changes nothing; a file that is not a schema 1 state file stays unless ``remove``.
    """
    plan, items, notes = [], [], []
    for entry in listing:
        state = None
        if entry["text"] is not None:
            try:
                state = json.loads(entry["text"])
            except ValueError:
                state = None
        valid = isinstance(state, dict) and state.get("schema_version") == _plan.SCHEMA_VERSION
        dep = str(state.get("deployment") or "?") if valid else None
        base = {"path": entry["path"], "deployment": dep, "mode": entry["mode"], "owner": entry["owner"],
                "group": entry["group"], "state": None}
        if remove:
            plan.append(dict(base, action="remove"))
            items.append("state file %s (%s)" % (entry["path"], "deployment %s" % dep if valid else "unreadable"))
        elif not valid:
            notes.append("%s: %s is not a state file of schema %d: it stays (add -e teardown_remove_state=true to "
                         "remove it)." % (host, entry["path"], _plan.SCHEMA_VERSION))
        elif state.get("running"):
            plan.append(dict(base, action="mark", state=torn_down_state(state, now)))
            items.append("the running server of deployment %s in %s (marked torn down; the launch that ran stays as "
                         "previous, the tuned pick stays)" % (dep, entry["path"]))
    return plan, items, notes


def mesh_plan(host, read, remove):
    """What teardown does about the SSH mesh on one node: (plan, removals, notes).

    read: the node's registered result of ``sparkops.specdec.ssh_mesh_keys`` with ``state: absent`` run in check mode
    (its ``changes``: one line per block or file it would remove); remove: ``teardown_remove_mesh``. The plan:
    ``remove`` (run the module for real: only when it would change something, so a second teardown changes nothing)
    and ``changes``.
    """
    plan = {"remove": False, "changes": []}
    if not remove:
        return plan, [], []
    read = read if isinstance(read, dict) else {}
    changes = read.get("changes")
    if read.get("failed") or read.get("skipped") or not isinstance(changes, list):
        why = one_line(read.get("msg")) or ("skipped" if read.get("skipped") else "no result")
        return plan, [], ["%s: the SSH mesh could not be read (%s): it stays." % (host, why)]
    changes = [str(c) for c in changes]
    if not changes:
        return plan, [], []
    plan.update(remove=True, changes=changes)
    return plan, ["the SSH mesh (%s)" % ", ".join(changes)], []


def plan_node(host, probe, options):
    """What teardown removes on one node.

    probe: the node's merged probe (``_preflight.merge_probe``): ``state`` (docker inspect), ``cache`` (the cache
    path), ``dirs`` (its directories), ``netplan`` (the file's content), ``addrs`` (ip -o -4 addr show), ``kept``
    (docker inspect of <container>-previous), ``record`` (the container change record's content), ``record_path``
    (its path on the node), ``records`` (the deployment state files, parse_state_listing's format). options:
    container, previous_record (the record's path when the probe has none), netplan_file, remove_models,
    remove_netplan, remove_state, now (the teardown's time, ISO 8601), check_mode, management (the node's
    ansible_host), netplan_apply (netplan_qsfp_apply and netplan_qsfp_apply_method == netplan), remove_mesh and mesh
    (the node's check-mode read of ssh_mesh_keys state=absent, mesh_plan's ``read``).
    Returns a dict: container, stop_server, previous (kept_container's plan), state_files (state_files' plan), models,
    netplan_ours, netplan_note, netplan_backups (our marked backups of the file, ``netplan_backups`` of the probe),
    addresses ({cidr, dev}), netplan_apply, mesh (mesh_plan's plan), removals (the plan lines) and notes.
    """
    probe = probe or {}
    container = container_state(probe.get("state"))
    items, notes = [], []
    name = options.get("container")
    if container["exists"]:
        items.append("container %s (%s) and the server in it" % (name, container["status"]))
    elif container["error"]:
        notes.append("%s: cannot inspect container %s (%s); it is removed if it exists." % (host, name, container["error"]))
    record_path = (probe.get("record_path") or {}).get("stdout") or options.get("previous_record") or ""
    previous, kept_items, kept_notes = kept_container(host, name, probe, record_path)
    items += kept_items
    notes += kept_notes
    records = probe.get("records") or {}
    listing = parse_state_listing(records.get("stdout")) if records.get("rc") == 0 else []
    states, state_items, state_notes = state_files(host, listing, options.get("now"), options.get("remove_state"))
    items += state_items
    notes += state_notes
    models = []
    if options.get("remove_models"):
        cache = (probe.get("cache") or {}).get("stdout", "")
        models = our_model_dirs(cache, (probe.get("dirs") or {}).get("stdout", ""))
        items += ["model directory " + path for path in models]
    ours, addresses, note = False, [], None
    netplan_file = options.get("netplan_file")
    netplan = probe.get("netplan") or {}
    if options.get("remove_netplan") and netplan.get("rc") == 0:
        ours, in_file, problem = netplan_addresses(netplan.get("stdout"))
        if not ours:
            note = ('%s on %s was not written by sparkops.specdec (no "%s" mark): it stays, and so do its addresses.'
                    % (netplan_file, host, NETPLAN_MARK))
        else:
            items.append("netplan file %s" % netplan_file)
            if problem:
                note = "%s on %s: %s; no address is removed." % (netplan_file, host, problem)
            present = present_addresses((probe.get("addrs") or {}).get("stdout"))
            for cidr, dev in in_file:
                if _is_management(cidr, options.get("management")):
                    notes.append("%s: %s on %s is the management address: it stays." % (host, cidr, dev))
                elif (cidr, dev) in present:
                    addresses.append({"cidr": cidr, "dev": dev})
                    items.append("fabric address %s dev %s" % (cidr, dev))
    if note:
        notes.append(note)
    # netplan_fabric's backups of our own file (<file>.<pid>.<time>~, one per content change; netplan reads only
    # *.yaml): with the file, those carrying our mark go. A backup of someone else's file (a plan taken over) stays.
    backups = []
    if options.get("remove_netplan") and (probe.get("netplan_backups") or {}).get("rc") == 0:
        backups = [line.strip() for line in str(probe["netplan_backups"].get("stdout") or "").splitlines()
                   if line.strip().startswith("%s." % netplan_file) and line.strip().endswith("~")]
        items += ["netplan backup %s" % path for path in backups]
    mesh, mesh_items, mesh_notes = mesh_plan(host, options.get("mesh"), options.get("remove_mesh"))
    items += mesh_items
    notes += mesh_notes
    return {
        "container": container,
        "stop_server": container["exists"] and container["running"] and not container["restarting"]
        and not options.get("check_mode"),
        "previous": previous,
        "state_files": states,
        "models": models,
        "netplan_file": netplan_file,
        "netplan_ours": ours,
        "netplan_note": note,
        "netplan_backups": backups,
        "addresses": addresses,
        "netplan_apply": bool(ours and options.get("netplan_apply")),
        "mesh": mesh,
        "removals": items,
        "notes": notes,
    }


def plan_message(hosts, nodes, confirm, check_mode, remove_models, remove_netplan, remove_state=False,
                 remove_mesh=False):
    """(proceed, message): the confirmation of the whole teardown, every node's plan in one message."""
    listed = "; ".join("%s: %s" % (h, ", ".join(nodes[h]["removals"]) or "nothing") for h in hosts if h in nodes)
    keep = ([] if remove_models else [KEEP_MODELS]) + ([] if remove_netplan else [KEEP_NETPLAN])
    if any(nodes[h].get("state_files") for h in hosts if h in nodes):
        keep.append(REMOVE_STATE if remove_state else KEEP_STATE)
    keep.append(MESH_KEYS_STAY if remove_mesh else KEEP_MESH)
    tail = "".join(" " + n for h in hosts if h in nodes for n in nodes[h]["notes"])
    keep_text = (" " + "; ".join(keep)[0].upper() + "; ".join(keep)[1:] + ".") if keep else ""
    if check_mode:
        return True, "Would remove (check mode): %s.%s%s" % (listed, keep_text, tail)
    if confirmed(confirm):
        return True, "Removing: %s.%s%s" % (listed, keep_text, tail)
    return False, ("Nothing was removed. teardown.yml would remove: %s.%s%s Re-run with -e confirm=yes to proceed, or "
                   "with --check to only show this plan." % (listed, keep_text, tail))
