# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: secret_options
short_description: Names of the collection's options that hold secrets (declared no_log in their specs)
version_added: 0.3.0
description:
  - "Returns the names of every option that declares C(no_log: true) in the argument specs
    (C(meta/argument_specs.yml)) of this collection's roles or in its playbook settings' table, e.g.
    C(specdec_server_hf_token), C(specdec_api_key) and C(diagnose_secrets) (a list), sorted."
  - "C(playbooks/diagnose.yml) removes the values of all of them from the support bundle; an option added with
    C(no_log: true) is removed as well, with no list to keep by hand."
  - Takes no terms.
author:
  - sparkops maintainers (@sparkops)
"""

EXAMPLES = r"""
- name: The values of every secret option, to scrub them
  ansible.builtin.set_fact:
    secrets: "{{ query('ansible.builtin.vars', *query('sparkops.specdec.secret_options'), default='') | flatten | select | list }}"
  no_log: true
"""

RETURN = r"""
_raw:
  description: The option names, sorted.
  type: list
  elements: str
"""

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _secret_options


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleError("sparkops.specdec.secret_options takes no terms (got %d); call it as "
                               "query('sparkops.specdec.secret_options')." % len(terms))
        return _secret_options.no_log_options()
