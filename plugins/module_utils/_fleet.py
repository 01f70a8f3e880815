# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: how an inventory is cut into deployments. Not a
# public API; names and messages may change in any release without notice.
"""Group the hosts of an inventory into deployments (one Spark, or a pair serving TP=2).

Pure functions, plain data in and out (JSON-able), no Ansible import:

* hosts that share a ``specdec_deployment_id`` (a group or host variable) form one deployment;
* hosts without one keep today's layout: the hosts of groups ``spark_head`` and ``spark_workers``
  form one deployment (id: the head's name), any other host stands alone (id: its name);
* the head of a deployment is its ``specdec_head_host``, else its member in group ``spark_head``,
  else its only member.

Every problem is one line naming the setting, the problem and the fix.
"""

from __future__ import annotations

HEAD_GROUP = "spark_head"
WORKER_GROUP = "spark_workers"
# A deployment is one Spark or a pair (TP=2); TP>2 over more Sparks is not supported.
MAX_MEMBERS = 2
# Ansible's implicit groups: never a deployment's group.
_IMPLICIT = ("all", "ungrouped")


def _text(value):
    """A setting's value as text ('' for unset, None, or an unevaluated expression)."""
    if value is None or isinstance(value, bool):
        return ""
    text = str(value).strip()
    return "" if "{{" in text or "{%" in text else text


def _names(hosts):
    return ", ".join(hosts)


def _group_ids(hosts, groups, group_vars):
    """host -> {group: id} for every group holding the host whose own variables set specdec_deployment_id."""
    found = {}
    if group_vars is None:
        return found
    wanted = set(hosts)
    for group in sorted(groups):
        if group in _IMPLICIT:
            continue
        own = _text((group_vars(group) or {}).get("specdec_deployment_id"))
        if not own:
            continue
        for host in groups.get(group) or []:
            if host in wanted:
                found.setdefault(host, {})[group] = own
    # A group holding a strict superset of another's hosts is taken as its parent, whose value Ansible lets the child
    # override (e.g. a default id on spark_nodes): only the most specific groups of a host can disagree.
    members = {g: set(groups.get(g) or []) for g in groups}
    for host, named in found.items():
        found[host] = {g: v for g, v in named.items()
                       if not any(o != g and members[o] < members[g] for o in named)}
    return found


def _head_of(dep_id, members, heads_set, in_head_group, errors):
    """The head of a deployment (None when it cannot be told; the reason is appended to ``errors``)."""
    values = {h: heads_set[h] for h in members if heads_set.get(h)}
    if len(set(values.values())) > 1:
        errors.append("specdec_head_host: differs within deployment %s (%s); set it once for the deployment "
                      "(e.g. in the group vars of the pair)."
                      % (dep_id, _names("%s: %s" % (h, v) for h, v in values.items())))
        return None
    if values:
        head = next(iter(values.values()))
        if head not in members:
            errors.append("specdec_head_host: '%s' is not a node of deployment %s (%s); name one of them "
                          "(e.g. in the group vars of the pair)." % (head, dep_id, _names(members)))
            return None
        return head
    marked = [h for h in members if h in in_head_group]
    if len(marked) == 1:
        return marked[0]
    if len(members) == 1:
        return members[0]
    errors.append("specdec_head_host: deployment %s (%s): name its head with specdec_head_host (e.g. in the group "
                  "vars of the pair)." % (dep_id, _names(members)))
    return None


def group_deployments(hosts, host_vars, groups, group_vars=None):
    """Cut the inventory into deployments.

    ``hosts``: the candidate hosts in inventory order (usually every host of the inventory, so that a
    ``--limit`` can be checked against whole deployments).
    ``host_vars``: host -> its resolved variables (``specdec_deployment_id``, ``specdec_head_host``).
    ``groups``: group -> hosts (Ansible's ``groups``).
    ``group_vars``: optional, group -> the variables set on that group itself; with it, a host put in two
    groups that name different deployments is reported (Ansible would silently pick one value).

    Returns ``{"deployments": [...], "errors": [...]}``; each deployment is
    ``{"id", "members" (head first), "head", "topology", "named" (the id comes from specdec_deployment_id),
    "errors"}``, and ``errors`` lists every deployment's problems once.
    """
    hosts = list(dict.fromkeys(hosts or []))
    groups = groups or {}
    settings = {h: dict(host_vars(h) or {}) for h in hosts}
    ids = {h: _text(settings[h].get("specdec_deployment_id")) for h in hosts}
    heads_set = {h: _text(settings[h].get("specdec_head_host")) for h in hosts}
    in_head_group = set(groups.get(HEAD_GROUP) or [])
    legacy = [h for h in list(groups.get(HEAD_GROUP) or []) + list(groups.get(WORKER_GROUP) or [])
              if h in settings and not ids[h]]
    legacy = list(dict.fromkeys(legacy))

    # Members per deployment, deployments in the inventory order of their first member.
    keyed = {}
    for host in hosts:
        if ids[host]:
            key = ("id", ids[host])
        elif host in legacy:
            key = ("groups", "")
        else:
            key = ("host", host)
        keyed.setdefault(key, []).append(host)

    conflicts = _group_ids(hosts, groups, group_vars)
    deployments = []
    for (kind, name), members in keyed.items():
        if kind == "groups":
            members = legacy
        errors = []
        label = name if kind != "groups" else ([h for h in members if h in in_head_group] or members)[0]
        head = _head_of(label, members, heads_set, in_head_group, errors)
        dep_id = name if kind == "id" else (head or label)
        if len(members) > MAX_MEMBERS:
            if kind == "groups":
                errors.append("inventory: groups %s and %s hold %d hosts without specdec_deployment_id (%s); a "
                              "deployment is one Spark or a pair (TP>2 is not supported): give each pair its own "
                              "specdec_deployment_id." % (HEAD_GROUP, WORKER_GROUP, len(members), _names(members)))
            else:
                errors.append("specdec_deployment_id: deployment %s has %d nodes (%s); a deployment is one Spark or a "
                              "pair (TP>2 is not supported): give each pair its own specdec_deployment_id."
                              % (dep_id, len(members), _names(members)))
        ordered = ([head] if head else []) + [h for h in members if h != head]
        deployments.append({"id": dep_id, "members": ordered, "head": head,
                            "topology": "two_sparks" if len(members) > 1 else "single_spark",
                            "named": kind == "id", "errors": errors})

    # A host that two groups put in different deployments: both deployments are stopped.
    by_id = {}
    for dep in deployments:
        by_id.setdefault(dep["id"], []).append(dep)
    for host, found in sorted(conflicts.items()):
        if len(set(found.values())) < 2:
            continue
        line = ("specdec_deployment_id: %s is in deployments %s; a Spark belongs to one deployment: remove it from all "
                "groups but one." % (host, _names("%s (group %s)" % (v, g) for g, v in sorted(found.items()))))
        for dep_id in sorted(set(found.values())):
            for dep in by_id.get(dep_id, []):
                if line not in dep["errors"]:
                    dep["errors"].append(line)
    # Two deployments under one id (an explicit id equal to another deployment's host-name id).
    for dep_id, same in by_id.items():
        if len(same) > 1:
            line = ("specdec_deployment_id: %s names %d deployments (%s); give each deployment its own id."
                    % (dep_id, len(same), "; ".join(_names(d["members"]) for d in same)))
            for dep in same:
                dep["errors"].append(line)
    errors = []
    for dep in deployments:
        errors += [e for e in dep["errors"] if e not in errors]
    return {"deployments": deployments, "errors": errors}


def deployments_of(fleet, play_hosts):
    """The deployments with at least one member among ``play_hosts`` (in the fleet's order)."""
    play = set(play_hosts or [])
    return [d for d in fleet["deployments"] if play & set(d["members"])]


def _group_of(members, groups):
    """A group holding exactly ``members`` (the smallest name first), else None."""
    want = set(members)
    fits = sorted(g for g, hosts in (groups or {}).items() if g not in _IMPLICIT and set(hosts or []) == want)
    return fits[0] if fits else None


def check_limit(fleet, play_hosts, groups=None):
    """One line per deployment that the play holds only in part (a --limit that cuts a pair)."""
    play = set(play_hosts or [])
    errors = []
    for dep in deployments_of(fleet, play_hosts):
        inside = [h for h in dep["members"] if h in play]
        outside = [h for h in dep["members"] if h not in play]
        if inside and outside:
            group = _group_of(dep["members"], groups)
            example = "--limit %s group" % group if group else "--limit %s" % ",".join(dep["members"])
            errors.append("--limit: %s %s in the play but %s of deployment %s %s not; a pair deploys together: "
                          "--limit both (e.g. %s) or neither."
                          % (_names(inside), "is" if len(inside) == 1 else "are", _names(outside), dep["id"],
                             "is" if len(outside) == 1 else "are", example))
    return errors
