# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filters that shape the playbooks' machine-readable results for ``ansible.builtin.set_stats`` (AWX/AAP artifacts).

Each returns ``{inventory_hostname: {...}}`` built from public results only (registered results and published facts
the roles and modules document); the playbooks set it under one key with ``per_host: false`` and ``aggregate: true``,
so the nodes' entries merge into one mapping in the run's global custom stats (the job's artifacts in AWX).

- ``specdec_server_launch | sparkops.specdec.deploy_stats(host, endpoint, check_mode)``: key ``specdec_deploy``
  (two_sparks.yml, single_spark.yml): deployment, role (head/worker), endpoint, engine, method, models, draft length,
  decision (none, start, restart, deferred), its reason, state (``serving``, or ``checked`` in check mode) and exposure (who
  can call the endpoint: every interface, one bind address, the loopback or only specdec_server_allowed_networks,
  and whether the API key is needed).
- ``specdec_server_launch | sparkops.specdec.endpoint_exposure``: the same exposure as one line for the run's output.
- ``preflight_plan | sparkops.specdec.inventory_stats(host)``: key ``specdec_inventory`` (preflight_inventory.yml):
  deployment, topology, head, members, problems (0: the play stops on any).
- ``preflight_result | sparkops.specdec.preflight_stats(host)``: key ``specdec_preflight`` (preflight.yml): passed,
  the node's check ids by status (fail, warn), counts and the report path.
- ``teardown_result | sparkops.specdec.teardown_stats(host, check_mode)``: key ``specdec_teardown`` (teardown.yml):
  confirmed, what was (or, in check mode, would be) removed on the node (the deployment state files marked torn down
  or removed and the SSH mesh's blocks and files included) and what stays.
- ``specdec_benchmark_result | sparkops.specdec.benchmark_stats(host, endpoint)``: key ``specdec_benchmark_run``
  (benchmark.yml): the pick, its reason, the gate verdict and the report files (the head; others: not measured).
- ``fleet_deploy | sparkops.specdec.fleet_stats``: key ``specdec_fleet`` (fleet.yml, one mapping for the run, not per
  node): the ids serving and not serving, and per deployment its status, members, head, exit code, failures and report.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def _mapping(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError("%s: expected a registered result (a mapping), got %s" % (what, type(value).__name__))
    return value


# exposure -> who can call the endpoint by its bind address (plugin_utils/_plan.py exposure()).
_WHO = {"loopback": "loopback", "address": "bind_address", "open": "every_interface",
        "open_unauthenticated": "every_interface"}


def exposure_stats(plan):
    """Who can call the endpoint, from the plan (``specdec_server_launch.plan`` or ``preflight_plan.plan``).

    ``who``: ``loopback`` (the node only), ``bind_address`` (clients that reach the one address bound),
    ``every_interface`` (every network the node is on) or ``allowed_networks`` (our host firewall admits only
    ``allowed_networks`` to the port); ``api_key``: whether a client needs the API key; ``bind``, ``port``."""
    plan = _mapping(plan, "exposure_stats")
    exposure = plan.get("exposure")
    allowed = list(plan.get("allowed_networks") or [])
    who = _WHO.get(exposure)
    if allowed and who not in (None, "loopback"):
        who = "allowed_networks"
    return {"who": who, "api_key": bool(plan.get("api_key")), "bind": plan.get("host"), "port": plan.get("port"),
            "allowed_networks": allowed, "endpoint": plan.get("endpoint")}


def endpoint_exposure(launch):
    """One line for the run's output: who can call the endpoint, with or without a key (``specdec_server_launch``)."""
    launch = _mapping(launch, "endpoint_exposure")
    plan = launch.get("plan") or {}
    if not plan:
        raise AnsibleFilterError("endpoint_exposure: specdec_server_launch has no plan (did specdec_server run?)")
    e = exposure_stats(plan)
    bind = "[%s]" % e["bind"] if ":" in str(e["bind"]) else e["bind"]
    where = {
        "loopback": "only the node itself can call it (bound to %s:%s)" % (bind, e["port"]),
        "bind_address": "clients that reach %s:%s can call it (bound to that address only)" % (bind, e["port"]),
        "every_interface": "anyone on every network the node is on can call it (bound to %s:%s, every interface)"
                           % (bind, e["port"]),
        "allowed_networks": "only %s can call it (the host firewall admits them to port %s; bound to %s)"
                            % (", ".join(e["allowed_networks"]), e["port"], bind),
    }.get(e["who"], "who can call it is unknown (the plan names no bind address)")
    key = "with the API key" if e["api_key"] else "with no API key"
    return "Endpoint %s: %s, %s." % (e["endpoint"], where, key)


def deploy_stats(launch, host, endpoint=None, check_mode=False):
    """The node's deployment summary from the plan result ``specdec_server_launch`` and ``specdec_server_endpoint``."""
    launch = _mapping(launch, "deploy_stats")
    plan = launch.get("plan") or {}
    if not plan:
        raise AnsibleFilterError("deploy_stats: %s has no plan in specdec_server_launch (did specdec_server run?)" % host)
    decision = launch.get("decision") or {}
    entry = {
        "deployment": plan.get("deployment"),
        "role": "head" if plan.get("head") == host else "worker",
        "head": plan.get("head"),
        "endpoint": endpoint or plan.get("endpoint"),
        "engine": plan.get("engine"),
        "topology": plan.get("topology"),
        "method": plan.get("method"),
        "target_model": plan.get("target_model"),
        "draft_model": plan.get("draft_model"),
        "max_draft_len": plan.get("max_draft_len"),
        "decision": decision.get("action"),
        "reason": decision.get("reason"),
        "state": "checked" if check_mode else "serving",
        # Who can call the endpoint (the same on every node of the deployment): see exposure_stats.
        "exposure": exposure_stats(plan),
    }
    return {str(host): entry}


def inventory_stats(plan_result, host):
    """The deployment the inventory check accepted (``preflight_plan``, sparkops.specdec.specdec_plan's result)."""
    result = _mapping(plan_result, "inventory_stats")
    dep = result.get("deployment") or {}
    return {str(host): {
        "deployment": dep.get("id"),
        "topology": dep.get("topology"),
        "head": dep.get("head"),
        "members": list(dep.get("members") or []),
        "problems": len(result.get("errors") or []),
    }}


def preflight_stats(report, host):
    """This node's checks from the preflight report result (sparkops.specdec.preflight_report)."""
    report = _mapping(report, "preflight_stats")
    mine = [c for c in report.get("checks") or [] if c.get("node") == host]
    by_status = {}
    for check in mine:
        by_status.setdefault(str(check.get("status")), []).append(str(check.get("id")))
    return {str(host): {
        "passed": not by_status.get("fail"),
        "failed": by_status.get("fail", []),
        "warned": by_status.get("warn", []),
        "counts": dict((status, len(ids)) for status, ids in sorted(by_status.items())),
        "report_path": report.get("report_path"),
    }}


def teardown_stats(result, host, check_mode=False):
    """What teardown removed (or would remove) on the node, from sparkops.specdec.teardown_plan's result."""
    result = _mapping(result, "teardown_stats")
    node = (result.get("nodes") or {}).get(host)
    if node is None:
        raise AnsibleFilterError("teardown_stats: the teardown plan has no entry for %s" % host)
    container = node.get("container") or {}
    previous = node.get("previous") or {}
    return {str(host): {
        "confirmed": bool(result.get("confirmed")),
        "state": "checked" if check_mode else "removed",
        "container_removed": bool(container.get("exists")),
        "server_stopped": bool(node.get("stop_server")) and not check_mode,
        "previous_container_removed": bool(previous.get("remove")),
        "models_removed": list(node.get("models") or []),
        "netplan_removed": bool(node.get("netplan_ours")),
        # Deployment state files marked torn down (the tuned picks stay) and those removed (teardown_remove_state).
        "state_files_marked": [f.get("path") for f in node.get("state_files") or [] if f.get("action") == "mark"],
        "state_files_removed": [f.get("path") for f in node.get("state_files") or [] if f.get("action") == "remove"],
        # teardown_remove_mesh: what ssh_mesh_keys state=absent removed (one line per block or file; [] for nothing).
        "mesh_removed": list((node.get("mesh") or {}).get("changes") or []),
        "removals": list(node.get("removals") or []),
        "notes": list(node.get("notes") or []),
    }}


def benchmark_stats(result, host, endpoint=None):
    """The benchmark's outcome on the node (``specdec_benchmark_result``; skipped on a node that did not measure)."""
    result = _mapping(result, "benchmark_stats")
    if result.get("skipped") or not result:
        return {str(host): {"measured": False, "endpoint": endpoint}}
    headline = result.get("headline") or {}
    return {str(host): {
        "measured": True,
        "endpoint": endpoint,
        "pick": headline.get("pick"),
        "reason": headline.get("reason"),
        "gate_passed": headline.get("gate_passed"),
        "files": dict(result.get("files") or {}),
    }}


def fleet_stats(result):
    """The fleet run's outcome from sparkops.specdec.fleet_deploy's result (also when it failed before any run)."""
    result = _mapping(result, "fleet_stats")
    deployments = {}
    for dep in result.get("deployments") or []:
        deployments[str(dep.get("id"))] = {
            "status": dep.get("status"),
            "topology": dep.get("topology"),
            "members": list(dep.get("members") or []),
            "head": dep.get("head"),
            "rc": dep.get("rc"),
            "failures": list(dep.get("failures") or []),
            "log": dep.get("log"),
        }
    return {
        "serving": list(result.get("serving") or []),
        "not_serving": list(result.get("not_serving") or []),
        # Refused by the checks made before any run (not started, left as they were).
        "invalid": list(result.get("invalid") or []),
        "not_run": list(result.get("not_run") or []),
        "deployments": deployments,
        "report_path": result.get("report"),
        # The report could not be written once the runs had ended: these stats are where the outcomes are.
        "report_error": result.get("report_error"),
        # Problems found before any run (the inventory, the settings): no deployment ran.
        "problems": result.get("msg") if not deployments else None,
    }


class FilterModule(object):
    def filters(self):
        return {
            "deploy_stats": deploy_stats,
            "endpoint_exposure": endpoint_exposure,
            "inventory_stats": inventory_stats,
            "preflight_stats": preflight_stats,
            "teardown_stats": teardown_stats,
            "benchmark_stats": benchmark_stats,
            "fleet_stats": fleet_stats,
        }
