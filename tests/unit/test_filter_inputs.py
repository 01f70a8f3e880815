# -*- coding: utf-8 -*-
"""No filter takes ``hostvars`` (issue 21 item 3): a caller passes exactly the published values a filter needs (e.g. a
member -> value dict built with ``map('extract', hostvars)``), so a filter reads no other host's variables than those.

Checked three ways, per filter: its documented ``_input`` is not hostvars; no playbook, role, template, Molecule
scenario or plugin example pipes ``hostvars`` itself into it; its code (and the collection functions it calls, followed
through) neither takes a ``hostvars`` argument nor indexes ``hostvars``.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import re
import textwrap
import types

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PREFIX = "ansible_collections.sparkops.specdec."

# Filters that still take hostvars, each with the item that removes it. Only ever shrinks (empty since issue 21 item 3
# moved container_change_report to the members' trtllm_container_previous).
ALLOWED = set()


def _filters():
    out = {}
    for path in sorted((ROOT / "plugins" / "filter").glob("*.py")):
        module = importlib.import_module(PREFIX + "plugins.filter." + path.stem)
        out.update(module.FilterModule().filters())
    return out


FILTERS = _filters()


def _doc(name):
    path = ROOT / "plugins" / "filter" / ("%s.yml" % name)
    return yaml.safe_load(path.read_text()) if path.exists() else {}


def _text(value):
    return " ".join(value) if isinstance(value, list) else str(value or "")


def _hostvars_uses(func, seen=None):
    """Where ``func``, or a collection function it calls (followed through), takes or indexes ``hostvars``."""
    seen = set() if seen is None else seen
    if func in seen or not inspect.isfunction(func) or not func.__module__.startswith(PREFIX):
        return []
    seen.add(func)
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    where = "%s.%s" % (func.__module__[len(PREFIX):], func.__name__)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg == "hostvars":
            out.append("%s takes an argument named hostvars" % where)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "hostvars":
            out.append("%s indexes hostvars" % where)
        elif isinstance(node, ast.Call):
            callee = None
            if isinstance(node.func, ast.Name):
                callee = func.__globals__.get(node.func.id)
            elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                owner = func.__globals__.get(node.func.value.id)
                if isinstance(owner, types.ModuleType) and owner.__name__.startswith(PREFIX):
                    callee = getattr(owner, node.func.attr, None)
            out.extend(_hostvars_uses(callee, seen))
    return out


def _call_sites():
    """(file, filter) for every ``hostvars | sparkops.specdec.<filter>`` in the collection's YAML and templates."""
    pattern = re.compile(r"\bhostvars\s*\|\s*sparkops\.specdec\.(\w+)")
    out = []
    for top in ("roles", "playbooks", "molecule", "plugins", "inventories", "tests/integration"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".j2", ".py"):
                for match in pattern.finditer(path.read_text(errors="replace")):
                    out.append((str(path.relative_to(ROOT)), match.group(1)))
    return out


def test_the_allow_list_names_filters_that_exist():
    assert ALLOWED <= set(FILTERS)


@pytest.mark.parametrize("name", sorted(set(FILTERS) - ALLOWED))
def test_no_filter_takes_hostvars(name):
    func = FILTERS[name]
    first = next(iter(inspect.signature(func).parameters), None)
    assert first != "hostvars", "%s: its input is named hostvars" % name
    doc = ((_doc(name).get("DOCUMENTATION") or {}).get("options") or {}).get("_input") or {}
    assert not re.match(r"\s*C\(hostvars\)(?!\[)", _text(doc.get("description"))), \
        "plugins/filter/%s.yml: _input is documented as hostvars" % name
    assert not _hostvars_uses(func), _hostvars_uses(func)
    sites = [path for path, used in _call_sites() if used == name]
    assert not sites, "%s: hostvars piped into it in %s" % (name, ", ".join(sites))


def _old_container_change_report(hostvars, members, restore=None):
    """container_change_report as it was before issue 21 item 3 (it took hostvars), for the guard's own test."""
    previous = {}
    for host in members:
        facts = hostvars[host]
        previous[host] = facts.get("trtllm_container_previous")
    return previous, restore


_old_container_change_report.__module__ = PREFIX + "plugins.filter.container_change"


def test_the_guard_sees_a_filter_take_hostvars():
    # The code check finds a filter that takes hostvars (so it would find a new one); ALLOWED is empty, so this is
    # checked on the last filter that did, as it was.
    where = "plugins.filter.container_change._old_container_change_report"
    assert _hostvars_uses(_old_container_change_report) == ["%s takes an argument named hostvars" % where,
                                                            "%s indexes hostvars" % where]
