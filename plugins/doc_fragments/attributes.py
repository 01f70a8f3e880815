# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The attributes every module of the collection shares (as ansible.builtin.action_common_attributes,
community.general.attributes and community.docker.attributes do): what each attribute means is said here once; each
module says how far it supports it (``support`` and, where it helps, ``details``).

- ``sparkops.specdec.attributes`` (DOCUMENTATION): C(check_mode), C(diff_mode) and C(idempotent), for every module;
  the module sets ``support`` of each.
- ``sparkops.specdec.attributes.platform``: C(platform) for the modules that run on a node (posix: DGX OS / Ubuntu).
- ``sparkops.specdec.attributes.action``: C(action) for the modules that have an action plugin.
- ``sparkops.specdec.attributes.info_module``: the support levels of a module that only reads (as
  community.general.attributes.info_module): the same in check mode, no diff, idempotent.
"""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
      - This assumes that the system controlled or queried by the module has not changed in a relevant way.
"""

    PLATFORM = r"""
options: {}
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
"""

    ACTION = r"""
options: {}
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the
      controller.
    support: full
"""

    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: Reads only, the same in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is nothing to show.
  idempotent:
    support: full
    details: Reads only.
"""
