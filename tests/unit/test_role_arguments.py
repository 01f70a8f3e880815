"""Every public role variable is declared in meta/argument_specs.yml, defaulted in
defaults/main.yml and documented in the role README, with the role-name prefix."""
import pathlib

import pytest
import yaml

ROLES = pathlib.Path(__file__).resolve().parents[2] / "roles"
ROLE_NAMES = sorted(p.name for p in ROLES.iterdir() if (p / "defaults" / "main.yml").exists())


def _load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def test_all_roles_found():
    assert ROLE_NAMES == ["docker_group", "netplan_qsfp", "specdec_benchmark", "specdec_common", "specdec_server", "ssh_mesh",
                          "trtllm_container"]


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_defaults_match_argument_specs(role):
    defaults = _load(ROLES / role / "defaults" / "main.yml")
    options = _load(ROLES / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    for name, spec in options.items():
        assert name.startswith("specdec_" if role == "specdec_common" else role + "_"), name
        assert "type" in spec and spec.get("description"), name
        value = defaults[name]
        if "default" in spec:
            assert spec["default"] == value, name
        elif value is not None:
            assert isinstance(value, str) and "{{" in value, f"{name}: default missing from the spec"
        if spec.get("choices") and value is not None and not (isinstance(value, str) and "{{" in value):
            assert value in spec["choices"], name


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_readme_documents_every_variable(role):
    readme = (ROLES / role / "README.md").read_text(encoding="utf-8")
    for name in _load(ROLES / role / "defaults" / "main.yml"):
        assert f"`{name}`" in readme, f"{role}/README.md does not document {name}"
