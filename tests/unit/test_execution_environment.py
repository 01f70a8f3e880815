# -*- coding: utf-8 -*-
"""The execution environment (execution-environment.yml, ansible-builder 3) holds what the collection needs.

``ansible-builder create`` writes the build context (offline; building the image needs registries these machines
lack), and ``ansible-builder introspect`` collects the requirements the way the image build does, over this
collection and its galaxy.yml dependencies as installed here. The checks fail when a collection is added to
galaxy.yml but not to the EE's Galaxy requirements, when a requirement of the collection is missing from the EE, or
when the EE's ansible-core range leaves requires_ansible.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import ansible_collections

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILDER = pathlib.Path(sys.executable).parent / "ansible-builder"
# The files the EE definition and the collection's own EE metadata name.
EE_FILES = ("execution-environment.yml", "requirements.txt", "requirements.yml", "bindep.txt", "galaxy.yml",
            "meta/runtime.yml", "meta/execution-environment.yml")
# ansible-builder leaves these out of a collection's requirements (ansible_builder/_target_scripts/introspect.py).
BUILDER_EXCLUDES = {"ansible", "ansible-base", "ansible-core", "python", "pyyaml", "yaml", "json"}


def builder(*args, cwd):
    run = subprocess.run([str(BUILDER)] + list(args), cwd=str(cwd), capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, "ansible-builder %s: %s %s" % (" ".join(args), run.stdout, run.stderr)
    return run.stdout


def pip_lines(path):
    lines = []
    for line in pathlib.Path(path).read_text().splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            lines.append(line)
    return lines


def requirements(lines):
    """name -> specifier string of pip requirement lines."""
    out = {}
    for line in lines:
        req = Requirement(line)
        out[req.name.lower()] = str(req.specifier)
    return out


# The files ansible-builder introspects in a dependency collection (its default paths).
DEPENDENCY_FILES = ("requirements.txt", "bindep.txt", "meta/execution-environment.yml")


def installed_collection(fqcn):
    """The directory of an installed collection (the `ansible` package's, .build/collections), or None."""
    namespace, name = fqcn.split(".")
    for base in ansible_collections.__path__:
        candidate = pathlib.Path(base) / namespace / name
        if (candidate / "MANIFEST.json").is_file() or (candidate / "galaxy.yml").is_file():
            return candidate
    return None


def ee_problems(root, workdir):
    """What the EE built from ``root`` lacks compared with the collection in ``root`` (one line each), and the
    introspection data. Runs ansible-builder create and introspect as the image build would."""
    workdir = pathlib.Path(workdir)
    context = workdir / "context"
    builder("create", "-f", "execution-environment.yml", "-c", str(context), "--output-filename", "Containerfile",
            cwd=root)
    definition = yaml.safe_load((root / "execution-environment.yml").read_text())
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text())
    problems = []

    # Galaxy: the EE installs exactly galaxy.yml's dependencies, with the same version ranges.
    ee_galaxy = yaml.safe_load((context / "_build" / "requirements.yml").read_text()) or {}
    ee_collections = {c["name"]: str(c.get("version", "*")) for c in ee_galaxy.get("collections") or []}
    wanted = {k: str(v) for k, v in (galaxy.get("dependencies") or {}).items()}
    for name, version in sorted(wanted.items()):
        if name not in ee_collections:
            problems.append("galaxy.yml dependency %s is not in the EE's Galaxy requirements" % name)
        elif ee_collections[name] != version:
            problems.append("%s: galaxy.yml wants %s, the EE installs %s" % (name, version, ee_collections[name]))
    for name in sorted(set(ee_collections) - set(wanted)):
        problems.append("the EE installs %s, which galaxy.yml does not list" % name)

    # Introspection over this collection and its dependencies, with the EE's own pip and bindep files.
    tree = workdir / "collections" / "ansible_collections"
    (tree / galaxy["namespace"]).mkdir(parents=True)
    (tree / galaxy["namespace"] / galaxy["name"]).symlink_to(root)
    for name in wanted:
        found = installed_collection(name)
        if found is None:
            problems.append("galaxy.yml dependency %s is not installed here to introspect" % name)
            continue
        (tree / name.split(".")[0]).mkdir(exist_ok=True)
        (tree / name.split(".")[0] / name.split(".")[1]).symlink_to(found)
    build = context / "_build"
    out = builder("introspect", str(workdir / "collections"), "--user-pip", str(build / "requirements.txt"),
                  "--user-bindep", str(build / "bindep.txt"), cwd=workdir)
    data = yaml.safe_load(out[out.index("---"):])
    by_source = {}
    for kind in ("python", "system"):
        for line in data.get(kind) or []:
            requirement, source = (line.split("  # from collection ", 1) + [""])[:2]
            by_source.setdefault((kind, source.strip()), []).append(requirement.strip())
    me = "%s.%s" % (galaxy["namespace"], galaxy["name"])
    user_pip = requirements(by_source.get(("python", "user"), []))
    mine = requirements(by_source.get(("python", me), []))
    declared = {k: v for k, v in requirements(pip_lines(root / "requirements.txt")).items() if k not in BUILDER_EXCLUDES}
    if mine != declared:
        problems.append("introspection of %s found %s, requirements.txt declares %s" % (me, mine, declared))
    for name, spec in sorted(requirements(pip_lines(root / "requirements.txt")).items()):
        if user_pip.get(name) != spec:
            problems.append("requirements.txt %s%s: the EE installs %s" % (name, spec, user_pip.get(name, "nothing")))
    for line in by_source.get(("system", me), []):
        if line not in by_source.get(("system", "user"), []):
            problems.append("bindep.txt %s is not in the EE's system packages" % line)
    for name in wanted:
        found = installed_collection(name)
        # A dependency that declares no requirement files (community.general ships none) has nothing to find.
        declares = found is not None and any((found / f).is_file() for f in DEPENDENCY_FILES)
        if declares and not any(key[1] == name for key in by_source):
            problems.append("introspection found no requirements of %s" % name)

    # ansible-core: the requirements.txt range, inside requires_ansible.
    core = str(definition["dependencies"]["ansible_core"]["package_pip"])
    core_spec = Requirement(core).specifier
    if str(core_spec) != requirements(pip_lines(root / "requirements.txt")).get("ansible-core"):
        problems.append("EE ansible_core %s differs from requirements.txt" % core)
    runtime = yaml.safe_load((root / "meta" / "runtime.yml").read_text())
    requires = SpecifierSet(runtime["requires_ansible"])
    for minor in range(14, 30):
        for version in (Version("2.%d.0" % minor), Version("2.%d.99" % minor)):
            if version in core_spec and version not in requires:
                problems.append("EE ansible_core %s admits %s, outside requires_ansible %s" % (core, version, requires))
    containerfile = (context / "Containerfile").read_text()
    if 'ANSIBLE_INSTALL_REFS="%s ' % core not in containerfile:
        problems.append("the Containerfile does not install %s" % core)
    return problems, by_source


@pytest.fixture(scope="module")
def introspected(tmp_path_factory):
    return ee_problems(ROOT, tmp_path_factory.mktemp("ee"))


def test_execution_environment_matches_the_collection(introspected):
    problems, by_source = introspected
    assert problems == []
    # The dependencies' own requirements reach the EE (community.docker needs the Docker SDK for Python).
    assert "docker" in by_source[("python", "community.docker")]


def test_the_ee_installs_no_ansible_package(introspected):
    """The collections come from Galaxy (requirements.yml): the whole `ansible` package (hundreds of collections)
    is not pip-installed on top of them, neither by the EE's own requirements nor by a collection's."""
    by_source = introspected[1]
    packages = {Requirement(line).name.lower() for (kind, _source), lines in by_source.items() if kind == "python"
                for line in lines}
    assert "ansible" not in packages
    assert "ansible" not in requirements(pip_lines(ROOT / "requirements.txt"))
    definition = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    assert "ansible" not in requirements(pip_lines(ROOT / definition["dependencies"]["python"]))
    assert definition["dependencies"]["galaxy"] == "requirements.yml"


def test_context_copies_the_collections_files(tmp_path):
    builder("create", "-f", "execution-environment.yml", "-c", str(tmp_path / "c"), cwd=ROOT)
    for name in ("requirements.txt", "requirements.yml", "bindep.txt"):
        assert (tmp_path / "c" / "_build" / name).read_text() == (ROOT / name).read_text(), name


def copy_collection(tmp_path):
    root = tmp_path / "collection"
    for name in EE_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    return root


def test_a_dependency_added_to_galaxy_yml_only_fails(tmp_path):
    root = copy_collection(tmp_path)
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text())
    galaxy["dependencies"]["ansible.utils"] = ">=5.0.0,<7.0.0"
    (root / "galaxy.yml").write_text(yaml.safe_dump(galaxy))
    problems = ee_problems(root, tmp_path / "work")[0]
    assert "galaxy.yml dependency ansible.utils is not in the EE's Galaxy requirements" in problems


def test_a_python_requirement_the_ee_lacks_fails(tmp_path):
    root = copy_collection(tmp_path)
    definition = yaml.safe_load((root / "execution-environment.yml").read_text())
    core = [line for line in pip_lines(root / "requirements.txt") if Requirement(line).name == "ansible-core"]
    (root / "ee-python.txt").write_text("\n".join(core) + "\n")
    definition["dependencies"]["python"] = "ee-python.txt"
    (root / "execution-environment.yml").write_text(yaml.safe_dump(definition))
    problems = ee_problems(root, tmp_path / "work")[0]
    assert any(p.startswith("requirements.txt matplotlib>=3.8: the EE installs nothing") for p in problems), problems


def test_dependency_ranges_follow_the_automation_hub_policy():
    """Every collection dependency has a lower and an upper bound (no '*'), the same in requirements.yml."""
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    for name, version in (galaxy.get("dependencies") or {}).items():
        spec = SpecifierSet(str(version))
        operators = {s.operator for s in spec}
        assert str(version) != "*" and operators & {">=", ">"} and operators & {"<", "<="}, (name, version)
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    assert Version("2.19.0") in SpecifierSet(runtime["requires_ansible"])
