# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: how an inventory is cut into deployments. Not a
# public API; names and messages may change in any release without notice.
"""Group the hosts of an inventory into deployments (one Spark, a pair, or up to four Sparks in a ring or switch).

Pure functions, plain data in and out (JSON-able), no Ansible import:

* hosts that share a ``specdec_deployment_id`` (a group or host variable) form one deployment;
* hosts without one keep today's layout: the hosts of groups ``spark_head`` and ``spark_workers``
  form one deployment (id: the head's name; a pair at most), any other host stands alone (id: its name);
* a named deployment holds 1 to ``MAX_MEMBERS`` (4) Sparks; its topology is ``single_spark`` (one),
  ``two_sparks`` (a pair, ``playbooks/two_sparks.yml``) or ``spark_cluster`` (three or four,
  ``playbooks/spark_cluster.yml``; issue 24, docs/layouts.md);
* the head of a deployment is its ``specdec_head_host``, else its member in group ``spark_head``,
  else its only member.

Every problem is one line naming the setting, the problem and the fix.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re

HEAD_GROUP = "spark_head"
WORKER_GROUP = "spark_workers"
# A named deployment is one to four Sparks (NVIDIA's layouts: a pair, a 3-node ring, two to four through a switch;
# module_utils/_layout.MAX_MEMBERS). Today's unnamed layout (spark_head + spark_workers) stays a pair.
MAX_MEMBERS = 4
MAX_UNNAMED = 2
# Ansible's implicit groups: never a deployment's group.
_IMPLICIT = ("all", "ungrouped")


# A deployment id is a plain file name (it names the deployment's state file on its nodes and its run's log files
# on the controller): never "/", ".." or a name starting with a dot; documented in specdec_common's argument specs.
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
_ID_FIX = ("use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit, e.g. \"pair-a\"")


def id_problem(host, value):
    """The one-line problem of ``specdec_deployment_id`` set to ``value`` on ``host`` (None when it is a usable id,
    empty or unset). YAML's implicit types (an unquoted 1, 2026-11-27, yes) are named: "quote it"."""
    where = "specdec_deployment_id on %s" % host if host else "specdec_deployment_id"
    if value is None or (isinstance(value, str) and (value == "" or "{{" in value or "{%" in value)):
        return None
    if isinstance(value, bool):
        return ("%s: %s is a boolean, not a string (YAML reads unquoted yes, no, true, false, on and off as booleans); "
                "quote it, e.g. specdec_deployment_id: \"%s\"."
                % (where, "true" if value else "false", "yes" if value else "no"))
    if isinstance(value, int):
        return ("%s: %d is an integer, not a string (YAML reads unquoted digits as a number); quote it, e.g. "
                "specdec_deployment_id: \"%d\"." % (where, value, value))
    if isinstance(value, float):
        return ("%s: %r is a number, not a string (YAML reads unquoted digits as a number); quote it, e.g. "
                "specdec_deployment_id: \"%r\"." % (where, value, value))
    if isinstance(value, (datetime.date, datetime.datetime)):
        return ("%s: %s is a date, not a string (YAML reads an unquoted YYYY-MM-DD as a date); quote it, e.g. "
                "specdec_deployment_id: \"%s\"." % (where, value.isoformat(), value.isoformat()))
    if not isinstance(value, str):
        return "%s: %s is not a string; %s." % (where, type(value).__name__, _ID_FIX)
    if not re.fullmatch(ID_PATTERN, value):
        return ("%s: %s is not a plain file name (it names the deployment's state and log files); %s."
                % (where, json.dumps(value), _ID_FIX))
    return None


def host_name_problem(host):
    """The one-line problem of ``host``'s name as its deployment's id (no ``specdec_deployment_id`` set), else None:
    any name Ansible takes, unless it would leave the directory of the files it names."""
    if "/" in host or host.startswith(".") or "\x00" in host:
        return ("specdec_deployment_id on %s: unset, so the host's name %s is the deployment's id, but it is not a "
                "plain file name (it names the deployment's state and log files); set specdec_deployment_id on it: %s."
                % (host, json.dumps(host), _ID_FIX))
    return None


def log_name(dep_id):
    """A file name for ``dep_id`` that stays in its directory whatever the id holds (defence in depth: invalid ids
    are refused before any run): the id itself when it is a plain file name, else its safe characters and a digest."""
    text = str(dep_id)
    if re.fullmatch(ID_PATTERN, text):
        return text
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip(".-") or "id"
    return "%s-%s" % (safe[:40], hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12])


def _text(value):
    """A setting's value as text ('' for unset, None, or an unevaluated expression); a date as YYYY-MM-DD."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
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
        if kind == "id":
            for host in members:
                line = id_problem(host, settings[host].get("specdec_deployment_id"))
                if line:
                    errors.append(line)
        elif dep_id:
            line = host_name_problem(dep_id)
            if line:
                errors.append(line)
        if kind == "groups" and len(members) > MAX_UNNAMED:
            errors.append("inventory: groups %s and %s hold %d hosts without specdec_deployment_id (%s); without an "
                          "id they form one pair: give each deployment its own specdec_deployment_id (three or four "
                          "Sparks also specdec_layout, docs/layouts.md)."
                          % (HEAD_GROUP, WORKER_GROUP, len(members), _names(members)))
        elif len(members) > MAX_MEMBERS:
            errors.append("specdec_deployment_id: deployment %s has %d nodes (%s); a deployment is 1 to %d Sparks: "
                          "split it, giving each part its own specdec_deployment_id."
                          % (dep_id, len(members), _names(members), MAX_MEMBERS))
        ordered = ([head] if head else []) + [h for h in members if h != head]
        deployments.append({"id": dep_id, "members": ordered, "head": head, "topology": topology_of(len(members)),
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


def topology_of(count):
    """The topology of a deployment of ``count`` Sparks, which names its playbook (``PLAYBOOKS``)."""
    if count <= 1:
        return "single_spark"
    return "two_sparks" if count == 2 else "spark_cluster"


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
            whole = ("a pair deploys together: --limit both (e.g. %s) or neither." if len(dep["members"]) == 2 else
                     "a deployment deploys together: --limit all its nodes (e.g. %s) or none.") % example
            errors.append("--limit: %s %s in the play but %s of deployment %s %s not; %s"
                          % (_names(inside), "is" if len(inside) == 1 else "are", _names(outside), dep["id"],
                             "is" if len(outside) == 1 else "are", whole))
    return errors


# ---------------------------------------------------------------------------------------------
# One run per deployment (playbooks/fleet.yml, sparkops.specdec.fleet_deploy)
# ---------------------------------------------------------------------------------------------

# The playbook that deploys a deployment of each topology.
PLAYBOOKS = {"two_sparks": "two_sparks.yml", "single_spark": "single_spark.yml", "spark_cluster": "spark_cluster.yml"}
# The first tier of both playbooks' preflight (the inventory and every setting, no host contacted): fleet_deploy runs
# it for every deployment before any deployment's run starts (run_argv(..., check=True)).
CHECK_PLAYBOOK = "preflight_inventory.yml"

# ansible-playbook options of the fleet run passed on to each deployment's run, as (CLIARGS key, flag, kind).
# Not passed: --limit and tags (each run targets its deployment whole), --forks (a run holds one or two hosts).
_PASSED = (
    ("vault_ids", "--vault-id", "each"),
    ("vault_password_files", "--vault-password-file", "each"),
    ("extra_vars", "--extra-vars", "each"),
    ("remote_user", "--user", "value"),
    ("private_key_file", "--private-key", "value"),
    ("connection", "--connection", "value"),
    ("timeout", "--timeout", "value"),
    ("become", "--become", "flag"),
    ("become_method", "--become-method", "value"),
    ("become_user", "--become-user", "value"),
    ("check", "--check", "flag"),
    ("diff", "--diff", "flag"),
)
# Prompts a run in the background cannot answer.
_PROMPTS = (("ask_vault_pass", "--ask-vault-pass", "--vault-password-file FILE (or ANSIBLE_VAULT_PASSWORD_FILE)"),
            ("ask_pass", "--ask-pass", "SSH keys (or ansible_password from Vault)"),
            ("become_ask_pass", "--ask-become-pass", "ansible_become_password from Vault"))


def select(fleet, wanted, hosts):
    """The deployments to run: those named in ``wanted`` (ids; empty: every deployment with a member in ``hosts``).

    They are returned in the order of ``wanted`` when it is given (a rolling change's batches follow it: a canary
    first), else in the inventory's order (which several inventory sources can reorder).

    Returns ``(deployments, errors)``. Each deployment is a copy with ``problems``: its own problems, one line each
    (its inventory's, such as an id that is not a plain file name, or members outside ``hosts``); such a deployment is
    reported and not started, the others run. ``errors`` are the run's own problems (unknown ids, no deployment), and
    nothing runs when there is one.
    """
    hosts = list(hosts or [])
    pool = []
    for dep in fleet["deployments"]:
        if not set(dep["members"]) & set(hosts):
            continue
        problems = list(dep["errors"])
        outside = [h for h in dep["members"] if h not in hosts]
        if outside:
            problems.append("fleet_hosts: deployment %s has %s outside the group; put all its nodes in the group, or "
                            "none." % (dep["id"], _names(outside)))
        pool.append(dict(dep, problems=problems))
    errors = []
    if wanted:
        known = {d["id"]: d for d in pool}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            errors.append("fleet_deployments: %s %s no deployment of the inventory (known: %s); name deployments by "
                          "their specdec_deployment_id (a single Spark by its name)."
                          % (_names(unknown), "is" if len(unknown) == 1 else "are", _names(sorted(known)) or "none"))
        pool = sorted((d for d in pool if d["id"] in wanted), key=lambda d: wanted.index(d["id"]))
    if not pool and not errors:
        errors.append("fleet_hosts: no deployment has a node in the group (hosts: %s); point fleet_hosts at the group "
                      "of the Sparks (spark_nodes)." % (_names(hosts) or "none"))
    return pool, errors


def check_prompts(cli):
    """Raises ValueError (one line) for an option of the fleet run that prompts, which a run in the background cannot
    answer."""
    for key, flag, instead in _PROMPTS:
        if (cli or {}).get(key):
            raise ValueError("%s: the runs of the deployments cannot prompt; use %s instead." % (flag, instead))


def _inline(item):
    """Whether an --extra-vars value is given inline (key=value, YAML or JSON text), not as an @file."""
    return bool(item) and not str(item).startswith("@")


def vars_files(cli, vars_dir):
    """The private vars files of one deployment's run: ``[(path, value)]``, one per inline --extra-vars value of the
    fleet run (key=value, YAML or JSON text, in the order given), each to be written mode 0600 in ``vars_dir`` (a
    directory only its owner can enter, removed when the run ends) and passed as ``--extra-vars @path``.

    An inline value may hold a secret (``-e specdec_server_hf_token=...``); on a child's command line it would be
    readable by every user of the controller (``ps``) for the whole run. A file keeps the same precedence: extra vars
    are merged in the order given, whatever their form.
    """
    items = [str(item) for item in (cli or {}).get("extra_vars") or () if _inline(item)]
    return [("%s/extra-vars-%d.yml" % (vars_dir.rstrip("/"), n), item) for n, item in enumerate(items, 1)]


def run_argv(ansible_playbook, playbook_dir, dep, cli, vars_dir, check=False):
    """The ansible-playbook command of one deployment's run (a list; ``cli`` is the fleet run's CLIARGS).

    ``check``: the command of the deployment's check instead, the first tier of its playbook's preflight
    (``preflight_inventory.yml`` with its ``preflight_topology``: the inventory and every setting, as its playbook
    checks them, no host contacted), with the same options.

    The run targets the deployment whole (``--limit`` to its members) with the playbook of its topology
    (``single_spark.yml`` also gets ``-e single_spark_host=NAME``), and inherits the fleet run's inventories, Vault,
    extra vars, connection, become, check and diff options and verbosity. An inline extra var is passed as
    ``@<file>`` of ``vars_files(cli, vars_dir)`` (never its value: the command line is public), an ``@file`` as
    given. Raises ValueError (one line) for an option that prompts, which a run in the background cannot answer.
    """
    cli = cli or {}
    check_prompts(cli)
    files = iter(vars_files(cli, vars_dir))
    argv = [ansible_playbook]
    for source in cli.get("inventory") or ():
        argv += ["--inventory", str(source)]
    for key, flag, kind in _PASSED:
        value = cli.get(key)
        if key == "extra_vars":
            for item in value or ():
                if _inline(item):
                    argv += [flag, "@" + next(files)[0]]
                elif item:
                    argv += [flag, str(item)]
        elif kind == "each":
            for item in value or ():
                argv += [flag, str(item)]
        elif kind == "flag":
            if value:
                argv.append(flag)
        elif value not in (None, ""):
            argv += [flag, str(value)]
    verbosity = int(cli.get("verbosity") or 0)
    if verbosity:
        argv.append("-" + "v" * min(verbosity, 6))
    argv += ["--limit", ",".join(dep["members"])]
    if dep["topology"] == "single_spark":
        argv += ["--extra-vars", "single_spark_host=%s" % dep["members"][0]]
    if check:
        argv += ["--extra-vars", "preflight_topology=%s" % dep["topology"]]
    argv.append("%s/%s" % (playbook_dir.rstrip("/"), CHECK_PLAYBOOK if check else PLAYBOOKS[dep["topology"]]))
    return argv


def parse_output(text):
    """The json stdout callback's document in a run's output ({} if none): the last JSON object that starts a line and
    holds ``stats`` (other callbacks or warnings may print before or after it)."""
    decoder = json.JSONDecoder()
    found = {}
    start = 0 if text.startswith("{") else text.find("\n{")
    while start != -1:
        begin = start if text[start] == "{" else start + 1
        try:
            document = decoder.raw_decode(text, begin)[0]
        except ValueError:
            document = None
        if isinstance(document, dict) and "stats" in document:
            found = document
        start = text.find("\n{", begin)
    return found


def check_problems(rc, document, stderr_tail=""):
    """The problems a deployment's check found (``run_argv(..., check=True)``; [] when it passed), one line each.

    The failed task that stopped each host (its last failed one) gives its message's lines: a message of several lines
    is a header ("Deployment pair-b: 2 problem(s), nothing was changed:") and one ``- `` line per problem, each kept
    without the header; a message of one line is kept whole; a problem two hosts share is kept once. A check that failed
    without a failed task (ansible-playbook could not load the inventory, a Vault password is missing) gives one line
    from its stderr."""
    document = document if isinstance(document, dict) else {}
    last = {}
    for play in document.get("plays") or []:
        for task in play.get("tasks") or []:
            for host, result in (task.get("hosts") or {}).items():
                if isinstance(result, dict) and (result.get("failed") or result.get("unreachable")):
                    last[host] = result
    lines = []
    for result in last.values():
        text = str(result.get("msg") or "").strip().splitlines()
        items = [t.strip()[2:] for t in text[1:] if t.strip().startswith("- ")]
        for line in items if len(text) > 1 and text[0].rstrip().endswith(":") and items else [_message(result)]:
            line = " ".join(line.split())[:400]
            if line and line not in lines:
                lines.append(line)
    if rc != 0 and not lines:
        tail = " ".join((stderr_tail or "").split())[-400:]
        lines.append("the check of the deployment (ansible-playbook %s) exited %s%s"
                     % (CHECK_PLAYBOOK, rc, (": " + tail) if tail else " before any task"))
    return lines


def _message(result):
    """A task result's message in one line (msg, else stderr's last line, else the result's keys)."""
    msg = result.get("msg")
    if not msg and result.get("stderr"):
        msg = str(result["stderr"]).strip().splitlines()[-1:]
        msg = msg[0] if msg else ""
    if isinstance(msg, (list, dict)):
        msg = str(msg)
    text = " ".join(str(msg or "failed").split())
    return text[:400]


_RECAP = ("ok", "changed", "failures", "unreachable", "skipped", "rescued", "ignored")


def _outcome(dep, **fields):
    """A deployment's outcome: what names it (id, topology, members, head) and ``fields``."""
    return dict({"id": dep["id"], "topology": dep["topology"], "members": list(dep["members"]), "head": dep["head"]},
                **fields)


def summarize(dep, rc, document, stderr_tail="", check=False):
    """One deployment's outcome from its run: exit code and the output of the json stdout callback (ansible.posix.json).

    Returns ``{"id", "topology", "members", "head", "rc", "status" ("serving", "checked" or "failed"),
    "hosts": {host: recap}, "failures": [{"host", "task", "msg", "unreachable"}], "changed", "deploy"}``: the last
    failed (or unreachable) task of each failed host, and the run's ``specdec_deploy`` stats (node -> its entry).
    """
    document = document if isinstance(document, dict) else {}
    stats = document.get("stats") or {}
    last = {}
    for play in document.get("plays") or []:
        for task in play.get("tasks") or []:
            name = (task.get("task") or {}).get("name") or "?"
            for host, result in (task.get("hosts") or {}).items():
                if not isinstance(result, dict):
                    continue
                # A failed host stops at its fatal failure: its last failed result is the one that stopped it.
                if result.get("unreachable") or result.get("failed"):
                    last[host] = {"host": host, "task": name, "msg": _message(result),
                                  "unreachable": bool(result.get("unreachable"))}
    hosts = {}
    failures = []
    for host in dep["members"]:
        recap = stats.get(host)
        if not isinstance(recap, dict):
            hosts[host] = None
            continue
        hosts[host] = {k: int(recap.get(k) or 0) for k in _RECAP}
        if (hosts[host]["failures"] or hosts[host]["unreachable"]) and host in last:
            failures.append(last[host])
    bad = rc != 0 or any(r is None or r["failures"] or r["unreachable"] for r in hosts.values())
    if bad and not failures:
        tail = " ".join((stderr_tail or "").split())[-400:]
        failures.append({"host": None, "task": None, "unreachable": False,
                         "msg": "ansible-playbook exited %s%s" % (rc, (": " + tail) if tail else " before any task")})
    custom = document.get("global_custom_stats") or {}
    deploy = custom.get("specdec_deploy") if isinstance(custom, dict) else None
    status = "failed" if bad else ("checked" if check else "serving")
    return _outcome(dep, rc=rc, status=status, hosts=hosts, failures=failures,
                    changed=sum((r or {}).get("changed", 0) for r in hosts.values()),
                    deploy=deploy if isinstance(deploy, dict) else {})


def not_run(dep, max_failures):
    """The outcome of a deployment the run did not start: the failure budget was spent (it was left as it was)."""
    return _outcome(dep, rc=None, status="not_run", hosts={h: None for h in dep["members"]}, changed=0, deploy={},
                    failures=[],
                    reason="not started: more than %s deployment(s) failed (fleet_max_failures); it was left as it was"
                           % max_failures)


def invalid(dep, problems):
    """The outcome of a deployment that failed the checks made before any run (its inventory, its settings, its log
    files): not started, left as it was."""
    return _outcome(dep, rc=None, status="invalid", hosts={h: None for h in dep["members"]}, changed=0, deploy={},
                    failures=[{"host": None, "task": None, "msg": line, "unreachable": False} for line in problems],
                    reason="not started: %d problem(s) found before any run; it was left as it was" % len(problems))


def error_line(exc):
    """An exception in one line: its type and its text (whitespace collapsed, at most 300 characters)."""
    text = " ".join(str(exc).split())[:300]
    return "%s%s" % (type(exc).__name__, (": " + text) if text else "")


def crashed(dep, exc):
    """The outcome of a deployment whose run could not be run or read (an exception in the code that runs it)."""
    return _outcome(dep, rc=None, status="failed", hosts={h: None for h in dep["members"]}, changed=0, deploy={},
                    failures=[{"host": None, "task": None, "unreachable": False,
                               "msg": "fleet_deploy could not run deployment %s: %s" % (dep["id"], error_line(exc))}])


def waiting(dep, running):
    """The report's entry of a deployment without an outcome yet: V(running), or V(pending) (not started yet)."""
    return _outcome(dep, rc=None, status="running" if running else "pending", hosts={h: None for h in dep["members"]},
                    changed=0, deploy={}, failures=[])


def verdict(outcomes):
    """The fleet run's summary: ids serving, not serving, invalid and not run, and one message line per failed or
    invalid deployment (outcomes still running or pending are in no list)."""
    serving = [o["id"] for o in outcomes if o["status"] in ("serving", "checked")]
    failed = [o["id"] for o in outcomes if o["status"] == "failed"]
    refused = [o["id"] for o in outcomes if o["status"] == "invalid"]
    skipped = [o["id"] for o in outcomes if o["status"] == "not_run"]
    lines = []
    for o in outcomes:
        if o["status"] not in ("failed", "invalid"):
            continue
        why = "; ".join("".join(part + ": " for part in (f["host"], f["task"]) if part) + f["msg"]
                        for f in o["failures"])
        lines.append("%s (%s): %s%s" % (o["id"], _names(o["members"]),
                                        "not started: " if o["status"] == "invalid" else "", why))
    if skipped:
        lines.append("not started, the failure budget (fleet_max_failures) was spent; left as they were: %s"
                     % _names(skipped))
    bad = len(failed) + len(refused)
    msg = ("%d of %d deployments failed or were refused, the others were left as their runs left them (serving: %s):"
           "\n- %s" % (bad, len(outcomes), _names(serving) or "none", "\n- ".join(lines))) if refused else (
        "%d of %d deployments failed, the others were left as their runs left them (serving: %s):\n- %s"
        % (len(failed), len(outcomes), _names(serving) or "none", "\n- ".join(lines))) if failed else (
        "%d deployment(s): %s" % (len(outcomes), _names(serving)))
    return {"serving": serving, "not_serving": failed, "invalid": refused, "not_run": skipped, "msg": msg}
