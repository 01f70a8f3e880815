# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filter of the specdec_server role (the logic is in module_utils/_peer_copy.py).

- ``fabrics | sparkops.specdec.peer_copy_role(me, head, enabled, download, users)``: this
  node's part in fetching the models of its deployment: ``fetch`` (the head of a pair: from the Hub, once),
  ``receive`` (its peer: copied from the head's first fabric address) or ``alone`` (a single node, peer copy /
  downloads switched off, or ``auto`` with an SSH mesh user that is not the deploy user). ``enabled``: ``auto``,
  true or false; true with another mesh user is an error naming the setting and the fix.
- ``fabrics | sparkops.specdec.image_peer_copy_role(me, head, enabled, image, users)``: the
  same for the engine image (an image pinned by digest is pulled by every node).
- ``fabrics``: each member of the deployment (its keys, in order, are the members) with its published
  ``netplan_qsfp_fabric`` (``{}`` or None for a member that has none), as the role builds it with
  ``map('extract', hostvars)``; only the head's is read. Not hostvars: an error says so.
- ``copied | sparkops.specdec.peer_copy_results(looked)``: each model's copy result, or, where the copy did not run
  because the read-only look (the same module in check mode) found nothing to copy, that look's result (the same
  keys: a copy with nothing to do returns what its check-mode look did).
- ``users``: ``[ssh_mesh_user, deploy user]`` (the mesh user empty: the deploy user; the deploy user is the user
  Ansible connects as, ``trtllm_container_mounts.user``); omitted: no check of the mesh user.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.module_utils import _peer_copy


def _users(users):
    """(mesh user, deploy user) from ``[ssh_mesh_user, deploy user]``; empty strings for what is not given."""
    users = list(users or []) + ["", ""]
    return str(users[0] or ""), str(users[1] or "")


def _members(fabrics):
    """The deployment's members: the keys of ``fabrics`` (anything but a mapping is refused by _peer_copy)."""
    return [str(member) for member in fabrics] if isinstance(fabrics, Mapping) else []


def peer_copy_fabrics(fabrics, management):
    """``fabrics`` (member -> its published ``netplan_qsfp_fabric``) with each member's management address (its
    ``ansible_host``) added as ``management``: where a member with no fabric link to the head (the Spark opposite it in
    an accepted 4-node ring) copies from."""
    if not isinstance(fabrics, Mapping):
        raise AnsibleFilterError("peer_copy_fabrics: expected a mapping of member to netplan_qsfp_fabric, got %s"
                                 % type(fabrics).__name__)
    management = management if isinstance(management, Mapping) else {}
    return {str(m): dict(f if isinstance(f, Mapping) else {}, management=str(management.get(m) or ""))
            for m, f in fabrics.items()}


def peer_copy_role(fabrics, me, head, enabled="auto", download=True, users=None):
    try:
        return _peer_copy.peer_copy_role(fabrics, str(me), _members(fabrics), str(head), enabled, bool(download),
                                         *_users(users))
    except _peer_copy.PeerCopyError as exc:
        raise AnsibleFilterError(exc.msg) from None


def image_peer_copy_role(fabrics, me, head, enabled="auto", image="", users=None):
    try:
        return _peer_copy.image_peer_copy_role(fabrics, str(me), _members(fabrics), str(head), enabled, str(image or ""),
                                               *_users(users))
    except _peer_copy.PeerCopyError as exc:
        raise AnsibleFilterError(exc.msg) from None


def peer_copy_results(copied, looked=None):
    """``{'results': [...]}``: per loop item, the copy's result unless it was skipped, else the look's result."""
    copied = list((copied or {}).get("results") or [])
    looked = list((looked or {}).get("results") or [])
    out = []
    for index, result in enumerate(copied):
        if result.get("skipped") and index < len(looked) and not looked[index].get("skipped"):
            result = looked[index]
        out.append(result)
    return {"results": out}


class FilterModule(object):
    def filters(self):
        return {"peer_copy_role": peer_copy_role, "image_peer_copy_role": image_peer_copy_role,
                "peer_copy_fabrics": peer_copy_fabrics,
                "peer_copy_results": peer_copy_results}
