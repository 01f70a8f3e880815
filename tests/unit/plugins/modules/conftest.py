# -*- coding: utf-8 -*-
"""Module tests run the modules in the pytest process, where controller-side code (action and
filter plugin tests) may have been imported too. Importing it sets ansible-core's
``module_utils._internal.is_controller``, which sends ``AnsibleModule.warn()`` to the controller's
display instead of the module result. A real module runs in its own process on the node, where the
flag is False: make it so for every module test.

run_module runs a module's main() in the test and hands back its result (exit_json) or raises ModuleFailed with it
(fail_json): the one place the module tests turn the end of a module into a value."""

from __future__ import annotations

import pytest

from ansible.module_utils import _internal, basic
from ansible.module_utils.testing import patch_module_args


@pytest.fixture(autouse=True)
def module_process(monkeypatch):
    monkeypatch.setattr(_internal, "is_controller", False)


class ModuleFailed(Exception):
    """The module called fail_json; ``result`` is what it returned (with failed: True)."""

    def __init__(self, result):
        super().__init__(result.get("msg", result))
        self.result = result


class _ModuleExited(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise _ModuleExited(kwargs)


def _fail_json(self, **kwargs):
    kwargs["failed"] = True
    raise ModuleFailed(kwargs)


def run_module(module, args, check=False, diff=False):
    """Run ``module.main()`` with these arguments (check / diff: in check mode / with diff, as a task would ask).

    Returns the result it gave exit_json; raises ModuleFailed with the result it gave fail_json (``pytest.raises
    (ModuleFailed)`` where a test expects the module to fail, ``module_outcome`` where either is expected).
    """
    args = dict(args)
    if check:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
        patch.setattr(basic.AnsibleModule, "fail_json", _fail_json)
        with patch_module_args(args):
            try:
                module.main()
            except _ModuleExited as exited:
                return exited.result
    raise AssertionError("%s.main() returned without calling exit_json or fail_json" % module.__name__)


def module_outcome(module, args, check=False, diff=False):
    """run_module, returning the result of fail_json too (failed: True) for the tests that judge either."""
    try:
        return run_module(module, args, check=check, diff=diff)
    except ModuleFailed as failed:
        return failed.result


def module_failure(module, args, check=False, diff=False):
    """The result a module gave fail_json (the test fails when it exits instead)."""
    with pytest.raises(ModuleFailed) as failed:
        run_module(module, args, check=check, diff=diff)
    return failed.value.result
