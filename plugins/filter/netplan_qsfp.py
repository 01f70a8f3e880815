# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filters of the netplan_qsfp role's peer test (the logic is in module_utils/_layout.py).

- ``fabric | sparkops.specdec.netplan_qsfp_ping_peers(results, host, layout, check_mode)`` (``fabric``: each node's
  ``netplan_qsfp_fabric``, in the fabric order; ``results``: each node's registered netplan_fabric result): the peers
  ``host`` pings and their two addresses, and files/peer_ping.sh's arguments (_layout.ping_peers).
- ``pings | sparkops.specdec.netplan_qsfp_peer_failures(fabric, results)`` (``pings``: each node of the play's
  registered peer_ping.sh run): the play-wide verdict, one line per problem (_layout.peer_test_problems).

A refusal fails the task that uses the filter, before the task changes anything, with a one-line message.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.module_utils import _layout


def _mapping(value, name, what):
    if not isinstance(value, Mapping):
        raise AnsibleFilterError("%s: expected a mapping of node to %s, got %s" % (name, what, type(value).__name__))
    return {str(h): v for h, v in value.items()}


def netplan_qsfp_ping_peers(fabric, results, host, layout="auto", check_mode=False):
    """The peer test of ``host``: ``{"peers": [{"node", "addresses"}], "args": [...]}`` (module_utils/_layout.ping_peers).
    ``fabric`` maps each node of the fabric, in its order, to its published ``netplan_qsfp_fabric`` (None when it has
    none); ``results`` each node to its registered sparkops.specdec.netplan_fabric result (None likewise)."""
    published = _mapping(fabric, "netplan_qsfp_ping_peers", "netplan_qsfp_fabric")
    registered = _mapping(results, "netplan_qsfp_ping_peers", "its netplan_fabric result")
    plan, error = _layout.ping_peers(None if layout in (None, "", _layout.AUTO) else str(layout), list(published),
                                     str(host), published, registered, bool(check_mode))
    if error:
        raise AnsibleFilterError(error)
    return plan


def netplan_qsfp_peer_failures(pings, fabric, results):
    """The play-wide verdict of the peer test, one line per problem (module_utils/_layout.peer_test_problems).
    ``pings`` maps each node of the play that shares the fabric to its registered peer_ping.sh run (None when it has
    none); ``fabric`` and ``results`` as for netplan_qsfp_ping_peers."""
    ran = _mapping(pings, "netplan_qsfp_peer_failures", "its peer_ping.sh run")
    return _layout.peer_test_problems(list(ran), _mapping(fabric, "netplan_qsfp_peer_failures", "netplan_qsfp_fabric"),
                                      _mapping(results, "netplan_qsfp_peer_failures", "its netplan_fabric result"), ran)


class FilterModule(object):
    def filters(self):
        return {
            "netplan_qsfp_ping_peers": netplan_qsfp_ping_peers,
            "netplan_qsfp_peer_failures": netplan_qsfp_peer_failures,
        }
