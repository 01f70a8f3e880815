"""meta/argument_specs.yml is the one hand-written source of a role's options: defaults/main/options.yml, the README
option tables and docs/settings.md are generated from it (make docs, hacking/gen_docs.py). These tests check what
the generation cannot: each option is fully declared, the generated files are fresh, the hand-kept Jinja defaults
(defaults/main/computed.yml) fit the specs, and Ansible itself loads exactly these defaults."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
_SPEC = importlib.util.spec_from_file_location("gen_docs", ROOT / "hacking" / "gen_docs.py")
gen_docs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(gen_docs)

SPECS = gen_docs.load_specs(str(ROOT))
COMPUTED = {role: gen_docs.load_computed(str(ROOT), role) for role in SPECS}


def _jinja(value):
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def test_all_roles_with_options_found():
    assert sorted(SPECS) == ["docker_group", "netplan_qsfp", "specdec_benchmark", "specdec_common", "specdec_firewall",
                             "specdec_models", "specdec_server", "ssh_mesh", "trtllm_container"]


@pytest.mark.parametrize("role", sorted(SPECS))
def test_every_option_declares_type_and_description(role):
    for name, spec in SPECS[role].items():
        assert spec.get("type"), "%s: %s has no type in meta/argument_specs.yml" % (role, name)
        assert spec.get("description"), "%s: %s has no description in meta/argument_specs.yml" % (role, name)
        if spec.get("type") == "list":
            assert spec.get("elements"), "%s: %s is a list without elements" % (role, name)


@pytest.mark.parametrize("role", sorted(SPECS))
def test_spec_defaults_are_plain_and_chosen(role):
    """A spec default is never templated (a Jinja default goes to computed.yml) and is one of the choices."""
    for name, spec in SPECS[role].items():
        if "default" not in spec:
            continue
        assert not _jinja(spec["default"]), "%s: %s: a Jinja default belongs in defaults/main/computed.yml" % (role, name)
        if spec.get("choices") and spec["default"] is not None:
            assert spec["default"] in spec["choices"], "%s: %s" % (role, name)


@pytest.mark.parametrize("role", sorted(SPECS))
def test_computed_defaults_are_jinja_of_declared_options(role):
    assert gen_docs.check_computed(role, SPECS[role], COMPUTED[role]) == []
    for name, value in COMPUTED[role].items():
        assert _jinja(value), "%s: %s in computed.yml is not a Jinja expression (give it a spec default)" % (role, name)


def test_generated_files_are_fresh():
    assert gen_docs.stale(str(ROOT)) == [], "run make docs"


def test_no_hand_kept_defaults_file():
    """defaults/main.yml would be shadowed by the defaults/main/ directory (Ansible reads the directory only)."""
    assert sorted(str(p.relative_to(ROOT)) for p in ROLES.glob("*/defaults/main.yml")) == []


def test_readme_marks_are_required(tmp_path):
    with pytest.raises(ValueError, match="BEGIN generated options"):
        gen_docs.render_readme("README.md", "# role\n\n| variable |\n", "| table |\n")


def test_markup_becomes_markdown():
    text = "C(a) O(b) V(c) M(x.y.z) I(it) B(bold) L(text, https://e.x) C({{ f('x') }}) and a|b"
    assert gen_docs._markup(text) == "`a` `b` `c` `x.y.z` *it* **bold** [text](https://e.x) `{{ f('x') }}` and a|b"
    assert gen_docs._cell("a|b") == "a\\|b"


_PROBE = textwrap.dedent("""
    import json, os, sys, tempfile
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader([sys.argv[1]])
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook import Playbook
    from ansible.vars.manager import VariableManager
    loader = DataLoader()
    manager = VariableManager(loader=loader, inventory=InventoryManager(loader=loader, sources='localhost,'))
    path = os.path.join(tempfile.mkdtemp(), 'play.yml')
    with open(path, 'w') as f:
        f.write('- hosts: localhost\\n  gather_facts: false\\n  roles:\\n'
                + ''.join('    - sparkops.specdec.%s\\n' % role for role in sys.argv[2:]))
    play = Playbook.load(path, variable_manager=manager, loader=loader).get_plays()[0]
    print(json.dumps({role.get_name(): role.get_default_vars() for role in play.get_roles()}))
""")


def test_ansible_loads_the_generated_defaults():
    """The defaults Ansible gives each role (its dependencies' too) are the spec defaults (null where the spec
    declares none) and the computed Jinja defaults, with their types."""
    collections = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    out = subprocess.run([sys.executable, "-c", _PROBE, collections] + sorted(SPECS), check=True, capture_output=True,
                         text=True, env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))).stdout
    loaded = json.loads(out.strip().splitlines()[-1])
    for role in SPECS:
        expected = {}
        for dep in ("specdec_common", role):
            expected.update({name: spec.get("default") for name, spec in SPECS[dep].items()})
            expected.update(COMPUTED[dep])
        got = loaded["sparkops.specdec.%s" % role]
        assert got == expected, role
        for name, value in expected.items():
            assert type(got[name]) is type(value), (role, name)


def test_markup_of_another_roles_option_renders_its_name():
    """O(fqcn#role:entrypoint:option) (antsibull-docs' reference to another role's option) renders as the option."""
    text = "sshd on O(sparkops.specdec.specdec_common#role:main:specdec_container_ssh_port) and O(own_option)"
    assert gen_docs._markup(text) == "sshd on `specdec_container_ssh_port` and `own_option`"
