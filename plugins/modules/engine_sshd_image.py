#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_sshd_image
short_description: Which image with sshd the multi-node engine container runs, and whether it must be built first
version_added: 0.3.0
description:
  - An action plugin, used by the C(trtllm_container) role. A multi-node container runs an image with
    C(/usr/sbin/sshd) (C(mpirun) reaches the other ranks over it); nothing is installed when the container starts.
  - Reads the image and its derived (or named) image on the node with M(community.docker.docker_image_info) (one run
    for both; one run each only when the answer cannot be told apart), then
    decides, in this order - a single-node container, or an image not on the node yet (check mode), runs O(image) as
    is; the derived image when it is on the node and current (our labels with O(image)'s id), or the image named by
    O(sshd_image) when it has sshd; O(image) itself when it has sshd; else the derived image, to be built (RV(build))
    when O(sshd_build).
  - Whether an image has sshd is asked of a throw-away container of that image without network
    (M(community.docker.docker_container), removed at once), only when the decision needs it (at most two), and only
    once per image id - the answer is kept in O(probe_cache) on the controller (an image's files are fixed by its id),
    so a warm run starts no probe container.
  - Changes nothing; the build itself is the role's next task (M(community.docker.docker_image) with RV(dockerfile)).
author:
  - sparkops maintainers (@sparkops)
options:
  image:
    description: The engine image (C(trtllm_container_image)).
    type: str
    required: true
  multinode:
    description: Whether the container is one rank of a multi-node server (C(trtllm_container_multinode)).
    type: bool
    default: true
  sshd_image:
    description: An image with sshd to run instead (C(trtllm_container_sshd_image)); empty - the derived image,
      O(image)'s tag with C(-sparkops-sshd) appended.
    type: str
    default: ''
  sshd_build:
    description: Whether the derived image may be built on the node (C(trtllm_container_sshd_build); apt needs the
      network once).
    type: bool
    default: false
  probe_name:
    description: Name of the throw-away probe container.
    type: str
    default: sparkops-sshd-probe
  probe_cache:
    description:
      - Controller file (JSON) that keeps each probe's answer by image id and probe command; an image id found there
        is not probed again. Written only after a probe that answered (exit status 0 or 3), never with an error; a file
        that cannot be read or written is ignored (the probe runs). Empty - no cache, every run probes.
      - The C(trtllm_container) role passes C(sshd-probes.json) in the controller cache directory
        (C(specdec_server_controller_cache_dir), default C(~/.cache/sparkops-specdec)).
    type: path
    default: ''
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
  - sparkops.specdec.attributes.action
attributes:
  check_mode:
    support: full
    details: Reads and probes as in a normal run (the probe container is gone afterwards); it changes nothing in either mode.
  diff_mode:
    support: none
    details: It changes nothing, so it has nothing to show.
  idempotent:
    support: full
    details: Changes nothing.
  action:
    details: Runs on the controller and executes the modules on the node.
notes:
  - "Errors a user can meet (one line each, nothing changed): O(image) has no sshd and O(sshd_build) is false; the
    image named by O(sshd_image) has no sshd, or is not on the node while O(image) has no sshd and O(sshd_build) is
    false; C(docker image inspect) failed on the node (Docker not running, or no permission)."
seealso:
  - module: sparkops.specdec.engine_container
  - module: community.docker.docker_image_info
"""

EXAMPLES = r"""
- name: Choose the image with sshd of a multi-node container
  sparkops.specdec.engine_sshd_image:
    image: nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12
    sshd_build: true
    probe_name: trtllm-multinode-sshd-probe
  register: sshd

- name: Build it when it is not there
  community.docker.docker_image:
    name: "{{ sshd.image }}"
    source: build
    build: {path: /var/lib/sparkops-specdec/sshd-image}
  when: sshd.build
"""

RETURN = r"""
image:
  description: The image the container runs.
  returned: always
  type: str
build:
  description: Whether RV(image) must be built first, from RV(dockerfile).
  returned: always
  type: bool
dockerfile:
  description: The derived image's Dockerfile (O(image) plus openssh-server, labelled with the base id); empty unless
    RV(build).
  returned: always
  type: str
reason:
  description: Why this image, in words.
  returned: always
  type: str
probes:
  description: Each image probed for sshd, and the answer.
  returned: always
  type: dict
  sample: {"nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12": true}
probes_cached:
  description: The images of RV(probes) whose answer came from O(probe_cache) (no probe container started).
  returned: always
  type: list
  elements: str
probe:
  description: Always empty after the action (an image still to probe is probed by it).
  returned: always
  type: str
probe_command:
  description: The argv the probe ran in the throw-away container.
  returned: always
  type: list
  elements: str
"""
