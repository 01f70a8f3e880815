# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filter of the specdec_server role's failure report (templates/failure_message.j2).

- ``previous | sparkops.specdec.container_change_report(members, restore)``: the sentence saying, per node, which
  previous container (image, image id) runs again after a failed container change, or where it could not be put
  back; "" when no member had a pending change. ``previous`` is member -> its published ``trtllm_container_previous``
  (the caller builds it from that one named variable of each member). The wording is module_utils/_container_change.py's
  change_report.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.module_utils import _container_change


def container_change_report(previous, members, restore=None):
    if not isinstance(previous, Mapping):
        raise AnsibleFilterError("container_change_report: the input must be a mapping of member -> its "
                                 "trtllm_container_previous, got %s" % type(previous).__name__)
    if not isinstance(members, (list, tuple)):
        raise AnsibleFilterError("container_change_report: members must be a list of hosts, got %s" % type(members).__name__)
    records = {}
    for host in members:
        value = previous.get(host)
        if isinstance(value, Mapping) and value:
            records[host] = dict(value)
    results = (restore or {}).get("results") if isinstance(restore, Mapping) else None
    return _container_change.change_report(records, list(members), results or [])


class FilterModule(object):
    def filters(self):
        return {"container_change_report": container_change_report}
