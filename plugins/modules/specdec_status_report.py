#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: specdec_status_report
short_description: Merge every node's status into one row per deployment, a table, a JSON file and a summary (controller-side)
version_added: 0.2.0
description:
  - An action plugin, run on the controller with C(run_once); it contacts no host. C(playbooks/status.yml) reads every
    node with M(sparkops.specdec.specdec_status_info) (unreachable nodes ignored there) and this action merges them.
  - "Deployments come from the nodes' state files: the newest record of a deployment (by C(updated_at)) names its
    members and head. Each member is reachable or not (an unreachable result, or a host that left the play:
    O(hosts) minus O(active)), with its container (exists, running, image id, start time, uptime) and whether its own
    state file records the same launch (C(current), C(differs), C(missing))."
  - "The server: the running launch of the state file (engine, target and draft model, method, max_draft_len, port,
    image id, start time), whether the head's server process runs and for how long, the head's C(/health) status,
    the models C(/v1/models) lists, and the live acceptance: accepted / drafted tokens from the engine's cumulative
    counters since the server started (llama.cpp C(/metrics), TensorRT-LLM C(/prometheus/metrics)), with drafted and
    accepted tokens, drafts and the mean accepted length (1 + accepted / drafts)."
  - "Verdict per deployment: C(serving) (every member reachable with its container running and the same record, one
    image id on every member, the launched image id where the container runs the deployment's image by name (a
    two-Spark container runs the image with sshd derived from it), the head's server process running, C(/health) 200
    and the target model listed), C(degraded) (the
    server answers and lists its model, but another check failed, e.g. a worker is unreachable), C(down) (the server
    does not answer, or does not list its model), C(torn_down) (C(playbooks/teardown.yml) marked its state files:
    C(running) null, C(torn_down_at) set; nothing of it is checked, the launch that ran last is C(last_launch)),
    C(retired) (the inventory no longer assigns the id to any of its members and it does not serve; its problem line
    says how to remove its state files). A deployment that still serves although the inventory no longer assigns its
    id keeps C(serving) or C(degraded), with a problem line. A node of the play in no live deployment (none, or only
    torn down or retired ones) is a row of its own:
    C(not_deployed) (reachable, no state file names it; an older state file that no longer names it is a problem
    line), C(unreachable), or C(unknown) (reachable, but nothing could be read there). Each row lists its
    C(problems) (one line each) and C(missing) (field -> why it could not be read)."
  - "A pending container change on a member (the C(trtllm_container) role keeps the previous container as
    C(<container>-previous) until the new server serves) is a problem line naming the kept image and the requested
    one and the ways out (a run with the change's settings finishes it; one with the previous image and settings and
    C(trtllm_container_allow_recreate=true) backs it out, the kept container getting its name back; with the kept
    container gone or another container under its name, the next deployment stops before any change until the record
    is removed) (a deployment that serves is then C(degraded)), the member's C(pending_change), and the summary's
    C(pending_changes)."
  - "Which ids the inventory assigns to a host (C(in_inventory) of a row) is read from the inventory as the deployment
    playbooks read it: the deployment its group makes it a member of (C(specdec_deployment_id), C(specdec_head_host);
    without them the C(spark_head)/C(spark_workers) pair under the head's name, or a host on its own under its name),
    and the id C(single_spark.yml) deploys it under (its C(specdec_deployment_id), else its name). The whole inventory
    counts, whatever C(--limit) says."
  - Writes the JSON document to O(report_path) atomically, readable by its owner only (mode 0600), also in check mode
    (the file is output on the controller, not a change to a node).
  - Fails only on bad arguments or an unwritable O(report_path); a deployment that does not serve is a row, and
    RV(all_serving) says whether every one serves (C(status.yml) fails on it only with C(status_require_serving));
    C(torn_down) and C(retired) deployments do not count against it.
author:
  - sparkops maintainers (@sparkops)
options:
  facts:
    description: Inventory name -> the node's registered M(sparkops.specdec.specdec_status_info) result (for an
      unreachable node, its unreachable result).
    type: dict
    required: true
  hosts:
    description: Every host of the play, in order (C(ansible_play_hosts_all)). Default the play's.
    type: list
    elements: str
  active:
    description: The hosts still in the play (C(ansible_play_hosts)); a host of O(hosts) not in it counts as
      unreachable. Default the play's.
    type: list
    elements: str
  report_path:
    description: The JSON file on the controller (C(status_report_path)); relative paths are in O(report_dir). Default
      C(specdec-status.json) in O(report_dir).
    type: path
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
  - sparkops.specdec.reports
attributes:
  check_mode:
    support: full
    details: The same result in check mode; the JSON file is written on the controller in both.
  diff_mode:
    support: none
    details: Changes nothing on a host.
  idempotent:
    support: full
    details: Never reports a change (the JSON file is controller output).
seealso:
  - module: sparkops.specdec.specdec_status_info
"""

EXAMPLES = r"""
- name: One row per deployment
  sparkops.specdec.specdec_status_report:
    facts: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, '__status_facts'))) }}"
    report_path: /tmp/specdec-status.json
  run_once: true
  register: __status

- name: Show the table
  ansible.builtin.debug:
    msg: "{{ __status.table }}"
  run_once: true
"""

RETURN = r"""
deployments:
  description: One row per deployment, then one per node in no deployment (the JSON file's C(deployments)).
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: V(deployment) or V(node) (a node in no deployment).
      type: str
    deployment:
      description: The deployment id (null for a node row).
      type: str
    status:
      description: V(serving), V(degraded), V(down), V(torn_down), V(retired), V(not_deployed), V(unreachable) or
        V(unknown) (a reachable node whose status could not be read, e.g. the module failed there).
      type: str
    serving:
      description: Whether the status is V(serving).
      type: bool
    in_inventory:
      description: The inventory still assigns the deployment id to one of its members (null for a node row, or when
        the inventory could not be read).
      type: bool
    torn_down_at:
      description: When C(playbooks/teardown.yml) ended the deployment (ISO 8601; null unless V(torn_down)).
      type: str
    last_launch:
      description: What served until the teardown (the state file's C(previous), C(target_model), C(method),
        C(max_draft_len), C(port), C(image_id), C(started_at), C(members), ...); null unless V(torn_down).
      type: dict
    reachable:
      description: Every member was reachable.
      type: bool
    head:
      description: The head's inventory name.
      type: str
    members:
      description: The members, head first.
      type: list
      elements: str
    nodes:
      description: Member -> C(reachable), C(role) (head or worker), C(error), C(container) (C(exists), C(running),
        C(status), C(image), C(image_id), C(started_at), C(uptime_seconds) (int, s), C(error)), C(state_record)
        (V(current), V(differs), V(missing)) and C(pending_change) (null, or the node's pending container change as
        M(sparkops.specdec.specdec_status_info) returns it, with C(kept_name), C(kept_image), C(kept_image_id),
        C(requested_image), C(differences), C(kept_at), C(kept_container), C(record), C(error)).
      type: dict
    engine:
      description: V(trtllm) or V(llamacpp), from the state file.
      type: str
    server:
      description: The running launch of the state file, C(target_model), C(draft_model), C(method), C(max_draft_len)
        (tokens), C(port), C(endpoint), C(image_id), C(started_at), C(fingerprint), C(tuned), and from the head
        C(process_running), C(process) (its command) and C(uptime_seconds) (int, s since the server process started).
      type: dict
    health:
      description: C(status) (HTTP status of the head's C(/health), null when it did not answer) and C(error).
      type: dict
    model:
      description: C(expected) (the running target model) and C(served) (the ids C(/v1/models) lists, null when unread).
      type: dict
    acceptance:
      description: Null unless the server answers. C(available), C(rate) (accepted / drafted, 0-1), C(draft_tokens),
        C(accepted_tokens), C(drafts) (verification steps), C(mean_accepted_length) (tokens per step), C(since)
        (cumulative counters since the server started), C(source) (the metrics path) and C(reason) (why no rate).
      type: dict
    problems:
      description: One line per failed check.
      type: list
      elements: str
    missing:
      description: Field -> why it could not be read.
      type: dict
    stale_records_on:
      description: Nodes that hold an older state file of this deployment that no longer names them.
      type: list
      elements: str
    supervisor_gave_up:
      description:
        - The supervisor in the head's engine container stopped restarting the server after its cap of consecutive
          failed starts (C(specdec_server_max_failed_starts)); C(null) otherwise. Also a line of C(problems). A start
          by the role (the deploy playbook) clears it.
      type: dict
      contains:
        at: {description: 'When it gave up (UTC, ISO 8601).', type: str}
        failed_starts: {description: Consecutive failed starts., type: int}
        max_failed_starts: {description: The cap it applied., type: int}
        last_failure: {description: How the last start failed., type: str}
table:
  description: The rows as a text table, a header line and one line per row (a node with a pending container change
    shows C(+pending) in CONTAINER; a deployment the inventory no longer assigns shows C((not in inventory)) after its
    id; a V(torn_down) one shows the method, draft length and model that served last), then one C(PENDING) line per
    such node, one C(INVENTORY) line per deployment the inventory no longer assigns (its problem line) and one
    C(SUPERVISOR) line per deployment whose supervisor gave up (why, and what starts it again).
  returned: always
  type: list
  elements: str
  sample:
    - "DEPLOYMENT  STATUS   NODES    CONTAINER  ENGINE    METHOD        K  HEALTH  MODEL  IMAGE  UPTIME  ACCEPTANCE"
summary:
  description: The per-deployment summary (for C(ansible.builtin.set_stats)), C(deployments) (id -> C(status),
    C(serving), C(reachable), C(head), C(members), C(engine), C(method), C(max_draft_len), C(model), C(health),
    C(image_id), C(uptime_seconds), C(acceptance_rate), C(draft_tokens), C(accepted_tokens), C(problems) (count),
    C(pending_changes) (members with a pending container change), C(in_inventory), C(torn_down_at)), C(serving) and
    C(not_serving) (ids; V(torn_down) and V(retired) deployments are in neither), C(torn_down) and C(retired) (ids),
    C(nodes_without_deployment) (node -> C(status), C(reachable), C(pending_change) (bool)) and C(unreachable_nodes)
    (the nodes of the run Ansible could not reach, and the members of a live deployment outside the run; not the
    members of a torn-down or retired one that left the inventory).
  returned: always
  type: dict
all_serving:
  description: At least one live deployment was found and every one serves (V(torn_down) and V(retired) deployments
    are not live, so they count neither against it nor for it).
  returned: always
  type: bool
msg:
  description: One line naming the deployments that serve, or those that do not with their first problem.
  returned: always
  type: str
generated_at:
  description: When the report was built (controller clock, UTC, ISO 8601).
  returned: always
  type: str
report_path:
  description: Absolute path of the JSON file written.
  returned: success
  type: str
  sample: /home/me/sparkops/specdec-status.json
"""
