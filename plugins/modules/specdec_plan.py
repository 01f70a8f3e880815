#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: specdec_plan
short_description: Check a speculative-decoding deployment and plan its server (controller-side)
version_added: 0.2.0
description:
  - An action plugin, run on the controller; it contacts no host. It is the first task of every deployment
    playbook (the inventory preflight) and of the C(specdec_server) role.
  - Maps the inventory to one deployment (id, member nodes, head, engine, image, preset, overrides).
  - How an inventory is cut into deployments (several pairs and single Sparks may share one inventory, a fleet).
    Hosts that share a C(specdec_deployment_id) (a group or host variable) form one deployment, named by it. Hosts
    without one keep today's layout, the hosts of groups C(spark_head) and C(spark_workers) form one deployment (id the
    head's name) and any other host stands alone (a single Spark, id its name). The head of a deployment is its
    C(specdec_head_host), else its member in group C(spark_head), else its only member.
  - With O(topology=two_sparks) the members are the one pair the play holds (after C(--limit)). In today's layout
    (no C(specdec_deployment_id) in the play) that is the host of group C(spark_head) and the host of group
    C(spark_workers), as before. A play holding several deployments, half a pair, or one Spark is refused; a run deploys
    one pair (C(--limit) to the pair's group), and C(playbooks/fleet.yml) (M(sparkops.specdec.fleet_deploy)) runs one
    such run per deployment. With O(topology=spark_cluster) (C(playbooks/spark_cluster.yml)) the members are the one
    deployment of two to four Sparks the play holds (C(specdec_layout) ring or switch for three or four); a pair
    planned so is the pair O(topology=two_sparks) plans, and C(two_sparks) refuses more than a pair with one line. The
    deployment's recorded topology is its size's (V(two_sparks) for a pair, V(spark_cluster) for three or four).
    With O(topology=single_spark) the member is the one host
    of the play, and the deployment id its C(specdec_deployment_id), else its name.
  - Reads each member's settings as M(sparkops.specdec.specdec_settings) resolved them on that member (registered as
    C(specdec_settings) on every member before this task), so every precedence level counts (role defaults, inventory,
    group and host vars, play C(vars:), role, include and task vars, extra vars); it reads no other variable of a host
    but C(ansible_host), C(ansible_user) and the engine image's facts. A member without them is one line.
  - Checks every setting of each member against the
    collection's roles (C(meta/argument_specs.yml)) for unknown or misspelt names under every prefix, near-miss prefixes,
    removed names (with the one that replaces them), types, choices, bounds, model ids, paths, IPv4 subnets. Then checks
    the deployment as a whole (one value per setting on every member, method vs draft model vs topology, tensor
    parallel size vs node count, settings given twice, fabric addresses unique and off the management network).
  - Every problem is one line naming the setting, the problem and the fix (a value of the wrong type also gets an
    example); the task fails listing them, and nothing is changed on any host. The plan is built from valid values
    only, converted to their spec's type (C(on) or C('1') for a bool is true, C('8355') for an int is 8355).
  - Builds the plan (see RV(plan)), that is the C(extra-llm-api-config.yml) content with the key spelling of the image's
    TensorRT-LLM version, the C(trtllm-serve) argv, the rank environment, the models and revisions, the draft
    location, the port and the endpoint.
  - With C(specdec_engine=llamacpp) (one Spark only), the plan is llama.cpp's C(llama-server) argv instead, with the
    target and draft GGUF files (C(specdec_server_target_file), C(specdec_server_draft_file)) read from the Hugging Face
    cache snapshot of the downloaded commits, C(--spec-type draft-simple) with C(--spec-draft-n-max) for method
    C(draft_target), C(--metrics), C(--alias) the target id; no C(extra-llm-api-config.yml) (RV(plan.config_text) is
    empty) and no TensorRT-LLM version.
  - Given O(commits), the launch spec pins the exact downloaded revision (C(--revision <commit>)) and gets a
    fingerprint; given O(server_running) too, it decides what to do with the server (RV(decision)) and fails, changing
    nothing, when a running server would need a restart without O(allow_restart).
author:
  - sparkops maintainers (@sparkops)
options:
  topology:
    description:
      - V(two_sparks) (TP=2 across a cabled pair), V(spark_cluster) (two to four Sparks in a ring or through a switch,
        issue 24) or V(single_spark). Default V(two_sparks) when the play has more than one host, else V(single_spark).
    type: str
    choices: [two_sparks, single_spark, spark_cluster]
  image:
    description:
      - Facts of the engine image as the C(trtllm_container) role publishes them (C(trtllm_container_image_info)), that is
        C(id), C(env) (C(NAME=value) list), C(labels), C(package_version).
      - The TensorRT-LLM version, hence the key spelling, comes from C(trtllm_container_trtllm_version) if set, else
        the image's C(TRT_LLM_VERSION) environment (set by the release stage of TensorRT-LLM's C(docker/Dockerfile.multi)),
        its C(org.opencontainers.image.version) label, the C(tensorrt_llm) package metadata, or the image tag.
    type: dict
  mounts:
    description:
      - The host paths the C(trtllm_container) role publishes (C(trtllm_container_mounts)) as this host has them, that is
        C(user) (the deploy user), C(home), C(hf_cache) and C(state_dir) (paths on the node); the C(specdec_server) role
        passes the variable, or V({}) when it is not set.
      - Given, a missing value, or one without every key as a non-empty string, is one line of the plan's errors naming
        what is missing and the fix (run the C(trtllm_container) role first, or set the variable); not given, nothing
        is checked (the inventory preflight runs before that role).
    type: dict
  commits:
    description: Hugging Face repo id -> commit that the download resolved; the launch spec pins these.
    type: dict
  state:
    description: The deployment state file as read from the head (empty when there is none).
    type: dict
  server_running:
    description: Whether the server process runs on the head.
    type: bool
  allow_restart:
    description: Consent to restart a server that runs with another launch spec.
    type: bool
    default: false
  defer_restart:
    description:
      - A server that runs with another launch spec keeps running as it is (RV(decision) C(deferred), with a warning),
        instead of a restart or a refusal; RV(state_after) is then RV(state_before). Outranks O(allow_restart).
      - C(specdec_server_defer_restart); the benchmark sets it before its first point visit, which restarts the server
        anyway.
    type: bool
    default: false
    version_added: 0.3.0
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.action
attributes:
  check_mode:
    support: full
    details: Reads the inventory only, the same in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is nothing to show.
  idempotent:
    support: full
    details: Plans only.
notes:
  - Errors a user can meet (each one line, the task fails and nothing changes) include an unknown setting with a
    close match, a misspelt prefix (e.g. C(specdec_sever_port)), a removed name (e.g. C(trtllm_container_name) ->
    C(specdec_container_name)), a value of the wrong type or out of range (draft length 1-32, ports 1-65535, fractions in
    (0, 1], timeouts >= 1), a malformed model id, a subnet with host bits set or overlapping the other link or the
    management address, C(specdec_server_tp_size) not matching the node count, Draft-Target with an EAGLE-3 head, a key
    set both in C(specdec_server_llm_api_options) and by its dedicated variable, a flag of C(specdec_server_extra_args)
    that the plan sets itself, a setting that differs between the two nodes, an image whose TensorRT-LLM version
    cannot be told, a setting of the other engine (e.g. C(specdec_server_llm_api_options) with engine llamacpp), method
    eagle3 or two Sparks with engine llamacpp, a missing GGUF file name, and a running server with another launch spec without C(specdec_server_allow_restart).
  - "Errors of the inventory's deployments (two_sparks; each one line): the play holds several deployments
    (C(inventory: the play holds N deployments ...; --limit to one)); C(--limit) takes half a pair
    (C(--limit: spark-1 is in the play but spark-2 of deployment pair-a is not ...)); the play's deployment is one Spark
    (use C(playbooks/single_spark.yml)); a deployment without a head (C(specdec_head_host: deployment X (a, b): name its
    head with specdec_head_host)); C(specdec_head_host) not a member of its deployment, or set to different hosts within
    it; more than two members (TP>2 is not supported); a host that two groups put in different deployments; and one
    C(specdec_deployment_id) naming two deployments. In today's layout the message for a missing worker or head stays
    C(inventory: two_sparks.yml needs one host in group spark_head and one in spark_workers ...)."
seealso:
  - name: TensorRT-LLM speculative decoding
    description: The decoding_type and speculative_model keys per release (NVIDIA/TensorRT-LLM#10099, #10124).
    link: https://nvidia.github.io/TensorRT-LLM/
"""

EXAMPLES = r"""
- name: Resolve the settings of every node of the play (before the plan)
  sparkops.specdec.specdec_settings:
  no_log: true
  register: specdec_settings

- name: Check the inventory of a two-Spark deployment (no host is contacted)
  sparkops.specdec.specdec_plan:
    topology: two_sparks
  run_once: true

- name: Plan the launch from the downloaded revisions and decide about the server
  sparkops.specdec.specdec_plan:
    image: "{{ trtllm_container_image_info }}"
    commits: {nvidia/Qwen3-235B-A22B-FP4: 0123abcd..., nvidia/Qwen3-235B-A22B-Eagle3: 4567ef01...}
    state: "{{ state_from_the_head }}"
    server_running: true
    allow_restart: false
  register: launch
"""

RETURN = r"""
errors:
  description: One line per problem (empty when the deployment is valid).
  returned: always
  type: list
  elements: str
deployment:
  description:
    - The deployment the inventory maps to.
    - When the inventory names no single pair for the play (an inventory error), only C(id), C(topology), C(members) and
      C(head) are returned.
  returned: always
  type: dict
  contains:
    id: {description: 'Deployment id (C(specdec_deployment_id), else the head''s name).', type: str}
    topology: {description: 'two_sparks (a pair), spark_cluster (three or four Sparks) or single_spark.', type: str}
    members: {description: 'Inventory names of the nodes, head first.', type: list, elements: str}
    head: {description: 'The node that launches and serves (null when the inventory names none).', type: str}
    engine: {description: Serving engine (trtllm or llamacpp)., type: str}
    image: {description: Engine image reference., type: str}
plan:
  description: The plan of the deployment.
  returned: when there are no errors
  type: dict
  contains:
    preset: {description: Resolved preset name., type: str}
    method: {description: 'eagle3, draft_target or none.', type: str}
    target_model: {description: Hugging Face id of the target., type: str}
    draft_model: {description: Hugging Face id of the draft (null without speculation)., type: str}
    max_draft_len: {description: 'Draft tokens per step (tokens), null without speculation.', type: int}
    tp_size: {description: Tensor parallel size (= number of nodes)., type: int}
    port: {description: TCP port of the server., type: int}
    endpoint: {description: 'OpenAI-compatible base URL, e.g. http://192.168.250.11:8355/v1.', type: str}
    host:
      description: The address the server binds (C(specdec_server_host); the words C(loopback) and C(management) resolved to
        127.0.0.1 and the head's C(ansible_host), which must then be an IP address).
      type: str
    host_word: {description: 'C(loopback) or C(management) when specdec_server_host was one of them, else null.', type: str}
    local_url:
      description: 'http://ADDRESS:PORT at which the head itself reaches the server (the address bound; the loopback for
        0.0.0.0, :: and localhost): the health wait, the smoke test and the benchmark use it.'
      type: str
    exposure:
      description: Who can reach the endpoint by its bind address, C(loopback), C(address) (one address of the node),
        C(open) (every network, with an API key) or C(open_unauthenticated) (every network, no key).
      type: str
    api_key:
      description: Engine llamacpp with C(specdec_api_key) set, C(file) (the 0600 key file C(llama-server) reads
        with C(--api-key-file)) and C(fingerprint) (PBKDF2-SHA256 of the key salted with the deployment id, also in the
        launch spec as C(api_key), so a changed key is a changed launch spec); null without a key. Never the key.
      type: dict
    models:
      description: Models to download, with C(role) (target/draft), C(repo), C(revision) and C(local_dir) (the draft's
        directory relative to the HF cache; null for the cache layout); engine llamacpp adds C(allow_patterns) (the one
        GGUF file to download).
      type: list
      elements: dict
    draft_dir: {description: 'Draft directory inside the container (trtllm; null for llamacpp).', type: str}
    model_files:
      description: 'Engine llamacpp: C(target) (and C(draft)) -> the GGUF path inside the container, in the snapshot of the
        downloaded commit; null for trtllm.'
      type: dict
    trtllm_version: {description: 'TensorRT-LLM version of the image (null before the image is known, and for llamacpp).', type: str}
    version_source: {description: Where the version came from., type: str}
    spelling:
      description: Key spelling used, C(name) (legacy/current), C(eagle3), C(draft_target) (decoding_type values) and
        C(draft_key) (speculative_model_dir or speculative_model).
      type: dict
    llm_api_options: {description: The content of extra-llm-api-config.yml., type: dict}
    config_file: {description: 'Path of extra-llm-api-config.yml on every node (null for llamacpp, which reads none).', type: str}
    config_text: {description: 'The rendered extra-llm-api-config.yml (empty for llamacpp).', type: str}
    config_sha256: {description: sha256 of config_text., type: str}
    argv:
      description: trtllm-serve command line (with --revision <commit> once commits are known), or llama-server's.
      type: list
      elements: str
    rank_env: {description: Environment of every rank (no secrets)., type: dict}
    launch:
      description: The launch spec (argv, env, config_sha256, image_id, models -> commits, port, members, and
        api_key, the key's fingerprint, when a key is set); null before the downloads.
      type: dict
    fingerprint: {description: sha256 of the canonical JSON of the launch spec., type: str}
    peer_copy:
      description:
        - 'Fetch once per pair: C(models) (C(specdec_server_peer_copy)) and C(image) (C(trtllm_container_image_peer_copy)),
          each with C(setting), C(value) (C(auto), C(true) or C(false)), C(use) (true: the head fetches once and its peer
          copies over the SSH mesh; false: every node fetches by itself; null: C(ssh_mesh_user) is set and the inventory
          does not name the deploy user, so each node decides once it knows it), C(reason) (one line) and
          C(mesh_user_differs) (C(auto) fell back because C(ssh_mesh_user) is not the deploy user; the plan then also
          warns).'
        - The copy runs C(ssh) as the deploy user (the user Ansible connects as, C(ansible_user)), so it needs that user's
          mesh key. C(true) with another C(ssh_mesh_user) is an error of the plan, before any change.
      type: dict
decision:
  description: What to do with the server, C(action) (none, start, restart, refuse, deferred) and C(reason).
  returned: when O(server_running) and O(commits) are given
  type: dict
state_before:
  description: The deployment state file as read from the head before this run (empty when there was none); a failed
    restart returns to its C(running) server.
  returned: when RV(decision) is returned
  type: dict
state_after:
  description: The deployment state file content (schema_version 1) to write once the planned server serves
    (RV(state_before) when RV(decision) is C(deferred)).
  returned: when RV(decision) is returned
  type: dict
"""
