"""Every module's attributes come from the one fragment (plugins/doc_fragments/attributes.py) and say the truth:
``ansible-doc -t module sparkops.specdec.<name>`` renders each module with check_mode, diff_mode and idempotent (the
fragment's description, the module's support level), platform for the modules that run on a node, action for the
modules that have an action plugin; a module that does not declare check mode support does not claim it."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
FRAGMENT = "sparkops.specdec.attributes"
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if not p.stem.startswith("_"))
ACTIONS = {p.stem for p in (ROOT / "plugins" / "action").glob("*.py") if not p.stem.startswith("_")}
# Action plugins that run their module (or other modules) on the node: those run on a node's platform too.
NODE_ACTIONS = {"diagnose_info", "engine_container", "engine_sshd_image"}
SUPPORT = {"full", "partial", "none", "N/A"}


def _fragment(var):
    from ansible_collections.sparkops.specdec.plugins.doc_fragments import attributes
    return yaml.safe_load(getattr(attributes.ModuleDocFragment, var))["attributes"]


def _source_doc(name):
    src = (ROOT / "plugins" / "modules" / ("%s.py" % name)).read_text()
    return src, yaml.safe_load(re.search(r'DOCUMENTATION\s*=\s*r?"""(.*?)"""', src, re.S).group(1))


@pytest.fixture(scope="module")
def docs():
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.environ.get("PYTHONPATH", "").split(os.pathsep)[0])
    run = subprocess.run([ansible_doc, "-t", "module", "--json"] + ["sparkops.specdec.%s" % m for m in MODULES],
                         capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_modules_found():
    assert len(MODULES) >= 31 and ACTIONS <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_attributes_render_from_the_fragment(docs, name):
    doc = docs["sparkops.specdec.%s" % name]["doc"]
    attributes = doc.get("attributes") or {}
    _src, source = _source_doc(name)
    fragments = source.get("extends_documentation_fragment") or []
    assert FRAGMENT in fragments and "ansible.builtin.action_common_attributes" not in fragments, name
    on_node = name not in ACTIONS or name in NODE_ACTIONS
    assert (FRAGMENT + ".platform" in fragments) == on_node, name
    assert (FRAGMENT + ".action" in fragments) == (name in ACTIONS), name
    shared = dict(_fragment("DOCUMENTATION"))
    if on_node:
        shared.update(_fragment("PLATFORM"))
    if name in ACTIONS:
        shared.update(_fragment("ACTION"))
    assert sorted(set(shared) - set(attributes)) == [], name
    for attribute, meant in shared.items():
        got = attributes[attribute]
        # The meaning is the fragment's, never the module's own text (that goes into details).
        assert got["description"] == meant["description"], (name, attribute)
        assert got.get("support") in SUPPORT, (name, attribute, got.get("support"))
        if got["support"] == "partial":
            assert got.get("details"), "%s: %s support partial needs details" % (name, attribute)
    if on_node:
        assert attributes["platform"]["platforms"] == "posix", name


@pytest.mark.parametrize("name", [m for m in MODULES if m not in ACTIONS])
def test_check_mode_claim_matches_the_code(docs, name):
    # The claim as ansible-doc renders it: the module's own attributes merged with its fragments (info_module's too).
    src, _source = _source_doc(name)
    claims = docs["sparkops.specdec.%s" % name]["doc"]["attributes"]["check_mode"]["support"] != "none"
    assert claims == ("supports_check_mode=True" in src), name


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_action_check_mode_claim_matches_the_plugin(docs, name):
    from importlib import import_module
    plugin = import_module("ansible_collections.sparkops.specdec.plugins.action.%s" % name).ActionModule
    claims = docs["sparkops.specdec.%s" % name]["doc"]["attributes"]["check_mode"]["support"] != "none"
    assert claims == bool(getattr(plugin, "_supports_check_mode", True)), name
