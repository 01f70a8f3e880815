# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The options the fetch-once-per-pair modules share (their argument specs: module_utils/_peer_copy.py).

- ``sparkops.specdec.peer_copy`` (DOCUMENTATION): where the copy streams from, over SSH
  (``hf_peer_copy``, ``docker_image_peer_copy``).
- ``sparkops.specdec.peer_copy.hf_snapshot`` (HF_SNAPSHOT): which downloaded Hugging Face snapshot, where, and which
  of its files (``hf_peer_manifest``, ``hf_peer_copy``).
"""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  source_address:
    description: Address of the sender that this node's SSH client reaches (in a pair, the head's fabric address).
    type: str
    required: true
  source_name:
    description: Name of the sender in messages (e.g. its inventory name). Default O(source_address).
    type: str
  ssh_options:
    description: Options of the C(ssh) client, before the address.
    type: list
    elements: str
    default: ['-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=yes']
  connect_timeout:
    description: SSH connection timeout, in seconds (at least 1).
    type: int
    default: 10
notes:
  - The copy runs C(ssh) as the user the module runs as, with that user's keys and pinned host keys (the C(ssh_mesh)
    role sets them up for C(ssh_mesh_user), empty meaning the deploy user; the roles copy only over that mesh).
"""

    HF_SNAPSHOT = r"""
options:
  repo_id:
    description: Repository id on the Hub, V(<namespace>/<name>).
    type: str
    required: true
  repo_type:
    description: Type of the repository.
    type: str
    choices: [model, dataset]
    default: model
  cache_dir:
    description:
      - The C(huggingface_hub) cache directory of the model on this node (as for M(sparkops.specdec.hf_download)).
      - Exactly one of O(cache_dir) and O(local_dir) is required.
    type: path
  local_dir:
    description: The plain directory of the model on this node (as for M(sparkops.specdec.hf_download)).
    type: path
  allow_patterns:
    description: Only files matching one of these glob patterns (as for M(sparkops.specdec.hf_download)); the same on
      the sender and the receiver.
    type: list
    elements: str
  ignore_patterns:
    description: Files matching one of these glob patterns are left out (as for M(sparkops.specdec.hf_download)); the
      same on the sender and the receiver.
    type: list
    elements: str
"""
