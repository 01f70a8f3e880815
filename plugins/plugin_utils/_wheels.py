# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE: which Python wheels a node gets (no Ansible, no I/O). Not a public API of sparkops.specdec.

The Python dependencies of the collection's node-side modules (``huggingface_hub`` for ``hf_download``) reach a
node as wheels fetched on the controller (``pip download`` once into a cache, or a directory the user fills on an
air-gapped controller) and installed on the node with ``pip install --no-index --find-links``: the node needs no
route to a package index. The wheels must be the node's, not the controller's: a DGX Spark is aarch64 (DGX OS,
Ubuntu 24.04, glibc 2.39), the lab's simulated Sparks are x86-64 (Debian 12, glibc 2.36).

* ``wheel_target(machine, python_version, libc)``: the node's wheel platform from its facts: the architecture
  (``ansible_facts.architecture``), the Python that runs the modules (``ansible_facts.python.version``) and the C
  library (``getconf GNU_LIBC_VERSION``). Only CPython on glibc Linux, x86_64 or aarch64: manylinux tags from
  manylinux2014 (glibc 2.17) up to the node's glibc, so a wheel built for a newer glibc than the node's is never
  chosen.
* ``pinned_version(requirement)``: the exact version of ``huggingface_hub==X`` (the controller caches once per
  version: a range would ship whatever was newest at the first fetch).
* ``pip_download_argv(target, python, requirement, dest)``: the controller's ``pip download`` for that platform.
* ``select_wheels(names, target, requirement, setting)``: the wheels of a directory the node can install (a user
  directory may hold several platforms: only the node's are copied), and the one-line error when the directory
  lacks ``huggingface_hub`` of the pinned version or pip itself (the node runs pip from its wheel).

Every refusal raises ``WheelError`` with one line naming the setting or fact, the problem and the fix.
"""

from __future__ import annotations

import re

# pip itself is shipped too: the node runs ``<venv python> <pip wheel>/pip install`` (pip's __main__ supports
# running from its wheel), so neither python3-pip nor python3-venv's ensurepip is needed on the node.
PIP = "pip"
ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
MIN_GLIBC = (2, 17)   # manylinux2014, the oldest manylinux tag pip still offers for both architectures
MIN_PYTHON = (3, 9)
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)"
                    r"-(?P<plat>[^-]+)\.whl$")
_PIN = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(?P<version>[0-9][0-9A-Za-z.+!-]*)\s*$")


class WheelError(ValueError):
    """A node or a wheel directory the collection cannot serve; the message is one line with the fix."""


def _canon(name):
    return re.sub(r"[-_.]+", "_", str(name).lower())


def normalize_arch(machine):
    arch = ARCH_ALIASES.get(str(machine or "").strip().lower())
    if arch is None:
        raise WheelError("ansible_facts.architecture: %r is not a node architecture sparkops.specdec ships wheels "
                         "for; a DGX Spark is aarch64 (x86_64 is supported for test hosts)." % (machine,))
    return arch


def _python(version):
    match = re.match(r"^\s*(\d+)\.(\d+)", str(version or ""))
    if not match:
        raise WheelError("ansible_facts.python.version: %r is not a Python version; run the role with facts of the "
                         "node's python3 (ansible.builtin.setup)." % (version,))
    major, minor = int(match.group(1)), int(match.group(2))
    if (major, minor) < MIN_PYTHON:
        raise WheelError("ansible_facts.python.version: Python %d.%d on the node is older than %d.%d, which "
                         "huggingface_hub needs; point ansible_python_interpreter at a newer python3 on the node."
                         % (major, minor, MIN_PYTHON[0], MIN_PYTHON[1]))
    return major, minor


def _glibc(libc):
    text = str(libc or "").strip()
    match = re.match(r"^(?:glibc\s+)?(\d+)\.(\d+)", text, re.IGNORECASE)
    if not match:
        raise WheelError("getconf GNU_LIBC_VERSION: the node reports %r, not glibc; manylinux wheels need a glibc "
                         "Linux such as DGX OS (Ubuntu 24.04)." % (text or "nothing",))
    version = (int(match.group(1)), int(match.group(2)))
    if version < MIN_GLIBC:
        raise WheelError("getconf GNU_LIBC_VERSION: glibc %d.%d on the node is older than %d.%d (manylinux2014); "
                         "the node's OS is too old for the shipped wheels." % (version + MIN_GLIBC))
    return version


def wheel_target(machine, python_version, libc):
    """The node's wheel platform: arch, python ``X.Y``, abi ``cpXY``, manylinux platform tags and a cache key."""
    arch = normalize_arch(machine)
    major, minor = _python(python_version)
    glibc = _glibc(libc)
    platforms = ["manylinux_%d_%d_%s" % (glibc[0], m, arch) for m in range(glibc[1], MIN_GLIBC[1] - 1, -1)]
    # The legacy aliases of the same glibc floors (PEP 600): manylinux2014 = 2.17, manylinux2010 = 2.12 and
    # manylinux1 = 2.5 (the last two exist for x86_64 only).
    platforms.append("manylinux2014_%s" % arch)
    if arch == "x86_64":
        platforms += ["manylinux_2_12_x86_64", "manylinux2010_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64"]
    return {
        "arch": arch,
        "python_version": "%d.%d" % (major, minor),
        "abi": "cp%d%d" % (major, minor),
        "implementation": "cp",
        "glibc": "%d.%d" % glibc,
        "platforms": platforms,
        "key": "cp%d%d-manylinux_%d_%d_%s" % (major, minor, glibc[0], glibc[1], arch),
    }


def pinned_version(requirement, setting="specdec_server_hf_hub_requirement", package="huggingface_hub"):
    match = _PIN.match(str(requirement or ""))
    if not match or _canon(match.group("name")) != _canon(package):
        raise WheelError("%s: %r is not an exact pin of %s; set e.g. \"%s==2.4.0\" (the controller ships the "
                         "wheels of exactly that version to the nodes)." % (setting, requirement, package, package))
    return match.group("version")


def pip_download_argv(target, python, requirement, dest):
    """``pip download`` on the controller of the requirement (and pip itself) for the node's platform only."""
    argv = [python, "-m", "pip", "download", "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
            "--only-binary=:all:", "--implementation", target["implementation"],
            "--python-version", target["python_version"], "--abi", target["abi"]]
    for platform in target["platforms"]:
        argv += ["--platform", platform]
    return argv + ["--dest", dest, requirement, PIP]


def _version_tuple(tag):
    """'cp312' / 'py311' / 'py3' -> (3, 12) / (3, 11) / (3,)."""
    digits = tag[2:]
    if not digits.isdigit():
        return None
    return (int(digits[0]),) if len(digits) == 1 else (int(digits[0]), int(digits[1:]))


def wheel_compatible(filename, target):
    """Whether the node of ``target`` can install this wheel (pure-Python wheels fit every node)."""
    match = _WHEEL.match(filename)
    if not match:
        return False
    node = tuple(int(p) for p in target["python_version"].split("."))
    platforms = set(target["platforms"]) | {"any"}
    if not set(match.group("plat").split(".")) & platforms:
        return False
    for py in match.group("py").split("."):
        version = _version_tuple(py)
        if version is None or version[0] != node[0]:
            continue
        for abi in match.group("abi").split("."):
            if py.startswith("py") and abi == "none" and (len(version) == 1 or version <= node):
                return True
            if py.startswith("cp") and abi == target["abi"] and version == node:
                return True
            if py.startswith("cp") and abi in ("abi3", "none") and len(version) == 2 and version <= node:
                return True
    return False


def wheel_name(filename):
    match = _WHEEL.match(filename)
    return (_canon(match.group("name")), match.group("version")) if match else (None, None)


def select_wheels(names, target, requirement, setting="specdec_server_wheel_dir", directory=""):
    """The node's wheels among ``names`` (file names of a directory on the controller), sorted.

    Returns ``{"wheels": [...], "skipped": [...], "pip": <pip wheel>}``; raises when huggingface_hub of the pinned
    version or pip has no wheel for the node's platform there.
    """
    version = pinned_version(requirement)
    names = sorted({str(n).rsplit("/", 1)[-1] for n in names or []})
    wheels = [n for n in names if n.endswith(".whl") and wheel_compatible(n, target)]
    skipped = [n for n in names if n.endswith(".whl") and n not in wheels]
    have = {wheel_name(n): n for n in wheels}
    pips = sorted((n for n in wheels if wheel_name(n)[0] == PIP), reverse=True)
    missing = []
    if ("huggingface_hub", version) not in have:
        missing.append("huggingface_hub==%s" % version)
    if not pips:
        missing.append(PIP)
    if missing:
        raise WheelError(
            "%s: %s holds no wheel of %s for the node (%s, Python %s, glibc %s); fill it on a machine with PyPI "
            "access: pip download --only-binary=:all: --implementation cp --python-version %s --platform "
            "manylinux2014_%s -d DIR \"huggingface_hub==%s\" pip" % (
                setting, directory or "the wheel directory", " and ".join(missing), target["arch"],
                target["python_version"], target["glibc"], target["python_version"], target["arch"], version))
    return {"wheels": wheels, "skipped": skipped, "pip": pips[0]}
