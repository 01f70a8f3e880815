#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hf_peer_copy
short_description: Copy a downloaded Hugging Face snapshot from a peer node over SSH, verified by size and sha256
version_added: 0.2.0
description:
  - Runs on the node that receives (the worker of a pair). O(manifest) is the registered result of
    M(sparkops.specdec.hf_peer_manifest) on the node that downloaded the model (the head).
  - Every selected file that is not complete here is streamed from O(source_address) with
    C(ssh [O(ssh_options)] -o ConnectTimeout=O(connect_timeout) O(source_address) cat -- <path>) (the SSH client and
    the keys and pinned host keys the C(ssh_mesh) role set up; nothing is installed), into a temporary file beside its
    final place (C(.sparkops-peer-*.part)), hashed while it is written.
  - The file gets its final name only when its size and sha256 equal the manifest's (the Hub's recorded sha256 for
    LFS files, else the sender's). A mismatch removes the temporary file, keeps nothing and fails with one line naming
    the file (C(error_kind) V(mismatch)).
  - Files land in C(huggingface_hub)'s layout (cache blob plus snapshot link, or local_dir file plus its download
    metadata), and the commit's file listing and the ref of O(revision) are recorded as M(sparkops.specdec.hf_download)
    records them, so C(hf_download) with C(offline=true) accepts the copy.
  - Idempotent. A complete file (final name, expected size) is never copied again; a second run changes nothing.
    Temporary files of a killed earlier copy are removed before the file is copied again.
  - The result has M(sparkops.specdec.hf_download)'s keys, so the plan reads the commit from it.
author:
  - sparkops maintainers (@sparkops)
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
  - sparkops.specdec.peer_copy
  - sparkops.specdec.peer_copy.hf_snapshot
attributes:
  check_mode:
    support: full
    details: Reports the files and bytes that would be copied (RV(copied_files), RV(bytes_copied)); connects to nothing, writes
      nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Copies only the files the node lacks or has different.
options:
  revision:
    description: The revision the model was asked for (branch, tag or commit); its ref is recorded as the manifest's commit.
    type: str
    default: main
  manifest:
    description: The registered result of M(sparkops.specdec.hf_peer_manifest) on the sender, for the same repository, or
      the RV(sparkops.specdec.hf_download#module:manifest) result of M(sparkops.specdec.hf_download) there (the same keys).
    type: dict
    required: true
  max_workers:
    description: Number of files copied at the same time.
    type: int
    default: 4
  endpoint:
    description: Hub endpoint recorded in the listing (informational, as M(sparkops.specdec.hf_download) records it).
    type: str
notes:
  - "C(error_kind) of a failure: C(mismatch) (size or sha256 differ), C(transport) (ssh failed: its last line is in
    the message), C(sender_incomplete), C(invalid_manifest), C(not_writable), C(disk_full), C(invalid_option)."
"""

EXAMPLES = r"""
- name: List the model on the head
  sparkops.specdec.hf_peer_manifest:
    repo_id: nvidia/Qwen3-235B-A22B-FP4
    commit: "{{ download.commit }}"
    cache_dir: /home/spark/.cache/huggingface/hub
  register: manifest
  when: inventory_hostname == 'spark-1'

- name: Copy it to the worker over the fabric
  sparkops.specdec.hf_peer_copy:
    repo_id: nvidia/Qwen3-235B-A22B-FP4
    manifest: "{{ hostvars['spark-1'].manifest }}"
    cache_dir: /home/spark/.cache/huggingface/hub
    source_address: 192.168.100.10
    source_name: spark-1
  when: inventory_hostname == 'spark-2'
"""

RETURN = r"""
commit:
  description: The commit copied (the manifest's).
  returned: success
  type: str
  sample: 0123456789abcdef0123456789abcdef01234567
path:
  description: Directory of the files here (the snapshot directory, or O(local_dir)).
  returned: success
  type: str
  sample: /home/spark/.cache/huggingface/hub/models--nvidia--Qwen3-235B-A22B-FP4/snapshots/0123456789abcdef0123456789abcdef01234567
files:
  description: Number of selected files.
  returned: success
  type: int
  sample: 23
fetched_files:
  description: Paths placed by this run (copied, or linked to a blob already here), sorted (as hf_download).
  returned: success
  type: list
  elements: str
  sample: [config.json]
copied_files:
  description: Paths copied from the sender by this run (in check mode, that would be copied).
  returned: success
  type: list
  elements: str
  sample: [config.json]
linked_files:
  description: Paths only linked to a blob already in the cache.
  returned: success
  type: list
  elements: str
  sample: []
bytes_fetched:
  description: Bytes fetched from the Hub by this run; always V(0).
  returned: success
  type: int
  sample: 0
bytes_copied:
  description: Bytes copied from the sender (in check mode, that would be copied).
  returned: success
  type: int
  sample: 65249924096
bytes_total:
  description: Size in bytes of the selected files.
  returned: success
  type: int
  sample: 65249924096
source:
  description: The sender's name.
  returned: success
  type: str
  sample: spark-1
verified:
  description: Per copied file its C(path), the C(sha256) it was verified against and C(sha256_source) (V(hub) or V(sender)).
  returned: success
  type: list
  elements: dict
  sample: [{path: config.json, sha256: 9d1e3f2c6f0e1b3d0a9c8b7a6f5e4d3c2b1a09f8e7d69d1e3f2c6f0e1b3d0a9c, sha256_source: sender}]
seconds:
  description: Wall-clock duration of the run, in seconds.
  returned: success
  type: float
  sample: 3.2
error_kind:
  description: Class of the failure (see the notes).
  returned: failure
  type: str
  sample: mismatch
"""

import errno

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _hf, _peer_copy


def main():
    module = AnsibleModule(
        argument_spec=_peer_copy.argument_spec(
            _peer_copy.HF_SNAPSHOT_SPEC, _peer_copy.SSH_SOURCE_SPEC,
            revision=dict(type='str', default='main'),
            manifest=dict(type='dict', required=True),
            max_workers=dict(type='int', default=4),
            endpoint=dict(type='str'),
        ),
        **_peer_copy.HF_SNAPSHOT_RULES,
        supports_check_mode=True,
    )
    p = module.params
    if p['max_workers'] < 1:
        module.fail_json(msg='max_workers must be >= 1 (got %d)' % p['max_workers'], error_kind='invalid_option')
    address, problem = _peer_copy.ssh_source(p)
    if problem:
        module.fail_json(msg=problem, error_kind='invalid_option')
    target = _hf.Target(p['repo_id'], p['repo_type'], cache_dir=p['cache_dir'], local_dir=p['local_dir'])
    transport = _peer_copy.SshTransport(address, p['ssh_options'], p['connect_timeout'])
    try:
        result = _peer_copy.receive(target, p['repo_id'], (p['revision'] or 'main').strip(), p['manifest'], transport,
                                    p['source_name'] or address, p['allow_patterns'], p['ignore_patterns'],
                                    p['endpoint'], module.check_mode, p['max_workers'])
    except _peer_copy.PeerCopyError as e:
        module.fail_json(msg=e.msg, error_kind=e.kind)
    except (IOError, OSError) as e:
        kind = 'disk_full' if e.errno in _hf.SPACE_ERRNOS else 'not_writable' if e.errno in _hf.WRITE_ERRNOS else 'error'
        module.fail_json(msg='%s: cannot write %s (%s): free space or fix the permissions of the model directory, then '
                         're-run.' % (p['repo_id'], e.filename, e.strerror or errno.errorcode.get(e.errno, e)),
                         error_kind=kind)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
