"""Every filter plugin of the collection is documented: ``ansible-doc -t filter sparkops.specdec.<name>`` renders
its plugins/filter/<name>.yml (description, input, options, examples, return), and the documented options are the
filter's own arguments."""
import importlib
import inspect
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PREFIX = "ansible_collections.sparkops.specdec.plugins.filter."


def _filters():
    out = {}
    for path in sorted((ROOT / "plugins" / "filter").glob("*.py")):
        module = importlib.import_module(PREFIX + path.stem)
        out.update(module.FilterModule().filters())
    return out


FILTERS = _filters()


@pytest.fixture(scope="module")
def docs():
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.environ.get("PYTHONPATH", "").split(os.pathsep)[0])
    names = ["sparkops.specdec.%s" % name for name in sorted(FILTERS)]
    run = subprocess.run([ansible_doc, "-t", "filter", "--json"] + names, capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_filters_found():
    assert len(FILTERS) >= 26  # 30, less ssh_mesh_node and ssh_mesh_files (module ssh_mesh_keys), trtllm_sshd_image and
    # trtllm_sshd_image_name (action engine_sshd_image)


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_documented(docs, name):
    entry = docs.get("sparkops.specdec.%s" % name)
    assert entry and entry.get("doc"), "plugins/filter/%s.yml: ansible-doc renders no documentation" % name
    doc = entry["doc"]
    assert doc.get("short_description") and doc.get("description"), name
    assert entry.get("examples") and ("sparkops.specdec.%s" % name) in entry["examples"], name
    assert (entry.get("return") or {}).get("_value", {}).get("type"), "%s: RETURN needs _value with its type" % name
    options = doc.get("options") or {}
    assert "_input" in options, name
    params = list(inspect.signature(FILTERS[name]).parameters)[1:]
    assert sorted(set(options) - {"_input"}) == sorted(params), "%s: documented options != the filter's arguments" % name
    for option, spec in options.items():
        assert spec.get("description") and spec.get("type"), (name, option)
