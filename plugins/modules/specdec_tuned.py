#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: specdec_tuned
short_description: Record (or remove) the tuner's pick in a deployment's state file
version_added: 0.2.0
description:
  - The state file of a deployment (C(<specdec_state_dir>/deployments/<id>.json) on each node, written by the
    C(specdec_server) role) keeps the launch spec that runs. This module sets or removes its C(tuned) key, the
    draft length (or no speculation) that C(playbooks/benchmark.yml) picked, so the next deploy serves it.
  - "Precedence when the plan resolves the draft length and the method: a value set in the inventory (or as an
    extra var) wins over the tuned value, which wins over the preset's. A tuned value is used only for the engine,
    target model and draft model it was measured on (C(plugin_utils/_plan.py) C(apply_tuned))."
  - Only the C(tuned) key changes; the rest of the file is kept as it is. The server is not touched; the
    C(specdec_server) role restarts it, with consent, when the resolved launch spec differs from the running one.
  - The file is replaced atomically (C(AnsibleModule.atomic_move)) and keeps its mode and owner.
author:
  - sparkops maintainers (@sparkops)
options:
  path:
    description:
      - The deployment's state file on the node (the C(specdec_server_state_file) result of the C(specdec_server) role).
    type: path
    required: true
  state:
    description:
      - V(present) records O(tuned); V(absent) removes the recorded pick (the preset's or the inventory's values are
        served again after the next deploy with C(specdec_server_allow_restart)).
    type: str
    choices: [present, absent]
    default: present
  tuned:
    description:
      - "The pick, with the keys C(engine) (V(trtllm), V(llamacpp) or V(vllm)), C(target_model) and C(draft_model) (Hugging Face
        ids it was measured with), C(method) (V(eagle3), V(draft_target) or V(none)) and C(max_draft_len) (draft
        tokens per step, 1 to 32; V(null) with method V(none)). Other keys (C(objective), C(reason), C(measured_at),
        C(report)) are kept as given."
      - Required with O(state=present).
    type: dict
notes:
  - "Errors (nothing is written): the state file is missing (deploy first), not JSON, or of another schema version;
    O(tuned) misses a key or holds a method or draft length that does not exist; the file cannot be written."
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: full
    details: Reports whether the file would change, and the diff, without writing.
  diff_mode:
    support: full
    details: The C(tuned) key before and after, as JSON.
  idempotent:
    support: full
  platform:
    details: Reads and replaces a JSON file on the node.
seealso:
  - module: sparkops.specdec.specdec_bench_report
"""

EXAMPLES = r"""
- name: Record the benchmark's pick (draft length 2) for the next deploy
  sparkops.specdec.specdec_tuned:
    path: "{{ specdec_server_state_file }}"
    tuned:
      engine: llamacpp
      target_model: sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF
      draft_model: sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF
      method: draft_target
      max_draft_len: 2
      objective: {concurrency: 1}
      reason: "draft length 2: 14.2 tok/s (13.9-14.6 over 3 runs) at concurrency 1; 1.31x the baseline's ..."

- name: Forget the pick (the preset's draft length is served after the next deploy with consent)
  sparkops.specdec.specdec_tuned:
    path: /var/lib/sparkops/specdec/deployments/spark-1.json
    state: absent
"""

RETURN = r"""
tuned:
  description: The C(tuned) record in the file after the task (V(null) when absent).
  returned: always
  type: dict
previous:
  description: The C(tuned) record before the task (V(null) when there was none).
  returned: always
  type: dict
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkops.specdec.plugins.module_utils import _server


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            tuned=dict(type="dict"),
        ),
        required_if=[("state", "present", ("tuned",))],
        supports_check_mode=True,
    )
    path = module.params["path"]
    tuned = module.params["tuned"] if module.params["state"] == "present" else None
    if tuned is not None:
        problems = _server.check_tuned(tuned)
        if problems:
            module.fail_json(msg="specdec_tuned: %s; nothing was written." % "; ".join(problems))
        if tuned["max_draft_len"] is not None:
            tuned = dict(tuned, max_draft_len=int(str(tuned["max_draft_len"])))
    try:
        with open(path) as handle:
            state = json.load(handle)
    except FileNotFoundError:
        module.fail_json(msg="specdec_tuned: no deployment state file at %s; deploy first (playbooks/single_spark.yml "
                             "or two_sparks.yml), then record the pick." % path)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="specdec_tuned: cannot read the state file %s (%s); nothing was written." % (path, exc))
    if not isinstance(state, dict) or state.get("schema_version") != _server.STATE_SCHEMA:
        module.fail_json(msg="specdec_tuned: %s is not a state file of schema version %s; deploy again with this "
                             "collection to rewrite it." % (path, _server.STATE_SCHEMA))
    before = state.get("tuned")
    changed = before != tuned
    result = dict(changed=changed, tuned=tuned, previous=before)
    if module._diff:
        result["diff"] = {"before": json.dumps(before, indent=2, sort_keys=True) + "\n",
                          "after": json.dumps(tuned, indent=2, sort_keys=True) + "\n",
                          "before_header": "%s (tuned)" % path, "after_header": "%s (tuned)" % path}
    if changed and not module.check_mode:
        state["tuned"] = tuned
        fd, tmp = tempfile.mkstemp(prefix=".tuned.", dir=os.path.dirname(path) or ".")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(state, indent=2) + "\n")
        except OSError as exc:
            os.unlink(tmp)
            module.fail_json(msg="specdec_tuned: cannot write %s (%s); the file is unchanged." % (path, exc))
        # Ansible's own atomic replace: keeps the existing file's mode, owner and SELinux context.
        module.atomic_move(tmp, path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
