# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filters of the specdec_server role (the logic is in plugin_utils/_hf_watch.py and _secrets.py).

- ``statuses | sparkops.specdec.hf_download_watch(progress, previous, deadline, stale_after, host)``: one round of
  the background download poll: which jobs still run, are done, failed, are dead (no result, or a progress file
  that stopped changing) or passed the poll's deadline; the progress lines and one-line errors.
- ``token | sparkops.specdec.hf_token_env(rank_env)``: the ``docker exec`` environment that carries the HF token to
  the server ranks: ``{}`` when there is no token or the ranks run offline (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.module_utils import _secrets
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _hf_watch


def hf_download_watch(statuses, progress=None, previous=None, deadline=86400, stale_after=600, host="", now=None):
    try:
        return _hf_watch.watch(list(statuses or []), list(progress or []), previous or {},
                               time.time() if now is None else float(now), int(deadline), int(stale_after), str(host or ""))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("hf_download_watch: %s" % exc) from None


def hf_token_env(token, rank_env=None):
    return _secrets.hf_token_env(token, rank_env if isinstance(rank_env, dict) else {})


class FilterModule(object):
    def filters(self):
        return {
            "hf_download_watch": hf_download_watch,
            "hf_token_env": hf_token_env,
        }
