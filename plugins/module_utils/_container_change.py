# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE: the state machine of a container change (a new image or other container settings) on a serving node, as
pure functions (no Ansible, no I/O). Not a public API of sparkops.specdec.

A consented recreation of a running engine container does not remove it: the action ``engine_container`` stops it and
renames it to ``<name>-previous`` (Docker keeps its settings and its image, which cannot be removed while a container
uses it), records it in a JSON file on the node (``record``), then creates the new container. The record lives until
the new container's server serves (``release``: the kept container is removed, the record too) or fails (``restore``:
the new container is removed, the kept one gets its name back and is started, and the specdec_server role starts the
previous server in it). A further recreation while a record exists replaces the new, unproven container and keeps the
recorded one: the container kept is always the last one whose server was proven to serve.

Phases of one node: ``none`` (no record) -> ``kept`` (record, old container stopped under its kept name, new one
running) -> ``none`` (released, or restored).

A change left pending (the run stopped between the recreation and the server start) is taken up by the next run: it
first checks that the containers are the ones the record names (``pending_problem``: else one line naming the record
and the fix, before anything changes); a request for the new container again finishes the change (the server starts,
then release or restore), a request the kept container already has (the user backs out) restores it (``restore``: the
same container renamed back, not a third one), any other request replaces the unproven container.
"""

from __future__ import annotations

import json

from ansible_collections.sparkops.specdec.plugins.module_utils import _container

SCHEMA_VERSION = 1
KEPT_SUFFIX = "-previous"
# What a container's settings are compared by, from its docker inspect (the restored container must show the same).
_SETTINGS = (("image_id", ("Image",)), ("image", ("Config", "Image")), ("env", ("Config", "Env")),
             ("labels", ("Config", "Labels")), ("cmd", ("Config", "Cmd")), ("entrypoint", ("Config", "Entrypoint")),
             ("binds", ("HostConfig", "Binds")), ("network_mode", ("HostConfig", "NetworkMode")),
             ("ipc_mode", ("HostConfig", "IpcMode")), ("restart_policy", ("HostConfig", "RestartPolicy", "Name")),
             ("devices", ("HostConfig", "Devices")), ("ulimits", ("HostConfig", "Ulimits")),
             ("init", ("HostConfig", "Init")), ("shm_size", ("HostConfig", "ShmSize")))


class ChangeError(ValueError):
    """A one-line refusal (what, the problem, the fix)."""


def kept_name(name):
    """The name a kept previous container runs under: ``<name>-previous``."""
    return "%s%s" % (name, KEPT_SUFFIX)


def _get(inspect, path):
    value = inspect or {}
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def container_settings(inspect):
    """The settings of a container (docker inspect) that a restore must bring back: image id and reference,
    environment, labels, command, entrypoint, bind mounts, network, IPC, restart policy, devices, ulimits, init, shm.
    Lists of environment and mounts are sorted (Docker does not promise their order)."""
    out = {}
    for key, path in _SETTINGS:
        value = _get(inspect, path)
        if key in ("env", "binds") and isinstance(value, list):
            value = sorted(str(v) for v in value)
        out[key] = value
    return out


def _running(inspect):
    """Whether the container runs: Docker also reports Running for a container in a crash loop (State.Restarting),
    which serves nothing and refuses docker exec (409) until it is up again."""
    return bool(_get(inspect, ("State", "Running"))) and not _get(inspect, ("State", "Restarting"))


def parse_record(text):
    """The record read from the node (its JSON text, or the slurp result's decoded content); {} when there is none
    or it is not a record of this schema (an unreadable record is no record: nothing is kept)."""
    if isinstance(text, dict):
        record = text
    else:
        try:
            record = json.loads(text or "null")
        except ValueError:
            return {}
    if not isinstance(record, dict) or record.get("schema_version") != SCHEMA_VERSION:
        return {}
    if not record.get("name") or not record.get("kept_name") or not (record.get("container") or {}).get("id"):
        return {}
    return record


def pending_problem(record, current, kept, path="the record"):
    """The one-line refusal when a pending change's record and the node's containers disagree, else "".

    record: parse_record() of the node's record ({}: nothing pending); current / kept: docker inspect of the containers
    named record['name'] and record['kept_name'] now (None when absent); path: the record's path. Agreement: the
    container under the kept name is the recorded one (same id). Else the record cannot be acted on (neither finished
    nor undone) and the message says what to do; nothing has been changed."""
    if not record:
        return ""
    name, kept_as, old_id = record["name"], record["kept_name"], record["container"]["id"]
    if kept and str(kept.get("Id")) == old_id:
        return ""
    head = ("The pending container change recorded in %s (the change to %s; the previous container kept as %s, id %s) "
            % (path, record["change"].get("image") or "?", kept_as, old_id[:12]))
    if current and str(current.get("Id")) == old_id:
        return head + ("does not match this node: the recorded container runs as %s (a keep or a restore was "
                       "interrupted); nothing was changed: start it if it is stopped (docker start %s), remove %s and "
                       "re-run." % (name, name, path))
    if not kept:
        return head + ("does not match this node: there is no container %s (it cannot be restored); nothing was "
                       "changed: to keep the container %s as it is, remove %s and re-run." % (kept_as, name, path))
    return head + ("does not match this node: %s is another container (id %s); nothing was changed: look at it "
                   "(docker inspect %s), remove or rename it if it is not needed, remove %s and re-run."
                   % (kept_as, str(kept.get("Id") or "?")[:12], kept_as, path))


def apply_decision(plan, allow_recreate, record, kept_matches=False):
    """What the apply of the container spec does about the running container.

    plan: the check-mode result of docker_container (changed; container = the inspect of the container as it is, None
    when there is none). record: parse_record() of the node's record (checked by pending_problem). kept_matches: the
    kept container of the record already has the requested settings (docker_container's check mode on it reports no
    change). Returns {'action', 'reason'}, action one of:
    ``none`` (nothing changes; with a record: the pending change is finished by the server start and its gate),
    ``create`` (no container yet), ``keep`` (stop and keep the running container, then
    create the new one: a consented recreation of a running container, no record), ``restore`` (a pending change
    backed out: the unproven container is removed, the kept one gets its name back and is started, the record goes),
    ``replace`` (recreate without keeping: the container is stopped, or it is the new, unproven one of a pending change,
    whose record keeps the proven one), ``refuse`` (a running container without consent: the caller's refusal names
    the differences).
    """
    plan = plan or {}
    container = plan.get("container")
    if not plan.get("changed"):
        if record:
            return {"action": "none", "reason": "the container is the new one of the pending change; the server start "
                                                "finishes it (%s is removed once it serves, or restored if it fails)"
                                                % record["kept_name"]}
        return {"action": "none", "reason": "the container has the requested settings"}
    running = _running(container)
    if running and not allow_recreate:
        return {"action": "refuse", "reason": "the running container has other settings and there is no consent"}
    if record and kept_matches:
        return {"action": "restore", "reason": "the pending change is backed out: %s has the requested settings and "
                                               "gets its name back" % record["kept_name"]}
    if not container:
        return {"action": "create", "reason": "there is no container"}
    if record:
        return {"action": "replace", "reason": "the running container is the unproven one of a pending change; "
                                               "%s stays kept" % record["kept_name"]}
    if not running:
        return {"action": "replace", "reason": "the container is %s (nothing serves from it)"
                % ("restarting after exits (a crash loop)" if _get(container, ("State", "Restarting")) else "not running")}
    return {"action": "keep", "reason": "a running container is kept until the new one serves"}


def new_record(spec, container, differences, reference, now, sshd_host="", sshd_port=0, start_timeout=300):
    """The record of a kept container, written before it is stopped and renamed.

    spec: the new container's docker_container parameters (name, image); container: docker inspect of the running
    one; differences: names of what differs; reference: the image reference the user set (trtllm_container_image);
    sshd_host/port, start_timeout: where a restore waits for the kept container's sshd (port 0: no sshd)."""
    name = str(spec["name"])
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "kept_name": kept_name(name),
        "kept_at": now,
        "container": {"id": str(container.get("Id") or ""), "created": str(container.get("Created") or ""),
                      "settings": container_settings(container)},
        "change": {"image": str(spec.get("image") or ""), "reference": str(reference or ""),
                   "differences": list(differences or [])},
        "sshd": {"host": str(sshd_host or ""), "port": int(sshd_port or 0), "timeout": int(start_timeout or 300)},
    }


def updated_record(record, spec, differences, reference):
    """The record after a further change replaced the unproven container: the kept container stays, the change
    names the newest request."""
    out = json.loads(json.dumps(record))
    out["change"] = {"image": str(spec.get("image") or ""), "reference": str(reference or ""),
                     "differences": list(differences or [])}
    return out


def restore_steps(record, current, kept, path="the record"):
    """The steps that give the node its kept container back, in order: ('remove', name) the new container,
    ('rename', kept_name, name), ('start', name). current / kept: docker inspect of the containers named
    record['name'] and record['kept_name'] now (None when absent); path: the record's path, for the message.

    Safe to run again after an interruption: a kept container already renamed back is only started (if it is not
    running). Raises ChangeError when the recorded container is gone (nothing to restore)."""
    if not record:
        return []
    name, kept_as, old_id = record["name"], record["kept_name"], record["container"]["id"]
    if kept and str(kept.get("Id")) == old_id:
        steps = [("remove", name)] if current else []
        return steps + [("rename", kept_as, name), ("start", name)]
    if current and str(current.get("Id")) == old_id:
        return [] if _running(current) else [("start", name)]
    raise ChangeError(
        "The container %s kept for the change to %s (id %s) is gone from this node (no container %s or %s has that "
        "id): it cannot be restored; re-run with the previous trtllm_container_image and "
        "trtllm_container_allow_recreate=true to recreate it, then remove %s." % (
            kept_as, record["change"]["image"], old_id[:12], kept_as, name, path))


def release_steps(record, kept):
    """The steps once the new container's server serves: ('remove', kept_name) when the recorded container is there
    (a container of another id under that name is not ours: it stays), then ('forget',) the record."""
    if not record:
        return []
    steps = []
    if kept and str(kept.get("Id")) == record["container"]["id"]:
        steps.append(("remove", record["kept_name"]))
    return steps + [("forget",)]


def _names(image):
    """An image reference and the name of its derived image with sshd (what a multi-node container runs)."""
    image = str(image or "")
    return {image, _container.sshd_image_name(image)} if image else set()


def pending_outlook(record, kept_state, requested, current=True):
    """What the next deployment does with a pending change, one sentence (the preflight's warning says it).

    record: parse_record() of the node's record; kept_state: ``present`` (the recorded container is kept), ``absent``,
    ``other`` (another container under the kept name), ``current`` (the recorded container runs under the container's
    own name) or ``unknown`` (module_utils/_status.pending_change's kept_container); requested: the image the deployment
    asks for (trtllm_container_image); current: the docker inspect of the container under the record's name, None when
    there is none (True: there is one, not read).

    The decision is the deployment's own, ``apply_decision``, with consent (the sentence names the setting). Its
    inputs are told by image name alone (the reference, or its derived image with sshd): the container differs from
    the request unless ``requested`` is the change's image, and the kept container matches it when ``requested`` is
    the kept container's image. The deployment takes them from docker_container's comparison of every container
    setting, which the preflight cannot make before the run: the sentence says what it compared."""
    if not record:
        return ""
    kept_as, name = record["kept_name"], record["name"]
    if kept_state == "unknown":
        return "Docker could not be read, so what the next deployment does is unknown"
    if kept_state != "present":
        return ("the next deployment stops before any change (the record does not match the containers): remove the "
                "record once %s is the container to keep" % name)
    change = record.get("change") or {}
    new_image = change.get("image") or change.get("reference") or "?"
    kept_image = (record["container"].get("settings") or {}).get("image")
    wanted = _names(requested)
    changed = not wanted & ({change.get("image"), change.get("reference")} - {None, ""})
    container = {"Id": "?"} if current is True else (current or None)
    decision = apply_decision({"changed": changed, "container": container}, True, record,
                              kept_matches=bool(kept_image and kept_image in wanted))
    compared = (" (told from the image names alone, an image and its derived image with sshd counting as one: %s "
                "against the change's %s and the kept container's %s; the deployment compares every container "
                "setting%s)"
                % (requested or "?", new_image, kept_image or "?",
                   ", so another changed setting makes it replace the new container instead"
                   if decision["action"] in ("none", "restore") else ""))
    text = {
        "none": ("the next deployment with %s finishes it: it starts the server in the new container, then removes %s "
                 "once that serves, or gives the node %s back if it fails" % (requested, kept_as, kept_as)),
        "restore": ("the next deployment with %s (the previous image) backs it out: with "
                    "trtllm_container_allow_recreate it removes the new container and gives %s its name back (the same "
                    "container, not a new one)" % (requested, kept_as)),
        "create": ("the next deployment with %s creates %s (there is none) and keeps %s until the new server serves"
                   % (requested or "?", name, kept_as)),
        "replace": ("the next deployment with %s replaces the new container (with trtllm_container_allow_recreate) and "
                    "keeps %s until the new server serves" % (requested or "?", kept_as)),
    }[decision["action"]]
    return text + compared


def restored_summary(record, host, restored):
    """One sentence of the report: the node, the container and the image it runs again (or would, in check mode)."""
    settings = record["container"]["settings"]
    return ("%s: %s runs its previous image %s (%s) again, with its previous settings, instead of %s" % (
        host, record["name"], settings.get("image") or "?", str(settings.get("image_id") or "?")[:19],
        record["change"]["image"] or "the new container")) if restored else ""


def change_report(previous_by_host, members, restore_results):
    """The sentence of the failure report about a container change, or "" when no member had one.

    previous_by_host: host -> its record (the fact trtllm_container_previous, {} once restored); members: the
    deployment's nodes in order; restore_results: the registered loop results of ``previous: restore`` (each with
    item = the host; skipped, failed and msg, or restored and summary), [] when it did not run."""
    by_host = {}
    for res in restore_results or []:
        if isinstance(res, dict) and res.get("item") is not None and not res.get("skipped"):
            by_host[str(res["item"])] = res
    image, done, not_done = "", [], []
    for host in members or []:
        res = by_host.get(str(host)) or {}
        record = parse_record(res.get("previous") or (previous_by_host or {}).get(host) or {})
        if not record and not res.get("failed"):
            continue
        image = image or (record["change"]["image"] if record else "")
        if res.get("restored"):
            done.append(res.get("summary") or restored_summary(record, host, True))
        elif res.get("failed"):
            not_done.append("%s: %s" % (host, " ".join(str(res.get("msg") or "failed").split())))
        else:
            not_done.append("%s: its previous container is still kept as %s (no restore ran)" % (host, record["kept_name"]))
    if not done and not not_done:
        return ""
    image = image or "another image or other container settings"
    text = ""
    if done:
        text = "The container change to %s was undone: %s." % (image, "; ".join(done))
    if not_done:
        text += (" " if text else "") + (
            "The container change to %s was NOT undone on %s; re-run with the previous trtllm_container_image and "
            "-e trtllm_container_allow_recreate=true." % (image, "; ".join(not_done)))
    return text
