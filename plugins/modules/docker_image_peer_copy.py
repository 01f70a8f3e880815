#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: docker_image_peer_copy
short_description: Copy a Docker image from a peer node over SSH, verified by its image id
version_added: 0.2.0
description:
  - Runs on the node that receives (the worker of a pair), after the sender (the head) pulled or loaded O(name).
  - When this node already holds an image under O(name), nothing happens (C(changed) V(false)); it is never replaced,
    as C(community.docker.docker_image) never pulls a present tag again. RV(differs) says whether it is another image
    than O(image_id) (the C(trtllm_container) role's same-image check then refuses the deployment, naming both ids).
  - Otherwise C(ssh [O(ssh_options)] -o ConnectTimeout=O(connect_timeout) O(source_address) docker save -- O(name)) is
    streamed into this node's C(docker load) (the SSH client and Docker CLI already on the node; nothing is installed).
    Docker checks every layer against the image's configuration while it loads; the id of the image O(name) then
    names must be O(image_id).
  - A damaged stream (C(docker load) fails, or the loaded image has another id) fails with one line naming the image,
    and the wrongly loaded image is untagged, so a wrong image is never left under the name.
author:
  - sparkops maintainers (@sparkops)
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
  - sparkops.specdec.peer_copy
attributes:
  check_mode:
    support: full
    details: Compares the local image id with O(image_id) and reports whether it would copy; connects to nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Copies only when the local image id differs from O(image_id).
options:
  name:
    description: The image reference on both nodes (e.g. V(nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12)).
    type: str
    required: true
  image_id:
    description: The sender's image id (V(sha256:<64 hex>), C(Id) of its C(docker image inspect)).
    type: str
    required: true
notes:
  - The user running the module must be able to run C(docker) on both nodes (the C(docker_group) role).
  - "C(error_kind) of a failure: C(mismatch) (docker load failed, or another id), C(transport) (ssh or docker save
    failed: its last line is in the message), C(invalid_option)."
"""

EXAMPLES = r"""
- name: Copy the engine image from the head to the worker over the fabric
  sparkops.specdec.docker_image_peer_copy:
    name: nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc12
    image_id: "{{ hostvars['spark-1'].trtllm_container_image_info.id }}"
    source_address: 192.168.100.10
    source_name: spark-1
  when: inventory_hostname == 'spark-2'
"""

RETURN = r"""
copied:
  description: Whether the image was streamed from the sender (in check mode, would be).
  returned: success
  type: bool
  sample: true
differs:
  description: Whether this node already held another image than O(image_id) under O(name) (left as it was).
  returned: success
  type: bool
  sample: false
image:
  description: C(docker image inspect) of O(name) after the run (as C(community.docker.docker_image) returns it); V({}) in check mode before a copy.
  returned: success
  type: dict
  sample: {Id: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
previous_id:
  description: Id of the image O(name) named before the run (V(null) when none).
  returned: success
  type: str
  sample: null
bytes_copied:
  description: Bytes of the C(docker save) stream received.
  returned: success
  type: int
  sample: 21474836480
stream_sha256:
  description: sha256 of the stream received (V(null) when nothing was copied).
  returned: success
  type: str
  sample: 9d1e3f2c6f0e1b3d0a9c8b7a6f5e4d3c2b1a09f8e7d69d1e3f2c6f0e1b3d0a9c
source:
  description: The sender's name.
  returned: success
  type: str
  sample: spark-1
error_kind:
  description: Class of the failure (see the notes).
  returned: failure
  type: str
  sample: mismatch
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _peer_copy


def main():
    module = AnsibleModule(
        argument_spec=_peer_copy.argument_spec(
            _peer_copy.SSH_SOURCE_SPEC,
            name=dict(type='str', required=True),
            image_id=dict(type='str', required=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    address, problem = _peer_copy.ssh_source(p)
    if problem:
        module.fail_json(msg=problem, error_kind='invalid_option')
    docker = _peer_copy.DockerCli(module.get_bin_path('docker', required=True))
    transport = _peer_copy.SshImageTransport(address, p['ssh_options'], p['connect_timeout'])
    try:
        result = _peer_copy.copy_image(p['name'], (p['image_id'] or '').strip(), docker, transport,
                                       p['source_name'] or address, module.check_mode)
    except _peer_copy.PeerCopyError as e:
        module.fail_json(msg=e.msg, error_kind=e.kind)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
