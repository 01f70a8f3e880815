# -*- coding: utf-8 -*-
# Unit tests for the decision loop of the action sparkops.specdec.engine_sshd_image (plan_with_probes): which images
# it probes, in which order, and what it decides from the docker image inspect of the image and its derived one.
# (Moved here with the filters trtllm_sshd_image / trtllm_sshd_image_name the action replaces.)

from __future__ import annotations

import pytest

from ansible_collections.sparkops.specdec.plugins.action import engine_sshd_image
from ansible_collections.sparkops.specdec.plugins.module_utils import _container

SSHD = {"multinode": True, "image": "sparkops-lab/trtllm-standin:1.3.0rc12-nosshd", "sshd_image": "", "sshd_build": False}
DERIVED = "sparkops-lab/trtllm-standin:1.3.0rc12-nosshd-sparkops-sshd"
BASE = {"Id": "sha256:nosshd", "Config": {"Labels": {}}}
OURS = {"Id": "sha256:d", "Config": {"Labels": {"io.sparkops.specdec.sshd": "/usr/sbin/sshd",
                                                "io.sparkops.specdec.sshd-base": "sha256:nosshd"}}}


class Prober(object):
    """A docker_container (detach: false) stand-in: exit status 0 for the images with sshd, 3 for the others."""

    def __init__(self, with_sshd=()):
        self.with_sshd = set(with_sshd)
        self.calls = []

    def __call__(self, image, command):
        self.calls.append((image, list(command)))
        has = image in self.with_sshd
        return {"failed": not has, "status": 0 if has else 3, "container": {"Output": "sshd=yes\n" if has else "sshd=no\n"}}


def test_a_base_without_sshd_is_probed_once_then_built():
    prober = Prober()
    plan, probes = engine_sshd_image.plan_with_probes(dict(SSHD, sshd_build=True), BASE, None, prober)
    assert (plan["image"], plan["build"], plan["probe"]) == (DERIVED, True, "")
    assert probes == {SSHD["image"]: False}
    assert prober.calls == [(SSHD["image"], ["/bin/sh", "-c", _container.SSHD_PROBE])]
    assert "FROM " + SSHD["image"] in plan["dockerfile"]


def test_our_derived_image_of_this_base_is_used_without_a_probe():
    prober = Prober()
    plan, probes = engine_sshd_image.plan_with_probes(SSHD, BASE, OURS, prober)
    assert (plan["image"], plan["build"], probes, prober.calls) == (DERIVED, False, {}, [])


def test_a_base_with_sshd_runs_as_is():
    prober = Prober(with_sshd=[SSHD["image"]])
    plan, probes = engine_sshd_image.plan_with_probes(SSHD, BASE, None, prober)
    assert (plan["image"], plan["build"], probes) == (SSHD["image"], False, {SSHD["image"]: True})


def test_a_named_image_is_probed_first_and_used_when_it_has_sshd():
    named = dict(SSHD, sshd_image="sparkops-lab/trtllm-standin:1.3.0rc12")
    prober = Prober(with_sshd=["sparkops-lab/trtllm-standin:1.3.0rc12"])
    plan, probes = engine_sshd_image.plan_with_probes(named, BASE, {"Id": "sha256:n", "Config": {}}, prober)
    assert plan["image"] == "sparkops-lab/trtllm-standin:1.3.0rc12"
    assert [image for image, _argv in prober.calls] == ["sparkops-lab/trtllm-standin:1.3.0rc12"]
    assert probes == {"sparkops-lab/trtllm-standin:1.3.0rc12": True}


def test_no_sshd_and_no_build_is_the_one_line_refusal():
    with pytest.raises(_container.ContainerError, match="has no /usr/sbin/sshd and trtllm_container_sshd_build is false"):
        engine_sshd_image.plan_with_probes(SSHD, BASE, None, Prober())


def test_single_node_and_check_mode_without_the_image_probe_nothing():
    prober = Prober()
    assert engine_sshd_image.plan_with_probes(dict(SSHD, multinode=False), None, None, prober)[0]["image"] == SSHD["image"]
    plan, probes = engine_sshd_image.plan_with_probes(SSHD, None, None, prober)
    assert (plan["image"], probes, prober.calls) == (SSHD["image"], {}, [])


def test_derived_image_name():
    assert _container.sshd_image_name(SSHD["image"]) == DERIVED


def test_an_answer_is_kept_by_image_id_and_the_next_run_starts_no_probe(tmp_path):
    path = str(tmp_path / "cache" / "sshd-probes.json")
    ids = {SSHD["image"]: BASE["Id"], DERIVED: OURS["Id"]}
    first = Prober(with_sshd=[SSHD["image"]])
    learned = {}
    plan, probes = engine_sshd_image.plan_with_probes(
        SSHD, BASE, None, engine_sshd_image.cached_probe(first, ids, engine_sshd_image.load_cache(path), learned))
    assert (plan["image"], probes, len(first.calls)) == (SSHD["image"], {SSHD["image"]: True}, 1)
    assert engine_sshd_image.save_cache(path, learned) is True
    # The next run: the same image id, no probe container, the same decision.
    second = Prober()
    cache = engine_sshd_image.load_cache(path)
    assert cache == {engine_sshd_image.cache_key(BASE["Id"], plan["probe_command"]): True}
    again, probes = engine_sshd_image.plan_with_probes(
        SSHD, BASE, None, engine_sshd_image.cached_probe(second, ids, cache, {}))
    assert (again["image"], probes, second.calls) == (SSHD["image"], {SSHD["image"]: True}, [])


def test_another_image_id_or_probe_command_is_probed_again(tmp_path):
    key = engine_sshd_image.cache_key(BASE["Id"], ["/bin/sh", "-c", _container.SSHD_PROBE])
    rebuilt = dict(BASE, Id="sha256:rebuilt")
    prober = Prober()
    learned = {}
    plan, probes = engine_sshd_image.plan_with_probes(
        dict(SSHD, sshd_build=True), rebuilt, None,
        engine_sshd_image.cached_probe(prober, {SSHD["image"]: rebuilt["Id"]}, {key: True}, learned))
    assert (plan["build"], probes, len(prober.calls)) == (True, {SSHD["image"]: False}, 1)
    assert learned == {engine_sshd_image.cache_key("sha256:rebuilt", ["/bin/sh", "-c", _container.SSHD_PROBE]): False}
    assert engine_sshd_image.cache_key(BASE["Id"], ["/bin/sh", "-c", "true"]) != key


def test_a_probe_that_failed_to_run_is_not_kept(tmp_path):
    def broken(image, command):
        return {"failed": True, "msg": "Error response from daemon: Conflict"}
    learned = {}
    with pytest.raises(_container.ContainerError):
        engine_sshd_image.plan_with_probes(SSHD, BASE, None,
                                           engine_sshd_image.cached_probe(broken, {SSHD["image"]: BASE["Id"]}, {}, learned))
    assert learned == {}


def test_an_unreadable_or_unwritable_cache_is_only_no_cache(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    assert engine_sshd_image.load_cache(str(bad)) == {}
    assert engine_sshd_image.load_cache(str(tmp_path / "absent.json")) == {}
    assert engine_sshd_image.load_cache("") == {}
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert engine_sshd_image.save_cache(str(blocker / "sshd-probes.json"), {"k": True}) is False


@pytest.mark.parametrize("images, expected", [
    ([], [None, None]),
    ([BASE, OURS], [BASE, OURS]),
    ([dict(BASE, RepoTags=[SSHD["image"]])], [dict(BASE, RepoTags=[SSHD["image"]]), None]),
    ([dict(OURS, RepoTags=[DERIVED])], [None, dict(OURS, RepoTags=[DERIVED])]),
    # Found under a name docker writes otherwise (docker.io/library/...), or tagged by both: asked again one by one.
    ([dict(BASE, RepoTags=["other:tag"])], None),
    ([dict(BASE, RepoTags=[SSHD["image"], DERIVED])], None),
])
def test_one_image_info_run_for_both_names_is_split_only_when_it_is_certain(images, expected):
    assert engine_sshd_image.split_images([SSHD["image"], DERIVED], images) == expected
