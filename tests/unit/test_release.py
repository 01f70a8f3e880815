# -*- coding: utf-8 -*-
"""The release artifact: built from a copy of the checkout salted with the leftovers a checkout collects, installed
(a real copy, no symlink) with ``ansible-galaxy collection install --offline``, and used from there only.

- the artifact holds the collection's source files and nothing else (no .ansible/, .pytest_cache/, .venv, .build,
  .lab, reports, caches);
- every playbook passes ``--syntax-check`` by its FQCN from the installed copy;
- ``ansible-doc`` renders every module, role and documented filter of the installed copy (UNDOCUMENTED_FILTERS is
  the explicit list of filters without documentation yet);
- ``sparkops.specdec.preflight_inventory`` (the plan over a whole inventory; it contacts no host) runs to the end
  from the installed copy and reports the deployment it checked.

The install resolves galaxy.yml's dependencies offline against the collections installed here (the ``ansible``
package's), so a dependency range that excludes them fails here.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
FQCN = "%s.%s" % (GALAXY["namespace"], GALAXY["name"])

# What a checkout collects that must never ship: tools' caches, the venv, the build and lab trees, reports written
# by playbook runs (in the checkout and next to the playbooks), older artifacts, byte code.
LEFTOVERS = (
    ".ansible/collections/ansible_collections/sparkops/specdec/galaxy.yml",
    ".pytest_cache/v/cache/lastfailed",
    ".venv/bin/python",
    ".build/collections/ansible_collections/sparkops/specdec/README.md",
    ".lab/hub/hf_token",
    ".lab/images/engine.tar",
    ".cache/pip/http/x",
    "specdec-status.json",
    "preflight-report.json",
    "specdec-fleet.json",
    "playbooks/specdec-status.json",
    "playbooks/preflight-report.json",
    "tests/output/junit/python3.11-units.xml",
    "plugins/modules/__pycache__/hf_download.cpython-311.pyc",
    "roles/specdec_server/tasks/main.yml.swp",
    "roles/specdec_server/tasks/main.yml~",
    "sparkops-specdec-0.1.0.tar.gz",
    "molecule/two_nodes/.molecule/state.yml",
)

# Filters without documentation yet (ansible-doc -t filter shows none): none today, every filter has its
# plugins/filter/<name>.yml. A filter added without docs must be listed here with the reason, or documented.
UNDOCUMENTED_FILTERS = {}

# A two-Spark inventory whose settings the plan accepts (TEST-NET-1 addresses; no host is contacted).
INVENTORY = {
    "all": {
        "vars": {"ansible_user": "nvidia"},
        "children": {"spark_nodes": {"children": {
            "spark_head": {"hosts": {"spark-a": {"ansible_host": "192.0.2.21"}}},
            "spark_workers": {"hosts": {"spark-b": {"ansible_host": "192.0.2.22"}}},
        }}},
    },
}


def source_files(root):
    """The checkout's files as git knows them (tracked, and new ones not ignored), that exist."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=str(root),
                         capture_output=True, check=True).stdout.decode()
    return sorted(f for f in out.split("\0") if f and (root / f).is_file())


def run(args, env, cwd, timeout=300):
    proc = subprocess.run([str(a) for a in args], env=env, cwd=str(cwd), capture_output=True, text=True,
                          timeout=timeout, check=False)
    return proc


def installed_env(tmp, collections):
    """An environment that sees the installed copy and the ansible package's collections, not this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHONPATH"))}
    cfg = tmp / "ansible.cfg"
    cfg.write_text("[defaults]\ncollections_path = %s\n" % collections)
    env.update(ANSIBLE_CONFIG=str(cfg), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOCAL_TEMP=str(tmp),
               ANSIBLE_HOME=str(tmp / "home"), PATH="%s:%s" % (BIN, env.get("PATH", "")))
    return env


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """Build the artifact from a salted copy, install it offline, return what the tests need."""
    tmp = tmp_path_factory.mktemp("release")
    copy = tmp / "checkout"
    files = source_files(ROOT)
    for name in files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes((ROOT / name).read_bytes())
    for name in LEFTOVERS:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text("leftover\n")
    collections = tmp / "collections"
    env = installed_env(tmp, collections)
    built = run([BIN / "ansible-galaxy", "collection", "build", "--output-path", tmp / "dist", copy], env, tmp)
    assert built.returncode == 0, built.stdout + built.stderr
    (artifact,) = (tmp / "dist").glob("*.tar.gz")
    installed = run([BIN / "ansible-galaxy", "collection", "install", "--offline", "-p", collections, artifact],
                    env, tmp)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    path = collections / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    return {"tmp": tmp, "env": env, "artifact": artifact, "path": path, "files": files}


def test_the_artifact_holds_the_source_and_no_leftovers(release):
    with tarfile.open(release["artifact"]) as tar:
        members = {m.name for m in tar.getmembers() if m.isfile()}
    generated = {"MANIFEST.json", "FILES.json"}
    assert sorted(members & set(LEFTOVERS)) == []
    assert sorted(members - set(release["files"]) - generated) == []
    shipped = [f for f in release["files"] if f.startswith(("plugins/", "roles/", "playbooks/", "meta/"))
               or f in ("README.md", "changelogs/changelog.yaml", "requirements.txt", "requirements.yml", "bindep.txt")]
    assert sorted(set(shipped) - members) == []
    # Test tooling stays in the checkout.
    assert sorted(m for m in members if m.startswith(("molecule/", "tests/lab/", "tests/unit/", ".ci/"))) == []


def test_installed_copy_is_a_copy_and_the_only_one_seen(release):
    path = release["path"]
    assert not path.is_symlink() and (path / "MANIFEST.json").is_file()
    listed = run([BIN / "ansible-galaxy", "collection", "list", FQCN, "--format", "json"], release["env"],
                 release["tmp"])
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)
    assert list(found) == [str(path.parent.parent)]
    assert found[str(path.parent.parent)][FQCN]["version"] == str(GALAXY["version"])


def test_every_installed_playbook_passes_syntax_check(release):
    names = sorted(p.stem for p in (release["path"] / "playbooks").glob("*.yml"))
    assert names == sorted(pathlib.Path(f).stem for f in release["files"]
                           if f.startswith("playbooks/") and f.count("/") == 1 and f.endswith(".yml"))
    inventory = release["tmp"] / "hosts.yml"
    inventory.write_text(yaml.safe_dump(INVENTORY))
    for name in names:
        checked = run([BIN / "ansible-playbook", "--syntax-check", "-i", inventory, "%s.%s" % (FQCN, name)],
                      release["env"], release["tmp"])
        assert checked.returncode == 0, (name, checked.stdout, checked.stderr)


def ansible_doc(release, plugin_type, names):
    shown = run([BIN / "ansible-doc", "-t", plugin_type, "--json"] + ["%s.%s" % (FQCN, n) for n in names],
                release["env"], release["tmp"])
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_ansible_doc_renders_every_module_and_role(release):
    path = release["path"]
    modules = sorted(p.stem for p in (path / "plugins" / "modules").glob("*.py") if not p.stem.startswith("_"))
    # Every action plugin is documented by its module of the same name.
    actions = sorted(p.stem for p in (path / "plugins" / "action").glob("*.py") if not p.stem.startswith("_"))
    assert sorted(set(actions) - set(modules)) == []
    docs = ansible_doc(release, "module", modules)
    assert sorted(docs) == ["%s.%s" % (FQCN, m) for m in modules]
    for name, doc in docs.items():
        assert doc["doc"]["short_description"] and doc["doc"]["version_added"], name
        assert doc["doc"]["collection"] == FQCN, name
    roles = sorted(p.name for p in (path / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())
    assert roles == sorted(p.name for p in (path / "roles").iterdir() if p.is_dir())
    docs = ansible_doc(release, "role", roles)
    assert sorted(docs) == ["%s.%s" % (FQCN, r) for r in roles]
    for name, doc in docs.items():
        assert doc["entry_points"]["main"]["short_description"], name


def source_filters():
    """Every filter name the collection's filter plugins define (as loaded from the checkout)."""
    import importlib
    names = set()
    for path in sorted((ROOT / "plugins" / "filter").glob("*.py")):
        module = importlib.import_module("ansible_collections.sparkops.specdec.plugins.filter.%s" % path.stem)
        names.update(module.FilterModule().filters())
    return names


def test_ansible_doc_renders_every_documented_filter(release):
    listed = run([BIN / "ansible-doc", "-t", "filter", "-l", FQCN, "--json"], release["env"], release["tmp"])
    assert listed.returncode == 0, listed.stderr
    filters = {name.split(".")[-1]: summary for name, summary in json.loads(listed.stdout).items()}
    assert sorted(filters) == sorted(source_filters())
    assert sorted(set(UNDOCUMENTED_FILTERS) - set(filters)) == [], "listed as undocumented but absent"
    documented = sorted(n for n in filters if n not in UNDOCUMENTED_FILTERS)
    # A filter that has docs now leaves UNDOCUMENTED_FILTERS.
    assert sorted(n for n in UNDOCUMENTED_FILTERS if filters[n] != "UNDOCUMENTED") == []
    assert sorted(n for n in documented if filters[n] == "UNDOCUMENTED") == []
    if documented:
        docs = ansible_doc(release, "filter", documented)
        assert sorted(docs) == ["%s.%s" % (FQCN, n) for n in documented]
        for name, doc in docs.items():
            assert doc["doc"]["short_description"] and doc["doc"]["version_added"], name


def test_preflight_inventory_runs_to_the_end_from_the_installed_copy(release):
    inventory = release["tmp"] / "hosts.yml"
    inventory.write_text(yaml.safe_dump(INVENTORY))
    env = dict(release["env"], ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_SHOW_CUSTOM_STATS="1")
    ran = run([BIN / "ansible-playbook", "-i", inventory, "%s.preflight_inventory" % FQCN], env, release["tmp"])
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
    result = json.loads(ran.stdout)
    assert {h: (s["failures"], s["unreachable"]) for h, s in result["stats"].items()} == {
        "spark-a": (0, 0), "spark-b": (0, 0)}
    stats = result["global_custom_stats"]["specdec_inventory"]
    expected = {"deployment": "spark-a", "head": "spark-a", "members": ["spark-a", "spark-b"], "problems": 0,
                "topology": "two_sparks"}
    assert stats == {"spark-a": expected, "spark-b": expected}
    # The plan (the installed copy's action plugin) checked the pair.
    plans = [r for p in result["plays"] for t in p["tasks"] for r in t["hosts"].values()
             if r.get("action") == "%s.specdec_plan" % FQCN]
    assert plans and all(r["deployment"]["members"] == ["spark-a", "spark-b"] for r in plans)
