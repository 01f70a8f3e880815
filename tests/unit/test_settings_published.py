"""_settings.RESULTS holds every name the collection publishes on a host (register, set_fact, an action's
ansible_facts) under one of its prefixes: specdec_settings passes none of them to the plan as a setting, and the plan
reports none of them as a misspelt one. A new register or set_fact under a prefix fails here until it is listed."""
import glob
import pathlib
import re

import yaml

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

ROOT = pathlib.Path(__file__).resolve().parents[2]
SET_FACT = ("ansible.builtin.set_fact", "set_fact")


def _names(node, found):
    if isinstance(node, dict):
        if isinstance(node.get("register"), str):
            found.add(node["register"])
        for key in SET_FACT:
            if isinstance(node.get(key), dict):
                found.update(n for n in node[key] if n != "cacheable")
        for value in node.values():
            _names(value, found)
    elif isinstance(node, list):
        for value in node:
            _names(value, found)
    return found


def published_names():
    found = set()
    for pattern in ("roles/*/tasks/*.yml", "playbooks/*.yml", "playbooks/tasks/*.yml"):
        for path in glob.glob(str(ROOT / pattern)):
            with open(path, encoding="utf-8") as handle:
                _names(yaml.safe_load(handle), found)
    for path in glob.glob(str(ROOT / "plugins" / "action" / "*.py")):
        text = pathlib.Path(path).read_text(encoding="utf-8")
        for facts in re.findall(r'\["ansible_facts"\] = \{([^}]*)\}', text):
            found.update(re.findall(r'"([a-z_]+)":', facts))
    return found


def test_the_scan_finds_what_the_roles_publish():
    names = published_names()
    assert {"specdec_server_plan", "trtllm_container_image_info", "specdec_settings", "preflight_plan"} <= names


def test_every_published_name_under_a_prefix_is_a_result():
    settings, misnamed = _settings.select_names(published_names() - set(_settings.RESULTS), _action.specs(),
                                                results=())
    # Not one is taken for a setting (its value would reach the plan) or for a misspelt one (an error).
    assert (settings, misnamed) == ([], [])
    assert not set(_settings.RESULTS) & set(_settings.known_options(_action.specs()))
