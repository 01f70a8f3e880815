# -*- coding: utf-8 -*-
# Unit tests for plugins/plugin_utils/_wheels.py and the filters of plugins/filter/wheels.py: an aarch64 node (DGX
# Spark) gets aarch64 wheels, an x86_64 node (the lab) x86_64 ones, pure-Python wheels both; the controller's real
# pip, run with the argv the role runs, picks the node's wheels from a local directory of fake wheels (--no-index:
# nothing leaves this machine).

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.filter import wheels as wheel_filters
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _wheels

SPARK = _wheels.wheel_target("aarch64", "3.12.3", "glibc 2.39")   # DGX OS (Ubuntu 24.04)
LAB = _wheels.wheel_target("x86_64", "3.11.2", "glibc 2.36")      # the lab's Debian 12 nodes
REQ = "huggingface_hub==2.4.0"

# The names of real wheels of huggingface_hub 2.4.0's dependency set, for both architectures.
MIXED = [
    "huggingface_hub-2.4.0-py3-none-any.whl",
    "pip-26.3-py3-none-any.whl",
    "hf_xet-1.8.0-cp38-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "hf_xet-1.8.0-cp38-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
    "pyyaml-6.0.3-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl",
    "pyyaml-6.0.3-cp312-cp312-manylinux2014_aarch64.manylinux_2_17_aarch64.manylinux_2_28_aarch64.whl",
    "pyyaml-6.0.3-cp312-cp312-macosx_11_0_arm64.whl",
    "pyyaml-6.0.3-cp312-cp312-musllinux_1_2_aarch64.whl",
    "tqdm-4.70.1-py3-none-any.whl",
]


def test_spark_target_is_aarch64_manylinux_up_to_its_glibc():
    assert SPARK["arch"] == "aarch64" and SPARK["abi"] == "cp312" and SPARK["python_version"] == "3.12"
    assert SPARK["key"] == "cp312-manylinux_2_39_aarch64"
    assert "manylinux_2_39_aarch64" in SPARK["platforms"] and "manylinux2014_aarch64" in SPARK["platforms"]
    assert "manylinux_2_40_aarch64" not in SPARK["platforms"]       # never newer than the node's glibc
    assert not [p for p in SPARK["platforms"] if not p.endswith("_aarch64")]


def test_lab_target_is_x86_64():
    assert LAB["key"] == "cp311-manylinux_2_36_x86_64"
    assert not [p for p in LAB["platforms"] if not p.endswith("_x86_64")]
    assert "manylinux1_x86_64" in LAB["platforms"]


@pytest.mark.parametrize("alias, arch", [("arm64", "aarch64"), ("AARCH64", "aarch64"), ("amd64", "x86_64")])
def test_architecture_aliases(alias, arch):
    assert _wheels.wheel_target(alias, "3.12", "2.39")["arch"] == arch


def test_aarch64_node_gets_aarch64_and_pure_python_wheels():
    got = _wheels.select_wheels(MIXED, SPARK, REQ)
    assert got["wheels"] == sorted([
        "huggingface_hub-2.4.0-py3-none-any.whl", "pip-26.3-py3-none-any.whl", "tqdm-4.70.1-py3-none-any.whl",
        "hf_xet-1.8.0-cp38-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
        "pyyaml-6.0.3-cp312-cp312-manylinux2014_aarch64.manylinux_2_17_aarch64.manylinux_2_28_aarch64.whl"])
    assert got["pip"] == "pip-26.3-py3-none-any.whl"
    assert not [w for w in got["wheels"] if "x86_64" in w or "macosx" in w or "musllinux" in w]


def test_x86_64_node_gets_x86_64_and_pure_python_wheels():
    got = _wheels.select_wheels(MIXED, LAB, REQ)
    assert got["wheels"] == sorted([
        "huggingface_hub-2.4.0-py3-none-any.whl", "pip-26.3-py3-none-any.whl", "tqdm-4.70.1-py3-none-any.whl",
        "hf_xet-1.8.0-cp38-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "pyyaml-6.0.3-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl"])
    assert not [w for w in got["wheels"] if "aarch64" in w]


@pytest.mark.parametrize("name, fits", [
    ("pkg-1-cp312-cp312-manylinux_2_39_aarch64.whl", True),
    ("pkg-1-cp312-cp312-manylinux_2_40_aarch64.whl", False),    # needs a newer glibc than the Spark's
    ("pkg-1-cp311-cp311-manylinux_2_17_aarch64.whl", False),    # another CPython ABI
    ("pkg-1-cp313-abi3-manylinux_2_17_aarch64.whl", False),     # stable ABI of a newer Python
    ("pkg-1-cp39-abi3-manylinux_2_17_aarch64.whl", True),
    ("pkg-1-py2.py3-none-any.whl", True),
    ("pkg-1-py313-none-any.whl", False),
    ("pkg-1-pp310-pypy310_pp73-manylinux_2_17_aarch64.whl", False),
    ("not-a-wheel.tar.gz", False),
])
def test_wheel_compatibility_on_a_spark(name, fits):
    assert _wheels.wheel_compatible(name, SPARK) is fits


def test_missing_wheels_are_one_line_naming_the_setting_and_the_fix():
    with pytest.raises(_wheels.WheelError) as err:
        _wheels.select_wheels([w for w in MIXED if not w.startswith("huggingface_hub")], SPARK, REQ,
                              directory="/srv/wheels")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("specdec_server_wheel_dir: /srv/wheels holds no wheel of huggingface_hub==2.4.0")
    assert "aarch64" in msg and "pip download" in msg
    with pytest.raises(_wheels.WheelError, match="no wheel of pip"):
        _wheels.select_wheels([w for w in MIXED if not w.startswith("pip")], SPARK, REQ)
    # x86_64 wheels only: nothing for the Spark's binary dependencies is no error here (pip on the node reports a
    # missing dependency), but huggingface_hub and pip are checked.
    with pytest.raises(_wheels.WheelError, match="holds no wheel of huggingface_hub==2.5.0"):
        _wheels.select_wheels(MIXED, SPARK, "huggingface_hub==2.5.0")


@pytest.mark.parametrize("requirement", ["huggingface_hub>=1.0,<3", "requests==2.0", "huggingface_hub", ""])
def test_requirement_must_be_an_exact_pin(requirement):
    with pytest.raises(_wheels.WheelError, match="^specdec_server_hf_hub_requirement: .* is not an exact pin"):
        _wheels.pinned_version(requirement)
    assert _wheels.pinned_version("Huggingface-Hub == 2.4.0") == "2.4.0"


@pytest.mark.parametrize("machine, python, libc, problem", [
    ("ppc64le", "3.12", "glibc 2.39", "ansible_facts.architecture: 'ppc64le' is not a node architecture"),
    ("aarch64", "3.8.10", "glibc 2.39", "ansible_facts.python.version: Python 3.8 on the node is older"),
    ("aarch64", "3.12", "", "getconf GNU_LIBC_VERSION: the node reports 'nothing', not glibc"),
    ("aarch64", "3.12", "glibc 2.12", "getconf GNU_LIBC_VERSION: glibc 2.12 on the node is older than 2.17"),
])
def test_unsupported_nodes(machine, python, libc, problem):
    with pytest.raises(_wheels.WheelError) as err:
        _wheels.wheel_target(machine, python, libc)
    assert str(err.value).startswith(problem) and "\n" not in str(err.value)


def test_filter_reads_the_facts_and_raises_filter_errors():
    facts = {"architecture": "aarch64", "python": {"version": {"major": 3, "minor": 12, "micro": 3},
                                                   "executable": "/usr/bin/python3.12"}}
    target = wheel_filters.node_wheel_target(facts, "glibc 2.39", REQ)
    assert target["key"] == "cp312-manylinux_2_39_aarch64" and target["version"] == "2.4.0"
    assert target["interpreter"] == "/usr/bin/python3.12"
    with pytest.raises(AnsibleFilterError, match="^ansible_facts.architecture"):
        wheel_filters.node_wheel_target(dict(facts, architecture="s390x"), "glibc 2.39", REQ)
    with pytest.raises(AnsibleFilterError, match="^specdec_server_wheel_dir: "):
        wheel_filters.node_wheels(["tqdm-4.70.1-py3-none-any.whl"], target, REQ)


def test_download_argv_names_only_the_nodes_platform():
    argv = _wheels.pip_download_argv(SPARK, "/usr/bin/python3", REQ, "/cache/d")
    assert argv[:4] == ["/usr/bin/python3", "-m", "pip", "download"]
    assert "--only-binary=:all:" in argv and argv[argv.index("--python-version") + 1] == "3.12"
    assert argv[argv.index("--abi") + 1] == "cp312" and argv[argv.index("--implementation") + 1] == "cp"
    platforms = [argv[i + 1] for i, a in enumerate(argv) if a == "--platform"]
    assert platforms == SPARK["platforms"]
    assert argv[-2:] == [REQ, "pip"] and argv[argv.index("--dest") + 1] == "/cache/d"


# --------------------------------------------------------------------- the controller's real pip, offline
def _fake_wheel(directory, filename, requires=()):
    """A minimal valid wheel (METADATA, WHEEL, RECORD) marked as a sparkops test fake."""
    name, version = filename.split("-")[:2]
    tags = filename[:-4].split("-")[-3:]
    info = "%s-%s.dist-info" % (name, version)
    files = {
        "%s/__init__.py" % name: b"# sparkops unit-test fake wheel\n",
        "%s/METADATA" % info: ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: sparkops unit-test fake\n%s"
                               % (name, version, "".join("Requires-Dist: %s\n" % r for r in requires))).encode(),
        "%s/WHEEL" % info: ("Wheel-Version: 1.0\nGenerator: sparkops-test\nRoot-Is-Purelib: false\nTag: %s\n"
                            % "-".join(tags)).encode(),
    }
    record = []
    path = os.path.join(directory, filename)
    with zipfile.ZipFile(path, "w") as zf:
        for arc, data in files.items():
            zf.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
        record.append("%s/RECORD,," % info)
        zf.writestr("%s/RECORD" % info, "\n".join(record) + "\n")
    return path


@pytest.mark.parametrize("target, arch, other", [(SPARK, "aarch64", "x86_64"), (LAB, "x86_64", "aarch64")])
def test_real_pip_download_picks_the_nodes_architecture(tmp_path, target, arch, other):
    index = tmp_path / "index"
    index.mkdir()
    cp = target["abi"]
    _fake_wheel(str(index), "huggingface_hub-2.4.0-py3-none-any.whl", requires=["fakebin==1.0"])
    _fake_wheel(str(index), "pip-26.3-py3-none-any.whl")
    for machine in (arch, other):
        _fake_wheel(str(index), "fakebin-1.0-%s-%s-manylinux_2_17_%s.whl" % (cp, cp, machine))
    # The same wheel for a glibc newer than the node's: never chosen.
    _fake_wheel(str(index), "fakebin-1.0.post1-%s-%s-manylinux_2_99_%s.whl" % (cp, cp, arch))
    dest = tmp_path / "dest"
    argv = _wheels.pip_download_argv(target, sys.executable, "huggingface_hub==2.4.0", str(dest))
    argv[4:4] = ["--no-index", "--find-links", str(index), "--no-cache-dir"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, PIP_CONFIG_FILE=os.devnull))
    assert proc.returncode == 0, proc.stderr
    got = sorted(os.listdir(str(dest)))
    assert got == sorted(["huggingface_hub-2.4.0-py3-none-any.whl", "pip-26.3-py3-none-any.whl",
                          "fakebin-1.0-%s-%s-manylinux_2_17_%s.whl" % (cp, cp, arch)])
    assert _wheels.select_wheels(got, target, REQ)["wheels"] == got
