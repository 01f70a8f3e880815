# -*- coding: utf-8 -*-
"""One version story: the ansible-core releases and collection ranges the collection supports are stated alike in
meta/runtime.yml (requires_ansible), requirements.txt, execution-environment.yml, galaxy.yml, requirements.yml,
tests/requirements.yml, requirements-test.txt (the `ansible` package), the sanity ignore files and the docs."""

from __future__ import annotations

import pathlib
import re

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parents[2]
MINORS = range(10, 40)


def pip_requirements(path):
    """name -> SpecifierSet of a pip requirements file (comments, options and -r lines skipped)."""
    out = {}
    for line in (ROOT / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            out[req.name.lower()] = req.specifier
    return out


def core_minors(spec):
    """The ansible-core minor releases (2.X) a specifier admits, from its first to its last patch release."""
    return {m for m in MINORS if Version("2.%d.0" % m) in spec or Version("2.%d.99" % m) in spec}


def collections_of(path):
    data = yaml.safe_load((ROOT / path).read_text())
    return {c["name"]: str(c.get("version", "*")) for c in data["collections"]}


def story():
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    ee = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    return {
        "requires_ansible": SpecifierSet(runtime["requires_ansible"]),
        "requirements.txt": pip_requirements("requirements.txt")["ansible-core"],
        "ee": Requirement(ee["dependencies"]["ansible_core"]["package_pip"]).specifier,
    }


def test_ansible_core_range_is_one_story():
    spec = story()
    supported = core_minors(spec["requirements.txt"])
    assert supported, "requirements.txt admits no ansible-core release"
    assert core_minors(spec["ee"]) == supported
    # requires_ansible may leave the top open (Galaxy's convention), never admit less than the tested range.
    assert supported <= core_minors(spec["requires_ansible"])
    assert min(core_minors(spec["requires_ansible"])) == min(supported)
    # Each supported release has its sanity ignore file (with the reasons), and no other release has one.
    ignores = {int(p.stem.split(".")[1]) for p in (ROOT / "tests" / "sanity").glob("ignore-2.*.txt")}
    assert ignores == supported


def test_the_ansible_package_brings_the_supported_ansible_core():
    """The `ansible` package N ships ansible-core 2.(N+7) (12 -> 2.19, 13 -> 2.20, 14 -> 2.21)."""
    supported = core_minors(story()["requirements.txt"])
    spec = pip_requirements("requirements-test.txt")["ansible"]
    majors = {n for n in range(5, 40) if Version("%d.0.0" % n) in spec or Version("%d.99.0" % n) in spec}
    assert {n + 7 for n in majors} == supported
    assert "ansible" not in pip_requirements("requirements.txt")


def test_collection_ranges_are_one_story():
    galaxy = {k: str(v) for k, v in yaml.safe_load((ROOT / "galaxy.yml").read_text())["dependencies"].items()}
    assert collections_of("requirements.yml") == galaxy
    tests = collections_of("tests/requirements.yml")
    assert {k: v for k, v in tests.items() if k in galaxy} == galaxy


def doc_files():
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def test_docs_state_the_same_ranges():
    """Every version range the docs give for ansible-core, requires_ansible, the `ansible` package or a
    dependency collection is the one the files above say."""
    core = story()["requirements.txt"]
    galaxy = {k: SpecifierSet(str(v)) for k, v in
              yaml.safe_load((ROOT / "galaxy.yml").read_text())["dependencies"].items()}
    wanted = {"ansible-core": core, "requires_ansible": story()["requires_ansible"],
              "ansible": pip_requirements("requirements-test.txt")["ansible"]}
    wanted.update(galaxy)
    names = "|".join(re.escape(n) for n in sorted(wanted, key=len, reverse=True))
    # `name>=1,<2`, `name: ">=1,<2"`, `name` `>=1,<2`, "name >=1,<2" (an ansible-core version like 2.19.14 alone
    # is a measurement, not a range).
    pattern = re.compile(r"(?<![\w.-])(%s)(?![\w.-])[`'\":\s]*((?:[<>=!~]=?\s*[0-9][0-9.*]*\s*,?\s*)+)" % names)
    found = []
    for path in doc_files():
        for match in pattern.finditer(path.read_text()):
            name, spec = match.group(1), match.group(2).strip().rstrip(",")
            found.append((path.name, name, spec))
            assert SpecifierSet(spec.replace(" ", "")) == wanted[name], (path.name, name, spec)
    # The docs do state the ansible-core range.
    assert any(name == "ansible-core" for _path, name, _spec in found)


def released():
    """version -> set of modules and set of roles changelogs/changelog.yaml lists as new in that release."""
    changes = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())
    out = {}
    for version, release in (changes.get("releases") or {}).items():
        modules = {m["name"] for m in (release.get("modules") or [])}
        roles = {r["name"] for r in ((release.get("objects") or {}).get("role") or [])}
        out[str(version)] = (modules, roles)
    return out


def version_added_of_modules():
    out = {}
    for path in sorted((ROOT / "plugins" / "modules").glob("*.py")):
        text = path.read_text()
        doc = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
        out[path.stem] = str(doc["version_added"])
    return out


def version_added_of_roles():
    out = {}
    for path in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        main = yaml.safe_load(path.read_text())["argument_specs"]["main"]
        out[path.parent.parent.name] = str(main.get("version_added"))
    return out


def renamed_modules():
    """new module name -> the old names meta/runtime.yml redirects to it (a renamed module keeps the version_added
    of the release that shipped it under its old name)."""
    routing = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text()).get("plugin_routing") or {}
    out = {}
    for old, entry in (routing.get("modules") or {}).items():
        target = (entry or {}).get("redirect", "")
        if target.startswith("sparkops.specdec."):
            out.setdefault(target.rsplit(".", 1)[1], set()).add(old)
    return out


def test_version_added_is_the_first_release_that_ships_it():
    """A module's or role's version_added is the release whose changelog lists it (or, for a renamed module, its
    old name) as new, or, for one not released yet, galaxy.yml's version (the next release). No version from the
    future, none from a release that did not ship it."""
    releases = released()
    galaxy = str(yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"])
    renamed = renamed_modules()
    for kind, added, index in (("module", version_added_of_modules(), 0), ("role", version_added_of_roles(), 1)):
        aliases = renamed if kind == "module" else {}
        for name, version in sorted(added.items()):
            names = {name} | aliases.get(name, set())
            listed = sorted(v for v, lists in releases.items() if names & lists[index])
            if version in releases:
                assert listed == [version], (kind, name, version, listed)
            else:
                assert version == galaxy and listed == [], (kind, name, version, galaxy, listed)
        for version, lists in releases.items():
            shipped = set(added) | {old for new in added for old in aliases.get(new, ())}
            assert sorted(lists[index] - shipped) == [], ("listed but absent", kind, version)
