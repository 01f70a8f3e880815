# -*- coding: utf-8 -*-
"""The layering of the collection's Python (developers' guide, "How we build"; issue "One coherent core" item 3).

- Node-side code is what a module ships to the node: ``plugins/modules/*.py`` and the ``plugins/module_utils`` files
  they import. It runs on the node's system Python and imports only ``ansible.module_utils`` and this collection's
  ``module_utils``: never ``plugin_utils``, an action, filter or lookup plugin, nor ``ansible.plugins``.
- Controller-only code lives in ``plugins/plugin_utils``: every ``module_utils`` file is imported, directly or
  through another ``module_utils`` file, by at least one module. A ``module_utils`` file no module reaches is
  controller code in the wrong place (it would be shipped in no AnsiballZ payload, but read as node-side by anyone).
- No plugin reads ansible-core's private state (the variable manager, the fact caches, ``raw_get``).
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PREFIX = "ansible_collections.sparkops.specdec.plugins."
MODULES = sorted((ROOT / "plugins" / "modules").glob("*.py"))
MODULE_UTILS = {p.stem: p for p in sorted((ROOT / "plugins" / "module_utils").glob("*.py")) if p.stem != "__init__"}


def imported(path):
    """The fully qualified names ``path`` imports (``from X import a`` gives ``X`` and ``X.a``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update("%s.%s" % (node.module, alias.name) for alias in node.names)
    return names


def own_module_utils(names):
    """The collection's module_utils file names among ``names``."""
    out = set()
    for name in names:
        if name.startswith(PREFIX + "module_utils."):
            stem = name[len(PREFIX + "module_utils."):].split(".")[0]
            if stem in MODULE_UTILS:
                out.add(stem)
    return out


def test_node_side_code_imports_only_node_side_code():
    bad = []
    for path in MODULES + list(MODULE_UTILS.values()):
        for name in sorted(imported(path)):
            if (name.startswith(PREFIX) and not name.startswith(PREFIX + "module_utils")) \
                    or name == "ansible.plugins" or name.startswith("ansible.plugins."):
                bad.append("%s imports %s" % (path.relative_to(ROOT), name))
    assert not bad, "node-side code must import only module_utils:\n" + "\n".join(bad)


def test_every_module_utils_file_is_reached_by_a_module():
    graph = {stem: own_module_utils(imported(path)) for stem, path in MODULE_UTILS.items()}
    reached, todo = set(), set()
    for path in MODULES:
        todo |= own_module_utils(imported(path))
    while todo:
        stem = todo.pop()
        if stem not in reached:
            reached.add(stem)
            todo |= graph[stem] - reached
    unreached = sorted(set(MODULE_UTILS) - reached)
    assert not unreached, ("controller-only code in plugins/module_utils (no module imports it): %s; move it to "
                           "plugins/plugin_utils" % ", ".join(unreached))


def test_no_plugin_reads_ansible_core_private_state():
    private = re.compile(r"_variable_manager|raw_get|_nonpersistent|_fact_cache")
    hits = ["%s:%d" % (path.relative_to(ROOT), n)
            for path in sorted((ROOT / "plugins").rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1) if private.search(line)]
    assert not hits, "ansible-core private attributes read in: %s" % ", ".join(hits)
