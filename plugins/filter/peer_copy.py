# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filter of the specdec_server role (the logic is in module_utils/_peer_copy.py).

- ``hostvars | sparkops.specdec.peer_copy_role(me, members, head, enabled, download)``: this node's part in fetching
  the models of its deployment: ``fetch`` (the head of a pair: from the Hub, once), ``receive`` (its peer: copied
  from the head's first fabric address) or ``alone`` (a single node, or peer copy / downloads switched off).
- ``hostvars | sparkops.specdec.image_peer_copy_role(me, members, head, enabled, image)``: the same for the engine
  image (an image pinned by digest is pulled by every node).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.module_utils import _peer_copy


def peer_copy_role(hostvars, me, members, head, enabled=True, download=True):
    try:
        return _peer_copy.peer_copy_role(hostvars, str(me), list(members or []), str(head), bool(enabled), bool(download))
    except _peer_copy.PeerCopyError as exc:
        raise AnsibleFilterError(exc.msg) from None


def image_peer_copy_role(hostvars, me, members, head, enabled=True, image=""):
    try:
        return _peer_copy.image_peer_copy_role(hostvars, str(me), list(members or []), str(head), bool(enabled), str(image or ""))
    except _peer_copy.PeerCopyError as exc:
        raise AnsibleFilterError(exc.msg) from None


class FilterModule(object):
    def filters(self):
        return {"peer_copy_role": peer_copy_role, "image_peer_copy_role": image_peer_copy_role}
