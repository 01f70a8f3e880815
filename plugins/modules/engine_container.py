#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_container
short_description: Run the long-lived TensorRT-LLM container of a node, recreating a running one only with consent
version_added: 0.2.0
description:
  - An action plugin, used by the C(trtllm_container) role. It runs M(community.docker.docker_container) with O(spec)
    on the node, first in check mode (with its differences). When that would recreate or update a running container,
    it fails naming what differs and changes nothing, unless O(allow_recreate).
  - Before it creates, recreates or starts the container (not in check mode, where the tasks that create the sources
    did not run), it checks O(mount_stats). Every bind-mount source of O(spec) must exist on the node as the type the
    mount needs (a file for the container sshd host key, a directory for the others). Otherwise Docker would create
    an empty directory there silently. It fails with one line per mount naming it, the problem and the fix, and
    changes nothing.
  - Then, except in check mode, it applies the spec and waits until the container's sshd listens on O(sshd_port) at
    the first of its fabric addresses (C(SSHD_LISTEN_ADDRESSES) of the spec's environment). The container sees the
    current container mesh files through a read-only mount, so a kept container needs no refresh.
  - Publishes C(trtllm_container_image_info) from O(image), with the C(tensorrt_llm) package version read in the
    container when the image names no TensorRT-LLM version (no C(TRT_LLM_VERSION), no
    C(org.opencontainers.image.version) label), O(trtllm_version) is empty and O(engine=trtllm).
  - The modules it runs get the task's C(module_defaults) (for example C(docker_host) for the C(community.docker) group).
  - With O(previous_record) (and O(previous=keep)), a consented recreation of a running container keeps it until the
    new container's server serves. It writes a JSON record of the running container (id, image, image id and its
    other settings) to O(previous_record), stops it and renames it to C(<name>-previous), then creates the new one.
    Docker keeps the old container's settings and image (an image cannot be removed while a container uses it). A
    further recreation while the record exists replaces the new, unproven container and keeps the recorded one.
  - "A change left pending by an interrupted run (a record exists) is taken up. First the record must match the node:
    the container named C(<name>-previous) must be the recorded one (same id). Otherwise it fails with one line
    naming the record and the fix, and changes nothing (also in check mode). A request for the new container again
    changes no container; the C(specdec_server) role's server start then finishes the change (release or restore). A
    request that the kept container already has (the previous image: the user backs out; docker_container's check mode
    on the kept container shows no difference) restores it, with O(allow_recreate) when the new container runs: the
    new container is removed, the kept one renamed back (the same container, not a new one) and started, the record
    removed (C(previous_action.action=restore)). Any other request replaces the new container and keeps the recorded
    one."
  - O(previous=restore) gives the node the recorded container back. It removes the new container, renames the kept
    one back, starts it and waits for its sshd, then removes the record. O(previous=release) removes the kept container
    and the record once the new server serves. Both change nothing without a record. The C(specdec_server) role runs
    them.
author:
  - sparkops maintainers (@sparkops)
options:
  spec:
    description:
      - Parameters of M(community.docker.docker_container), as the filter C(sparkops.specdec.trtllm_container_spec)
        makes them from the role's settings; C(name), C(image) and C(command) (the entrypoint argv) are required.
      - Required with O(previous=keep); not used by O(previous=restore) or O(previous=release).
    type: dict
    default: {}
  allow_recreate:
    description: Consent to recreate (or update) a running container whose settings differ; that stops any server in it.
    type: bool
    default: false
  image:
    description: The image as C(docker image inspect) shows it (the C(image) result of M(community.docker.docker_image)).
    type: dict
    default: {}
  trtllm_version:
    description: The TensorRT-LLM version set by the inventory; when set, the package version is not read.
    type: str
    default: ""
  reference:
    description:
      - The image reference the role was given (C(trtllm_container_image)), for example pinned by digest
        (C(repo@sha256:<64 hex>)); its digest is published as C(image_info.digest). Empty publishes no digest.
    type: str
    default: ""
  engine:
    description:
      - The serving engine the container runs (C(specdec_engine)). With V(llamacpp) the C(tensorrt_llm) package
        version is never read (a llama.cpp image has none). With V(vllm) the C(vllm) package version is read in the
        container instead, into C(image_info.package_version) (the plan checks the method against it).
    type: str
    choices: [trtllm, llamacpp, vllm]
    default: trtllm
  sshd_port:
    description: Port of the container's sshd (multi-node); V(0) for a container without sshd (no wait, no refresh).
    type: int
    default: 0
  start_timeout:
    description: Seconds to wait for the container's sshd.
    type: int
    default: 300
  mount_stats:
    description:
      - The C(mount_stats) of M(sparkops.specdec.engine_mounts) (as root) over the filter
        C(sparkops.specdec.trtllm_container_mounts) of the same settings as O(spec), or the registered loop results of
        M(ansible.builtin.stat) (with C(follow=true), as root) over them; each result's C(item) is the mount
        (C(source), C(target), C(type) V(file) or V(directory), C(what), C(fix)).
      - Every bind mount of O(spec) needs a result. Empty skips the check.
    type: list
    elements: dict
    default: []
  previous_record:
    description:
      - Path on the node of the JSON record of a kept container (the C(trtllm_container) role uses
        C(<specdec_state_dir>/container-previous.json)). Empty keeps nothing (a recreation removes the old container).
    type: str
    default: ""
  stop_command:
    description:
      - Argv run in the running container (M(community.docker.docker_container_exec)) before a consented recreation
        keeps it, for example the server's stop, which also withdraws the supervisor's consent to start it again, so
        that nothing starts the old server in the new container. A non-zero exit stops the run before the container
        changes. Empty runs nothing.
    type: list
    elements: str
    default: []
  previous:
    description:
      - V(keep) applies O(spec) and keeps a running container that a consented recreation replaces.
      - V(restore) gives the node the container of O(previous_record) back (new container removed, kept one renamed
        back and started, its sshd awaited), then removes the record.
      - V(release) removes the kept container and the record.
    type: str
    choices: [keep, restore, release]
    default: keep
  files:
    description:
      - The container's files on the node (its entrypoint, the OpenMPI hostfile, the supervisor), each C(path), C(content)
        and C(mode), written with M(sparkops.specdec.engine_mounts) in one call as the user the task runs as, after the
        decision (a refused recreation or a bad mount source leaves the running container's files as they were) and
        before the container is created, recreated or started. Empty writes nothing.
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
  - sparkops.specdec.attributes.action
attributes:
  check_mode:
    support: full
    details: Reports what docker_container would do (and refuses the same way) and which of O(files) would be
      written; no wait, no refresh.
  diff_mode:
    support: full
    details: Shows the container's differences, as docker_container does, and each of O(files) it writes.
  idempotent:
    support: full
    details: A second run with the same spec leaves the container as it is (docker_container compares it).
  action:
    details: Runs on the controller and executes the modules on the node.
seealso:
  - module: community.docker.docker_container
"""

EXAMPLES = r"""
- name: Create the container's directories and look at its bind-mount sources (as root; Docker would make a missing one a directory)
  sparkops.specdec.engine_mounts:
    directories: [/var/lib/sparkops-specdec]
    owner: spark
    mounts: "{{ settings | sparkops.specdec.trtllm_container_mounts }}"
  become: true
  register: host

- name: Run the long-lived TensorRT-LLM container
  sparkops.specdec.engine_container:
    spec: "{{ settings | sparkops.specdec.trtllm_container_spec }}"
    allow_recreate: "{{ trtllm_container_allow_recreate }}"
    image: "{{ pulled.image }}"
    sshd_port: 2233
    mount_stats: "{{ host.mount_stats }}"
"""

RETURN = r"""
previous:
  description:
    - The record of the kept container (C(schema_version), C(name), C(kept_name), C(kept_at), C(container) with C(id),
      C(created) and C(settings), C(change) with C(image), C(reference) and C(differences), C(sshd)) and its C(path);
      empty when no change is pending. Also set as the fact C(trtllm_container_previous) (empty after a restore or a
      release).
  returned: success
  type: dict
previous_action:
  description: 'What the apply did about the running container: C(action) (none, create, keep, restore, replace) and C(reason).'
  returned: with O(previous_record) and O(previous=keep)
  type: dict
previous_restored:
  description:
    - Whether the kept container runs again under its own name, after a backed-out pending change
      (C(previous_action.action=restore)) or after a failed create of the new container.
  returned: when a restore ran with O(previous=keep)
  type: bool
restored:
  description: Whether the recorded container runs again (O(previous=restore)).
  returned: with O(previous=restore) or O(previous=release)
  type: bool
same_settings:
  description: Whether the restored container shows the recorded settings (image id, environment, mounts, labels, ...).
  returned: after a restore
  type: bool
summary:
  description: 'One sentence naming the node, the container and the previous image it runs again; empty otherwise.'
  returned: with O(previous=restore) or O(previous=release)
  type: str
steps:
  description: 'The Docker steps taken, for example C([["remove", "trtllm-multinode"], ["rename", "trtllm-multinode-previous", "trtllm-multinode"]]).'
  returned: after a restore or a release
  type: list
  elements: list
container:
  description:
    - The container as C(docker inspect) shows it (in check mode, as it is now; empty when there is none).
    - After O(previous=restore), the restored container.
  returned: success
  type: dict
actions:
  description: What docker_container would do (check mode only).
  returned: in check mode
  type: list
  elements: dict
files:
  description: Each of O(files) (its C(path)) and whether it was (in check mode, would be) written (C(changed)).
  returned: with O(previous=keep)
  type: list
  elements: dict
container_changed:
  description: Whether the container itself was (in check mode, would be) created, recreated or started (C(changed)
    is also true when only one of O(files) was written).
  returned: with O(previous=keep)
  type: bool
mount_problems:
  description: One line per bind mount whose source is missing or of the wrong type (the message joins them).
  returned: when a bind-mount source stops the run
  type: list
  elements: str
differences:
  description: Names of the settings that differ from the running container.
  returned: when the recreation is refused
  type: list
  elements: str
image_info:
  description: The image facts, also set as the fact C(trtllm_container_image_info).
  returned: with O(previous=keep)
  type: dict
  contains:
    name: {description: The image reference., type: str}
    id: {description: 'The image id (empty when the image is not there, for example in check mode).', type: str}
    env: {description: The image's C(TRT_LLM_*) environment (C(NAME=value))., type: list, elements: str}
    labels: {description: The image's labels., type: dict}
    package_version: {description: 'The C(tensorrt_llm) (engine vllm: C(vllm)) package version read in the container, else
        empty.', type: str}
    package_version_error:
      description: Why the package version could not be read (the last line of the C(docker exec)'s error, at most 300
        characters), only when the read was tried and failed; a container that is not running yet is tried 5 times, 2 s
        apart, first.
      type: str
      returned: when the version read failed
      version_added: 0.3.0
    digest: {description: 'The digest O(reference) is pinned by (C(sha256:<64 hex>)), else empty.', type: str}
    repo_digests:
      description: The image's C(RepoDigests) (C(repo@sha256:...)); empty for an image built or loaded on the node.
      type: list
      elements: str
    container_image_id:
      description:
        - The id (C(sha256:...)) of the image the container runs, else empty (no container, check mode on a new node).
        - A multi-node container runs the derived image with sshd, whose id differs from C(id).
      type: str
    spec_types:
      description:
        - Engine llamacpp only (absent otherwise, or when C(llama-server --help) could not run) - the C(--spec-type)
          values the image's C(llama-server --help) lists; the plan renders C(draft-eagle3) and C(draft-mtp) only when
          listed.
      type: list
      elements: str
"""
