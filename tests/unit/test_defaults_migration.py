"""Transitional: the generated defaults/main/ (options.yml + computed.yml) equal the hand-kept defaults/main.yml
they replace, value for value, in every role."""
import pathlib

import pytest
import yaml

ROLES = pathlib.Path(__file__).resolve().parents[2] / "roles"
ROLE_NAMES = sorted(p.name for p in ROLES.iterdir() if (p / "meta" / "argument_specs.yml").exists())


def _load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_generated_defaults_equal_hand_kept(role):
    old = _load(ROLES / role / "defaults" / "main.yml")
    new = {}
    for path in sorted((ROLES / role / "defaults" / "main").glob("*.yml")):
        part = _load(path)
        assert not set(part) & set(new), (path, set(part) & set(new))
        new.update(part)
    assert new == old
    for name in old:
        assert type(new[name]) is type(old[name]), name
