#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hf_peer_manifest
short_description: List a downloaded Hugging Face snapshot with sizes and sha256, for a peer to copy and verify
version_added: 0.2.0
description:
  - Read-only, on the node that downloaded the model (the head of a pair). Reads the file listing that
    M(sparkops.specdec.hf_download) recorded for O(commit), selects the files as O(allow_patterns) /
    O(ignore_patterns) do, and returns, per file, its size, its Hub etag, the path to send and a sha256.
  - The sha256 is the Hub's recorded one where the Hub has it (LFS files, whose etag is the sha256 of the
    content), else the sha256 of the file on this node (small non-LFS files such as C(config.json)).
  - The result is the manifest M(sparkops.specdec.hf_peer_copy) takes on the peer.
  - Nothing changes on the node; C(changed) is always V(false).
author:
  - sparkops maintainers (@sparkops)
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
  - sparkops.specdec.peer_copy.hf_snapshot
attributes:
  check_mode:
    support: full
    details: Reads only; the same result as a real run.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Reads only.
options:
  commit:
    description: Full 40-character commit SHA that M(sparkops.specdec.hf_download) resolved on this node (its C(commit) result).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: List the target model the head downloaded
  sparkops.specdec.hf_peer_manifest:
    repo_id: nvidia/Qwen3-235B-A22B-FP4
    commit: "{{ target_download.commit }}"
    cache_dir: /home/spark/.cache/huggingface/hub
  register: target_manifest
"""

RETURN = r"""
repo_id:
  description: The repository.
  returned: success
  type: str
  sample: nvidia/Qwen3-235B-A22B-FP4
commit:
  description: The commit listed.
  returned: success
  type: str
  sample: 0123456789abcdef0123456789abcdef01234567
complete:
  description: Whether this node holds every selected file complete (size as listed).
  returned: success
  type: bool
  sample: true
missing:
  description: Repository paths of the selected files this node does not hold complete.
  returned: success
  type: list
  elements: str
  sample: []
files:
  description:
    - One entry per selected file, sorted by path. C(path) (in the repository), C(size) (bytes), C(etag) (the Hub's),
      C(sha256) (hex; V(null) for a missing file), C(sha256_source) (V(hub) the Hub's record, V(sender) computed on
      this node), C(source) (absolute path of the content on this node, the cache blob or the local_dir file).
  returned: success
  type: list
  elements: dict
  sample:
    - path: config.json
      size: 712
      etag: 3f2c6f0e1b3d0a9c8b7a6f5e4d3c2b1a09f8e7d6
      sha256: 9d1e3f2c6f0e1b3d0a9c8b7a6f5e4d3c2b1a09f8e7d69d1e3f2c6f0e1b3d0a9c
      sha256_source: sender
      source: /home/spark/.cache/huggingface/hub/models--org--name/blobs/3f2c6f0e1b3d0a9c8b7a6f5e4d3c2b1a09f8e7d6
listing:
  description: The whole file listing of the commit (path to C(size) in bytes and C(etag)), as recorded by hf_download.
  returned: success
  type: dict
  sample: {config.json: {size: 712, etag: 3f2c6f0e1b3d0a9c8b7a6f5e4d3c2b1a09f8e7d6}}
bytes_total:
  description: Size in bytes of the selected files.
  returned: success
  type: int
  sample: 65249924096
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _hf, _peer_copy


def main():
    module = AnsibleModule(
        argument_spec=_peer_copy.argument_spec(
            _peer_copy.HF_SNAPSHOT_SPEC,
            commit=dict(type='str', required=True),
        ),
        **_peer_copy.HF_SNAPSHOT_RULES,
        supports_check_mode=True,
    )
    p = module.params
    target = _hf.Target(p['repo_id'], p['repo_type'], cache_dir=p['cache_dir'], local_dir=p['local_dir'])
    try:
        manifest = _peer_copy.sender_manifest(target, p['repo_id'], (p['commit'] or '').strip(),
                                              p['allow_patterns'], p['ignore_patterns'])
    except _peer_copy.PeerCopyError as e:
        module.fail_json(msg=e.msg, error_kind=e.kind)
    except (IOError, OSError) as e:
        module.fail_json(msg='%s: cannot read %s (%s): make the model readable by the user running the module.'
                         % (p['repo_id'], e.filename, e.strerror), error_kind='not_readable')
    module.exit_json(changed=False, **manifest)


if __name__ == '__main__':
    main()
