# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.specdec_plan: controller-side, no host is contacted.

It gathers the deployment from the inventory (the settings every member node was given,
over the roles' defaults), validates every setting and the deployment as a whole, and
returns the plan built by plugin_utils/_plan.py. The documentation is in
plugins/modules/specdec_plan.py.
"""

from __future__ import annotations

import copy
import datetime

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _inventory
from ansible_collections.sparkops.specdec.plugins.module_utils import _container, _peer_copy
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _fleet, _plan, _settings

_ARGS = frozenset(("topology", "commits", "downloads", "image", "state", "server_running", "probe", "allow_restart",
                   "mounts", "defer_restart"))
# Settings that must be the same on every member of a deployment (the server's and the shared
# facts, and the image: TP=2 needs one config and one engine on every rank).
_SAME_ON_ALL = ("specdec_", "trtllm_container_image", "trtllm_container_trtllm_version")
# Settings a node may hold its own value of: each node's Hugging Face token (the worker can copy from the head and
# hold none). Every other setting, "token" in its name or not (a token count, the tiktoken files), is one value.
_PER_NODE = frozenset(("specdec_server_hf_token",))


def _unnamed_hosts(fleet):
    """Hosts without specdec_deployment_id (today's layout: spark_head + spark_workers, and single Sparks)."""
    found = set()
    for dep in fleet["deployments"]:
        if not dep["named"]:
            found.update(dep["members"])
    return found


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _scrub = None

    @staticmethod
    def _fleet_errors(fleet, mine, play_hosts, groups, own=True, topology="two_sparks"):
        """The inventory's problems for two_sparks.yml (one pair) or spark_cluster.yml (one deployment of two to
        four Sparks): the play's deployments, whole, one deployment of the playbook's size."""
        errors = []
        for dep in mine if own else []:
            errors += [e for e in dep["errors"] if e not in errors]
        errors += _fleet.check_limit(fleet, play_hosts, groups)
        book = _fleet.PLAYBOOKS[topology]
        if len(mine) > 1:
            errors.append("inventory: the play holds %d deployments (%s); %s deploys one %s: --limit "
                          "to one (e.g. --limit <group>), or deploy them all with playbooks/fleet.yml."
                          % (len(mine), ", ".join(d["id"] for d in mine), book,
                             "pair" if topology == "two_sparks" else "deployment"))
        elif mine and len(mine[0]["members"]) == 1:
            host = mine[0]["members"][0]
            errors.append("inventory: %s needs %s, but deployment %s has one Spark (%s); serve it with "
                          "playbooks/single_spark.yml (-e single_spark_host=%s), or give its %s the same "
                          "specdec_deployment_id." % (book, "a pair" if topology == "two_sparks" else "two to four Sparks",
                                                      mine[0]["id"], host, host,
                                                      "pair" if topology == "two_sparks" else "other Sparks"))
        elif mine and topology == "two_sparks" and len(mine[0]["members"]) > 2:
            # Issue 24: the pair's main job stays a pair's; three or four Sparks have their own playbook.
            errors.append("inventory: two_sparks.yml deploys a pair, but deployment %s has %d Sparks (%s); deploy it "
                          "with playbooks/spark_cluster.yml (or playbooks/fleet.yml)."
                          % (mine[0]["id"], len(mine[0]["members"]), ", ".join(mine[0]["members"])))
        return errors

    def _failed(self, result, dep_id, deployment, errors):
        result["changed"] = False
        result["deployment"] = deployment
        result["failed"] = True
        msg = "Deployment %s: %d problem(s), nothing was changed:\n- %s" % (dep_id, len(errors), "\n- ".join(errors))
        result["msg"] = self._scrub(msg) if self._scrub is not None else msg
        return result

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = _action.task_args(self, _ARGS)
        me = task_vars["inventory_hostname"]
        groups = task_vars.get("groups", {})
        play_hosts = list(task_vars.get("ansible_play_hosts_all") or [me])
        topology = args.get("topology") or ("two_sparks" if len(play_hosts) > 1 else "single_spark")
        if topology not in _plan.TOPOLOGIES:
            raise AnsibleError("specdec_plan: topology must be two_sparks, spark_cluster or single_spark, got %s"
                               % topology)
        multi = topology in _plan.MULTI_NODE

        hostvars = task_vars["hostvars"]
        specs = _action.specs()
        # Role defaults as declared in the argument specs (equal to defaults/main.yml, a unit test checks;
        # the Jinja defaults declare none and are computed by the plan).
        defaults = _action.spec_defaults()
        user = {}
        errors = []
        # The specdec_server role passes trtllm_container_mounts (this host's, {} when unset): checked before any change.
        if "mounts" in args:
            line = _plan.mounts_problem(args["mounts"], me)
            if line:
                errors.append(line)
        per_host = {}
        addresses = {}

        fleet = _inventory.fleet(groups, play_hosts, hostvars, getattr(self, "_loader", None))
        fleet_head = None
        if multi:
            mine = _fleet.deployments_of(fleet, play_hosts)
            unnamed = _unnamed_hosts(fleet)
            heads = [h for h in groups.get("spark_head") or [] if h in unnamed]
            workers = [h for h in groups.get("spark_workers") or [] if h in unnamed]
            if heads + workers and not any(d["named"] for d in mine):
                # Today's layout (spark_head + spark_workers, no specdec_deployment_id in the play): one head and one
                # worker, in today's words.
                members = heads + [h for h in workers if h not in heads]
                if len(heads) != 1 or len(members) != 2:
                    errors.append("inventory: two_sparks.yml needs one host in group spark_head and one in "
                                  "spark_workers (got spark_head=%s, spark_workers=%s); see inventories/example/hosts.yml."
                                  % (heads, workers))
                else:
                    # Its head and size were checked above and by the settings, in today's words.
                    errors += self._fleet_errors(fleet, mine, play_hosts, groups, own=False, topology=topology)
            else:
                # Deployments named by specdec_deployment_id, or hosts standing alone.
                errors += self._fleet_errors(fleet, mine, play_hosts, groups, topology=topology)
                dep = mine[0]
                members, fleet_head = list(dep["members"]), dep["head"]
                if errors:
                    # The inventory does not name one pair: its settings would only add noise.
                    return self._failed(result, dep["id"], {"id": dep["id"], "topology": topology,
                                                            "members": members, "head": fleet_head}, errors)
        else:
            # One Spark: the play's host, whatever deployment the inventory puts it in (today's rule); its id is its
            # specdec_deployment_id, else its name.
            members = [me] if len(play_hosts) == 1 else play_hosts
            if len(play_hosts) != 1:
                errors.append("inventory: single_spark.yml serves on one Spark but targets %s; put one host in "
                              "spark_head, pass -e single_spark_host=NAME, or use --limit." % ", ".join(play_hosts))
            else:
                line = _plan.single_member_problem(fleet, me)
                if line:
                    errors.append(line)
                # Its id is its specdec_deployment_id (checked with the settings), else its name: a plain file name.
                if not any(d.get("named") for d in _fleet.deployments_of(fleet, [me])):
                    line = _fleet.host_name_problem(me)
                    if line:
                        errors.append(line)
        # Every member's settings as Ansible resolved them in its own task context (sparkops.specdec.specdec_settings,
        # registered as specdec_settings on every member before this task): the plan reads nothing else of a host.
        published = {}
        inventory_errors = bool(errors)
        for host in members:
            try:
                found = hostvars[host].get(_settings.PUBLISHED)
            except Exception:  # a host the hostvars do not know: reported as not published below
                found = None
            if not (isinstance(found, dict) and isinstance(found.get("settings"), dict)):
                if inventory_errors:  # a member outside the play (--limit): the inventory's line says so
                    continue
                errors.append("%s on %s: not published; run sparkops.specdec.specdec_settings on every member of the "
                              "deployment (register: %s) before sparkops.specdec.specdec_plan."
                              % (_settings.PUBLISHED, host, _settings.PUBLISHED))
                continue
            published[host] = found
        # No secret is quoted, in any form (a message may quote a value a member's check shows): the token, every
        # option whose spec declares no_log, every setting whose name looks secret.
        self._scrub = _action.scrubber(*[text for p in published.values() for k, v in p["settings"].items()
                                         if _action.secret_setting(k) for text in _action.secret_strings(v)])
        for host, found in published.items():
            for line in found.get("errors") or []:
                per_host.setdefault(line, []).append(host)
            # Names that are no setting (misspelt, removed): checked by name only.
            given = dict({name: None for name in found.get("misnamed") or []}, **found["settings"])
            address = port = None
            try:
                address = hostvars[host].get("ansible_host")
                port = hostvars[host].get("ansible_port")
            except Exception:  # an unresolvable ansible_host is reported by the connection itself
                pass
            addresses[host] = address or host
            context = {"host": host, "ansible_host": address, "ansible_port": port, "topology": topology}
            valid, problems = _settings.validate_settings(given, specs, context=context)
            for line in problems:
                per_host.setdefault(line, []).append(host)
            # Only values that passed their check, converted to the spec's type ('on' -> true, '8355' -> 8355).
            user[host] = valid
        # A problem every member shares (a group or extra var) is reported once.
        for line, hosts in per_host.items():
            errors.append(line if len(hosts) == len(members) else "%s (on %s)" % (line, ", ".join(hosts)))

        head = None
        if members:
            explicit = user.get(members[0], {}).get("specdec_head_host")
            head = fleet_head or explicit or (members[0] if multi else me)
        settings = dict(defaults)
        settings.update(user.get(head, user.get(me, {})))
        # One deployment has one value per setting: the same on every member.
        if len(members) > 1:
            names = sorted({k for h in members for k in user.get(h, {}) if k.startswith(_SAME_ON_ALL)})
            for name in names:
                if name in _PER_NODE:
                    continue
                values = {h: user.get(h, {}).get(name, defaults.get(name)) for h in members}
                if len({repr(v) for v in values.values()}) > 1:
                    shown = (", ".join(values) if _action.secret_setting(name)
                             else ", ".join("%s (%s)" % (h, v) for h, v in values.items()))
                    errors.append("%s: differs between %s; a deployment has one value, set it once for the group "
                                  "(e.g. in group_vars/spark_nodes.yml)." % (name, shown))
        if multi:
            # The deployment's topology is its size's (a pair deployed by spark_cluster.yml is recorded as by
            # two_sparks.yml: the same plan and state file).
            topology = _fleet.topology_of(len(members))
            ids = {}
            for host in members:
                try:
                    info = hostvars[host].get("trtllm_container_image_info")
                except Exception:  # a member without facts yet (before trtllm_container ran): nothing to compare
                    info = None
                if isinstance(info, dict) and info.get("id"):
                    ids[host] = info["id"]
            # Normally refused earlier, by the trtllm_container role right after the pull (the same function).
            line = _container.same_image_problem(ids, settings.get("trtllm_container_image"), consequence="")
            if line:
                errors.append(line)
            # The fabric's node order is the play's (inventory) order, as netplan_qsfp indexes the nodes (netplan_qsfp_nodes:
            # a ring's S1, S2, S3; a switch's node N), not the head-first order of the members.
            fabric_order = [h for h in play_hosts if h in members]
            if sorted(fabric_order) != sorted(members) or settings.get("specdec_layout") not in ("ring", "switch"):
                fabric_order = members
            for line in _plan.check_fabric(fabric_order, lambda h: dict(defaults, **user.get(h, {})), addresses):
                if line not in errors:
                    errors.append(line)
        dep = _plan.deployment_from_inventory(settings, topology, members, head or me, addresses)
        image = args.get("image") or {}
        version, source = (None, None)
        # llama-server has no TensorRT-LLM version: the image is only recorded (name and id).
        if image and dep["engine"] == "trtllm":
            version, source = _plan.image_version(settings.get("trtllm_container_image"), image.get("env"),
                                                  image.get("labels"), image.get("package_version"),
                                                  settings.get("trtllm_container_trtllm_version"))
            if version is None:
                errors.append("trtllm_container_trtllm_version: cannot tell the TensorRT-LLM version of %s (%s); set it "
                              "to the image's version, e.g. 1.3.0rc12." % (settings.get("trtllm_container_image"), source))
        vllm_version = None
        if image and dep["engine"] == "vllm":
            # The vllm package of the image, read in the container (engine_container), as TensorRT-LLM's is.
            vllm_version = image.get("package_version") or ""
            if _plan.parse_version(vllm_version) is None and image.get("package_version_error"):
                errors.append("trtllm_container_image: cannot read the vLLM version of %s: python3 in the engine "
                              "container failed (%s); check the container (docker ps -a, docker logs) and run again, or "
                              "use a vLLM image (vllm/vllm-openai, nvcr.io/nvidia/vllm)."
                              % (settings.get("trtllm_container_image"), image["package_version_error"]))
            elif _plan.parse_version(vllm_version) is None:
                errors.append("trtllm_container_image: cannot read the vLLM version of %s (no vllm package metadata in "
                              "the container); use a vLLM image (vllm/vllm-openai, nvcr.io/nvidia/vllm)."
                              % settings.get("trtllm_container_image"))
        if errors:
            # The plan is built from valid values only: a setting that failed its check is reported, never planned on.
            return self._failed(result, dep["id"], {k: v for k, v in dep.items() if k != "settings"}, errors)
        commits = args.get("commits")
        if args.get("downloads") is not None:
            commits = _plan.commits_from_results(args["downloads"])
        if args.get("probe") is not None:
            probe = args["probe"] or {}
            args["state"], args["server_running"] = _plan.parse_probe(probe.get("stdout"), probe.get("rc", 1))
        built = _plan.build_plan(dep, trtllm_version=version, version_source=source, commits=commits,
                                 image_id=image.get("id"), tuned=(args.get("state") or {}).get("tuned"),
                                 vllm_version=vllm_version, llama_spec_types=image.get("spec_types"))
        # Fetch once per pair: only over the SSH mesh of the deploy user (the user Ansible connects as, when the
        # inventory names it; else the nodes decide once they know it).
        deploy_user = None
        try:
            deploy_user = hostvars[dep["head"]].get("ansible_user") if dep.get("head") in hostvars else None
        except Exception:  # an unresolvable ansible_user is reported by the connection itself
            deploy_user = None
        peer_copy, peer_errors = _peer_copy.plan_peer_copy(settings, dep["members"], deploy_user or "")
        # A setting already reported by the per-setting checks is not reported again by the plan.
        named = {e.split(":", 1)[0] for e in errors}
        errors += [e for e in built["errors"] + peer_errors if e not in errors and e.split(":", 1)[0] not in named]
        result["changed"] = False
        result["deployment"] = {k: v for k, v in dep.items() if k != "settings"}
        if errors:
            return self._failed(result, dep["id"], result["deployment"], errors)
        plan = built["plan"]
        plan["peer_copy"] = peer_copy
        result["errors"] = []
        result["plan"] = plan
        warnings = ["%s." % e["reason"] for e in peer_copy.values() if e["mesh_user_differs"]]
        if warnings:
            result["warnings"] = warnings
        if "server_running" in args and plan.get("launch") is not None:
            decision = _plan.decide(args.get("state") or {}, plan, bool(args.get("server_running")),
                                    bool(args.get("allow_restart")), defer=bool(args.get("defer_restart")))
            result["decision"] = decision
            result["state_before"] = args.get("state") or {}
            now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
            if decision["action"] == "deferred":
                # The running server stays as recorded: the state file does not change.
                result["state_after"] = copy.deepcopy(result["state_before"])
                if me == plan["head"]:
                    result.setdefault("warnings", []).append(
                        "specdec_server_defer_restart: the server of deployment %s on %s keeps running with its recorded "
                        "launch spec (%s); a run without it restarts the server (with specdec_server_allow_restart)."
                        % (dep["id"], plan["head"], decision["reason"]))
            else:
                result["state_after"] = _plan.new_state(plan, args.get("state") or {}, now)
            # Only the head acts on the decision; a worker does not report the head's refusal again.
            if decision["action"] == "refuse" and me == plan["head"]:
                result["failed"] = True
                result["msg"] = ("specdec_server_allow_restart: the server of deployment %s on %s runs with another "
                                 "launch spec (%s); restarting it interrupts serving until the model is loaded again. "
                                 "Re-run with -e specdec_server_allow_restart=true to restart only the server (the "
                                 "container and the downloads stay). Nothing was changed."
                                 % (dep["id"], plan["head"], decision["reason"]))
        return result
