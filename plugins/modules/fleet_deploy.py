#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_deploy
short_description: Deploy every deployment of a fleet inventory at once, each in its own run (controller-side)
version_added: 0.2.0
description:
  - An action plugin, run on the controller (C(playbooks/fleet.yml)). It cuts the inventory into deployments the way
    M(sparkops.specdec.specdec_plan) does (hosts sharing C(specdec_deployment_id) form one, headed by
    C(specdec_head_host); today's C(spark_head) + C(spark_workers) layout is one pair; any other host stands alone).
  - For each deployment it runs that deployment's playbook as its own C(ansible-playbook) process, limited to the
    deployment's nodes, O(parallel) at a time; C(two_sparks.yml) for a pair (TP=2), C(spark_cluster.yml) for three or
    four Sparks (a ring or a switch, C(specdec_layout)), C(single_spark.yml) with C(single_spark_host) for a single Spark.
    Each run keeps its own failure rules (a failed or lost node stops every node of its deployment, with the per-node
    report), so a failing deployment stops itself and no other.
  - Each run inherits this run's inventories, Vault ids and password files, extra vars, connection, C(--become),
    C(--check), C(--diff) and verbosity; it never inherits C(--limit) or tags. Its output (the
    C(ansible.posix.json) stdout callback) is kept in O(log_dir) as C(<id>.json), its stderr as C(<id>.stderr), both
    mode 0600; the outcome of each deployment is read from that JSON (host recaps, the last failed task of each
    failed host, the C(specdec_deploy) stats), never from text.
  - Extra vars given inline (C(-e key=value), C(-e '{...}')), which may hold secrets such as
    C(specdec_server_hf_token), never appear on a run's command line (readable by every user of the controller with
    C(ps)). Each reaches the run as C(--extra-vars @FILE), a mode 0600 file in a private (0700) temporary directory,
    in the same place among the other extra vars (the same precedence), removed when the run ends, failed or not.
    C(-e @file) is passed as given.
  - Before any run starts, every deployment is checked, all of them before the first run, for its inventory (a
    C(specdec_deployment_id) that is not a plain file name or that YAML reads as a number, date or boolean, a host
    name that is not a plain file name where it is the id, its head, its size, members outside O(hosts)), its log
    files (outside O(log_dir), the report itself, or a directory, link or unwritable file in their place), then its
    settings, with the first tier of its playbook's preflight (C(preflight_inventory.yml) with its C(preflight_topology),
    the same options as its run, no host contacted; O(parallel) at a time). A deployment that fails is reported with
    status V(invalid) and one line per problem, is not started (left as it was), and counts against O(max_failures);
    the others run. A check that cannot run is that deployment's problem. Problems of the run itself (an unknown id
    in O(deployments), an option that prompts, a bad setting, a O(log_dir) or O(report_path) that cannot be written)
    start nothing.
  - Fails when any deployment does not serve or was refused, listing for each the node, the task and its message; the
    other deployments are left as their runs left them (serving). The JSON report at O(report_path) holds the same.
  - The report is written as each deployment ends (deployments without an outcome yet are V(running) or V(pending),
    and C(complete) is false until the last one has ended), so an interrupted fleet run keeps the outcomes it had.
    The report is first written before any check or run; a report that cannot be written later never stops a run
    and never loses an outcome; the result and the C(specdec_fleet) stats hold them, with RV(report_error).
    An error in the code that runs one deployment (its run cannot start, its output cannot be read) is that
    deployment's failure (status V(failed), rc null), never the fleet's. Log files are named by the id, which is a
    plain file name; they never leave O(log_dir) whatever the id holds.
  - Why our own code (a run per deployment). Ansible stops a play's hosts together (C(any_errors_fatal)) or alone,
    never by deployment, and the rescue of a failed host runs only after the other hosts leave the block, so a pair
    could not stop both nodes before its peer went on. A separate run per deployment keeps the tested per-pair rules.
author:
  - sparkops maintainers (@sparkops)
options:
  hosts:
    description: Inventory group holding every Spark of the fleet (C(fleet_hosts)).
    type: str
    default: spark_nodes
  deployments:
    description:
      - Ids of the deployments to run (C(fleet_deployments)); empty runs every deployment with a node in O(hosts).
      - They start in this order (with O(parallel) the batch size, a rolling change's batches follow it, e.g. a canary
        first); empty starts them in the inventory's order, which extra inventory sources (C(-i) twice) can change.
      - A pair's id is its C(specdec_deployment_id) (today's layout, the head's name); a single Spark's id is its
        C(specdec_deployment_id), else its inventory name. Use this instead of C(--limit), which would skip the
        controller-side play itself.
    type: list
    elements: str
    default: []
  parallel:
    description: How many deployments run at once (C(fleet_parallel)); V(0) runs them all at once.
    type: int
    default: 0
  max_failures:
    description:
      - Failure budget (C(fleet_max_failures)); once more than this many deployments have failed (or were refused by
        the checks before any run), no further run starts (runs under way finish) and the deployments not started are returned with status V(not_run), left
        as they were. Null runs every deployment whatever fails.
      - A rolling change is a run with O(parallel) as the batch size and a budget, e.g. C(-e fleet_parallel=1
        -e fleet_max_failures=0 -e specdec_server_max_draft_len=4 -e specdec_server_allow_restart=true); each
        deployment's run restarts its server only with that consent, waits for C(/health) and the smoke test, and
        restores the previous server when the new one fails (the C(specdec_server) restart-and-restore path).
    type: int
  log_dir:
    description: Controller directory for each run's output, C(<id>.json) and C(<id>.stderr) (C(fleet_log_dir));
      relative paths are in O(report_dir).
    type: path
    default: specdec-fleet-logs
  report_path:
    description: Controller path of the JSON report (C(fleet_report_path)); relative paths are in O(report_dir). Written
      mode 0600, replaced atomically.
    type: path
    default: specdec-fleet.json
  ansible_playbook:
    description: The C(ansible-playbook) to run; default the one running this play, else the one on C(PATH).
    type: path
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
  - sparkops.specdec.reports
attributes:
  check_mode:
    support: full
    details: Each deployment's run gets C(--check); RV(deployments[].status) is V(checked) where it passed.
  diff_mode:
    support: full
    details: Each deployment's run gets C(--diff); the differences are in its JSON output.
  idempotent:
    support: partial
    details: Reports a change when a deployment's run changed something on its nodes, so it is as idempotent as the playbook
      it runs (the collection's deploy playbooks change nothing on a second run).
notes:
  - "Errors before any run, one line each: the inventory's deployment errors (see M(sparkops.specdec.specdec_plan)),
    a deployment with nodes outside O(hosts), an unknown id in O(deployments), no deployment in O(hosts), an option of
    the wrong type or out of range (a negative O(parallel) or O(max_failures), an empty O(log_dir); the rules of
    C(fleet_*) in C(plugin_utils/_settings.py), the same lines an inventory value gets), and C(--ask-vault-pass),
    C(--ask-pass) or C(--ask-become-pass) (a run in the background cannot prompt; use C(--vault-password-file) or
    Vault-encrypted variables)."
  - A deployment whose run could not even start a play (a missing playbook, an inventory that does not parse) is
    reported with C(ansible-playbook)'s exit code and the end of its stderr; a check that fails that way makes it
    V(invalid) with the same.
  - The JSON output format is the C(ansible.posix.json) callback's (C(plays[].tasks[].hosts), C(stats),
    C(global_custom_stats)).
seealso:
  - module: sparkops.specdec.specdec_plan
"""

EXAMPLES = r"""
- name: Deploy every pair and single Spark of the inventory, two deployments at a time
  sparkops.specdec.fleet_deploy:
    parallel: 2
  register: fleet

- name: Deploy only pair-b and the single Spark spark-5
  sparkops.specdec.fleet_deploy:
    deployments: [pair-b, spark-5]
"""

RETURN = r"""
deployments:
  description: One entry per deployment run, in inventory order.
  returned: when the runs started
  type: list
  elements: dict
  contains:
    id: {description: The deployment id., type: str}
    topology: {description: 'two_sparks (a pair), spark_cluster (three or four Sparks) or single_spark.', type: str}
    members: {description: 'Inventory names of its nodes, head first.', type: list, elements: str}
    head: {description: The node that serves., type: str}
    rc: {description: 'Exit code of its ansible-playbook run (null: not run, or it could not be run or read).', type: int}
    status:
      description: 'V(serving), V(checked) (check mode), V(failed), V(invalid) (refused by the checks before any run,
        not started) or V(not_run) (the budget was spent). In the report while the fleet runs, also V(running) or
        V(pending).'
      type: str
    reason: {description: Why it was not run (status V(not_run) or V(invalid) only)., type: str}
    hosts:
      description: 'Per node, the run''s recap (ok, changed, failures, unreachable, skipped, rescued, ignored; counts
        of tasks), or null for a node the run never reached.'
      type: dict
    failures:
      description: The last failed or unreachable task of each failed node (C(host), C(task), C(msg), C(unreachable)).
      type: list
      elements: dict
    changed: {description: Tasks that changed something on its nodes (count)., type: int}
    deploy: {description: 'Its run''s C(specdec_deploy) stats: node -> deployment, role, endpoint, model, method.', type: dict}
    seconds: {description: Wall time of its run (seconds)., type: float}
    started_at: {description: 'When its run started (UTC, ISO 8601): runs that overlap ran in parallel.', type: str}
    ended_at: {description: 'When its run ended (UTC, ISO 8601).', type: str}
    log: {description: Path of its run's JSON output on the controller., type: str}
serving:
  description: Ids of the deployments whose runs succeeded.
  returned: when the runs started
  type: list
  elements: str
not_serving:
  description: Ids of the deployments whose runs failed (the task fails when there is one).
  returned: when the runs started
  type: list
  elements: str
invalid:
  description: Ids of the deployments refused by the checks made before any run (not started; the task fails when
    there is one). Each counts against O(max_failures).
  returned: when the runs started
  type: list
  elements: str
not_run:
  description: Ids of the deployments not started because the failure budget (O(max_failures)) was spent.
  returned: when the runs started
  type: list
  elements: str
max_failures:
  description: The failure budget the run used (null, no limit).
  returned: when the runs started
  type: int
parallel:
  description: How many runs ran at once.
  returned: when the runs started
  type: int
complete:
  description: Whether every deployment has its outcome (false only in the report while the fleet runs).
  returned: when the runs started
  type: bool
report:
  description: Path of the JSON report (the same keys as this result), written as each deployment ends.
  returned: when the runs started
  type: str
report_error:
  description: 'Why the report could not be written once the runs had ended (one line); the outcomes are in this
    result only, and the task fails.'
  returned: when the report could not be written after the runs
  type: str
msg:
  description: One line per deployment that failed (node, task, message), else the deployments that serve.
  returned: always
  type: str
"""
