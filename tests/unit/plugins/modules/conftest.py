# -*- coding: utf-8 -*-
"""Module tests run the modules in the pytest process, where controller-side code (action and
filter plugin tests) may have been imported too. Importing it sets ansible-core's
``module_utils._internal.is_controller``, which sends ``AnsibleModule.warn()`` to the controller's
display instead of the module result. A real module runs in its own process on the node, where the
flag is False: make it so for every module test."""

from __future__ import annotations

import pytest

from ansible.module_utils import _internal


@pytest.fixture(autouse=True)
def module_process(monkeypatch):
    monkeypatch.setattr(_internal, "is_controller", False)
