# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filter of sparkops.specdec (the logic is in module_utils/_secrets.py): leak checks.

- ``texts | sparkops.specdec.secret_find(secrets)``: which forms of the secrets (``raw``, ``escaped``, ``url``,
  ``base64``, ``bearer``; module_utils/_secrets.py FORM_KINDS) each text holds. ``texts`` is a mapping
  ``where -> text`` (or a list of texts, named by index); non-string values are searched as JSON. Returns
  ``[{"where": ..., "kinds": [...]}]`` for the texts that hold one, sorted by ``where``; never the value.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets


def secret_find(texts, secrets):
    if isinstance(secrets, str):
        secrets = [secrets]
    if not isinstance(secrets, (list, tuple)) or not [s for s in secrets if s]:
        raise AnsibleFilterError("secret_find: give the secrets to look for as a non-empty list of strings.")
    if isinstance(texts, (list, tuple)):
        texts = dict((str(i), t) for i, t in enumerate(texts))
    if not isinstance(texts, dict):
        raise AnsibleFilterError("secret_find: give the texts as a mapping where -> text (or a list of texts).")
    finder = _secrets.Finder([str(s) for s in secrets if s])
    found = []
    for where in sorted(texts, key=str):
        text = texts[where]
        if not isinstance(text, (str, bytes)):
            text = json.dumps(text, sort_keys=True, default=str)
        kinds = finder.kinds(text)
        if kinds:
            found.append({"where": str(where), "kinds": kinds})
    return found


class FilterModule(object):
    def filters(self):
        return {"secret_find": secret_find}
