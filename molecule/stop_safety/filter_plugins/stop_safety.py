# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filters of the Molecule scenario stop_safety (loaded from the verify play's own filter_plugins).

- ``json_output | stop_safety_failed_actions(host)``: the actions (FQCN) of the host's failed results in the
  output of the JSON callback (ansible.posix.json), in run order;
  ``json_output | stop_safety_results(host, action)``: the host's results of that action, in run order.
- ``snapshot | stop_safety_deployment``: the part of a node snapshot (files/snapshot.py) that a refused run
  must leave as it was: the engine container, the server and every file under /var/lib/sparkops.
- ``before | stop_safety_diff(after)``: the keys whose values differ between two snapshots (for messages).
"""

from __future__ import annotations

STATE_TREE = "/var/lib/sparkops"
CONTAINER = "trtllm-multinode"


def stop_safety_failed_actions(output, host):
    actions = []
    for play in (output or {}).get("plays", []):
        for task in play.get("tasks", []):
            result = task.get("hosts", {}).get(host)
            if isinstance(result, dict) and result.get("failed"):
                actions.append(result.get("action"))
    return actions


def stop_safety_results(output, host, action):
    return [task["hosts"][host] for play in (output or {}).get("plays", []) for task in play.get("tasks", [])
            if isinstance(task.get("hosts", {}).get(host), dict) and task["hosts"][host].get("action") == action]


def stop_safety_deployment(snapshot):
    return {
        "container": snapshot["containers"].get(CONTAINER),
        "server": snapshot["server"],
        "files": {p: v for p, v in snapshot["files"].items() if p == STATE_TREE or p.startswith(STATE_TREE + "/")},
    }


def _flat(value, prefix=""):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(_flat(item, "%s%s%s" % (prefix, "." if prefix else "", key)))
        return out
    return {prefix: value}


def stop_safety_diff(before, after):
    a, b = _flat(before), _flat(after)
    return ["%s: %s -> %s" % (k, a.get(k, "(absent)"), b.get(k, "(absent)"))
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


class FilterModule(object):
    def filters(self):
        return {
            "stop_safety_failed_actions": stop_safety_failed_actions,
            "stop_safety_results": stop_safety_results,
            "stop_safety_deployment": stop_safety_deployment,
            "stop_safety_diff": stop_safety_diff,
        }
