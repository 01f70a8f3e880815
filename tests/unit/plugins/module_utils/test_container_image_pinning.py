# -*- coding: utf-8 -*-
# Unit tests for "Same image everywhere" (issue 12, item 6): image references pinned by digest (validation, the archive
# refusal, recognition by RepoDigests), the image facts engine_container publishes, and the refusal of a deployment
# whose nodes hold different images under one name (module_utils/_container.py, filters of plugins/filter/node_setup.py,
# the preflight's setting check in plugin_utils/_settings.py).

from __future__ import annotations

import types

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.action import engine_container
from ansible_collections.sparkops.specdec.plugins.filter import node_setup
from ansible_collections.sparkops.specdec.plugins.module_utils import _container as c
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _settings

REPO = "nvcr.io/nvidia/tensorrt-llm/release"
HEX = "0123456789abcdef" * 4
PINNED = "%s@sha256:%s" % (REPO, HEX)
ID_A = "sha256:" + "a" * 64
ID_B = "sha256:" + "b" * 64
PULLED = {"Id": ID_A, "RepoTags": [], "RepoDigests": ["%s@sha256:%s" % (REPO, HEX)],
          "Config": {"Env": ["TRT_LLM_VERSION=1.3.0rc12"], "Labels": {}}}
# docker build / docker load: no RepoDigests (Docker's classic image store), as the lab's stand-in images.
LOCAL = {"Id": ID_B, "RepoTags": [REPO + ":1.3.0rc12"], "RepoDigests": [], "Config": {"Env": [], "Labels": {}}}


# --- validation ----------------------------------------------------------------------------------

def test_a_pinned_reference_is_split_into_its_parts():
    assert c.image_reference(PINNED) == {"image": PINNED, "repository": REPO, "tag": "", "digest": "sha256:" + HEX,
                                         "pinned": True}
    tagged = "%s:1.3.0rc12@sha256:%s" % (REPO, HEX)
    assert c.image_reference(tagged)["tag"] == "1.3.0rc12" and c.image_reference(tagged)["repository"] == REPO
    assert c.image_reference("localhost:5000/trtllm:1.3") == {"image": "localhost:5000/trtllm:1.3",
                                                              "repository": "localhost:5000/trtllm", "tag": "1.3",
                                                              "digest": "", "pinned": False}
    assert c.image_reference("localhost:5000/trtllm")["tag"] == ""


@pytest.mark.parametrize("reference, problem", [
    (REPO + "@sha256:abc", "sha256:abc has 3 hex digits; a sha256 digest has 64"),
    (REPO + "@sha256:" + HEX + "0", "has 65 hex digits"),
    (REPO + "@sha256:" + HEX.upper(), "has upper-case hex digits"),
    (REPO + "@sha256:" + "g" * 64, "characters that are not hex digits (g)"),
    (REPO + "@sha512:" + HEX, "uses the algorithm sha512"),
    (REPO + "@" + HEX, "has no algorithm"),
    ("@sha256:" + HEX, "there is no repository before @"),
])
def test_a_malformed_digest_is_one_line_naming_the_setting_the_problem_and_the_fix(reference, problem):
    with pytest.raises(c.ContainerError) as err:
        c.image_reference(reference)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("trtllm_container_image: %s is not a valid reference pinned by digest" % reference)
    assert problem in msg and "RepoDigests of docker image inspect" in msg and msg.endswith("Nothing was changed.")
    # the role's first check (before any change) says the same, as a list of lines
    assert node_setup.trtllm_image_reference_problems(reference, "pull") == [msg]


@pytest.mark.parametrize("reference, problem", [
    (REPO + "@sha256:abc", "sha256:abc has 3 hex digits"),
    (REPO + "@sha256:" + HEX.upper(), "upper-case hex digits"),
])
def test_the_preflight_refuses_a_malformed_digest(reference, problem):
    lines = _settings._image_ref(reference, repr(reference))
    assert len(lines) == 1 and problem in lines[0] and "pinned by digest" in lines[0]
    assert _settings._image_ref(PINNED, repr(PINNED)) == []


def test_a_digest_with_an_archive_is_refused_before_any_change_and_a_tag_or_a_pull_is_not():
    line = c.pinned_source_problem(PINNED, "archive")
    assert line.startswith("trtllm_container_image: %s is pinned by digest" % PINNED) and "\n" not in line
    assert "no RepoDigests" in line and "trtllm_container_image_source: pull" in line and REPO + ":TAG" in line
    assert node_setup.trtllm_image_reference_problems(PINNED, "archive") == [line]
    assert c.pinned_source_problem(PINNED, "pull") == "" and c.pinned_source_problem(REPO + ":1.3.0rc12", "archive") == ""
    assert node_setup.trtllm_image_reference_problems(REPO + ":1.3.0rc12", "archive") == []
    # the preflight (settings of the whole deployment, no host contacted) refuses it too
    assert line in _settings._cross({"trtllm_container_image": PINNED, "trtllm_container_image_source": "archive",
                                     "trtllm_container_image_archive": "/srv/x.tar"}, {})
    assert not [p for p in _settings._cross({"trtllm_container_image": PINNED, "trtllm_container_image_source": "pull"}, {})
                if "pinned by digest" in p]


# --- recognition by RepoDigests --------------------------------------------------------------------

def test_a_pinned_image_on_the_node_is_recognised_by_its_repo_digests():
    assert c.image_identity(PINNED, PULLED) == {"id": ID_A, "digest": "sha256:" + HEX,
                                                "repo_digests": PULLED["RepoDigests"], "present": True}
    # pulled through another registry name of the same repository (a mirror): the digest still names the content
    mirrored = dict(PULLED, RepoDigests=["mirror.local/nvidia/release@sha256:" + HEX])
    assert c.image_identity(PINNED, mirrored)["id"] == ID_A


def test_an_image_without_the_pinned_digest_is_refused():
    with pytest.raises(c.ContainerError) as err:
        c.image_identity(PINNED, LOCAL)
    msg = str(err.value)
    assert "does not carry that digest" in msg and "none: built or loaded locally" in msg and ID_B[:19] in msg
    other = dict(PULLED, RepoDigests=[REPO + "@sha256:" + "f" * 64])
    with pytest.raises(c.ContainerError, match="its RepoDigests: %s@sha256:f" % REPO):
        c.image_identity(PINNED, other)


@pytest.mark.parametrize("inspect", [None, {}])
def test_no_image_yet_or_no_pin_is_no_refusal(inspect):
    assert c.image_identity(PINNED, inspect) == {"id": "", "digest": "sha256:" + HEX, "repo_digests": [],
                                                 "present": False}
    assert c.image_identity(REPO + ":1.3.0rc12", LOCAL)["id"] == ID_B


# --- the same image on every node -----------------------------------------------------------------

def test_different_image_ids_are_one_line_naming_both_nodes_both_ids_and_the_fix():
    line = c.same_image_problem({"spark-1": {"image": PULLED}, "spark-2": {"image": LOCAL}}, REPO + ":1.3.0rc12")
    assert "\n" not in line and line.startswith("trtllm_container_image: the nodes of this deployment hold different images")
    assert "spark-1: %s, spark-2: %s" % (ID_A, ID_B) in line
    assert "docker tag the right image as %s:1.3.0rc12" % REPO in line and "pin it by digest" in line
    assert line.endswith("Nothing was changed (no container recreated, no server stopped).")
    # The plan and the preflight report say it without the role's consequence: the same comparison and line.
    bare = c.same_image_problem({"spark-1": {"image": PULLED}, "spark-2": {"image": LOCAL}}, REPO + ":1.3.0rc12",
                                consequence="")
    assert line == bare + " " + c.NOTHING_CHANGED and bare.endswith("so that every node pulls the same image.")
    # a pinned reference is not told to pin itself
    assert "pin it by digest" not in c.same_image_problem({"a": ID_A, "b": ID_B}, PINNED)


@pytest.mark.parametrize("images", [
    {"spark-1": {"image": PULLED}, "spark-2": {"image": PULLED}},
    {"spark-1": ID_A, "spark-2": {"Id": ID_A}},
    {"spark-1": {"image": PULLED}, "spark-2": {"changed": True, "image": {}}},  # check mode: not there yet
    {"spark-1": {"image": PULLED}},
    {},
])
def test_one_image_or_unknown_ids_pass(images):
    assert c.same_image_problem(images, REPO + ":1.3.0rc12") == ""


def test_the_role_filter_compares_every_member_and_checks_this_nodes_digest():
    # Each member's published trtllm_container_pulled (None: a member that has none, e.g. not in the play).
    pulled = {"spark-1": {"image": PULLED}, "spark-2": {"image": dict(PULLED, Id=ID_B)}, "spark-3": None}
    problems = node_setup.trtllm_image_problems(pulled, "spark-1", PINNED)
    assert len(problems) == 1 and "spark-1: %s, spark-2: %s" % (ID_A, ID_B) in problems[0]
    # a single Spark compares itself only; the same image on both passes
    assert node_setup.trtllm_image_problems({"spark-1": pulled["spark-1"]}, "spark-1", PINNED) == []
    pulled = {"spark-1": {"image": PULLED}, "spark-2": {"image": PULLED}}
    assert node_setup.trtllm_image_problems(pulled, "spark-2", PINNED) == []
    # this node's image lacks the pinned digest (found by another name): refused on this node
    pulled["spark-2"] = {"image": dict(LOCAL, Id=ID_A)}
    problems = node_setup.trtllm_image_problems(pulled, "spark-2", PINNED)
    assert len(problems) == 1 and "does not carry that digest" in problems[0]


def test_the_role_filter_takes_each_members_result_not_hostvars():
    with pytest.raises(AnsibleFilterError) as err:
        node_setup.trtllm_image_problems(["spark-1"], "spark-1", PINNED)
    assert "\n" not in str(err.value) and "trtllm_container_pulled" in str(err.value)


# --- what the role publishes ------------------------------------------------------------------------

def test_image_info_publishes_the_digest_the_repo_digests_and_the_id_the_container_runs():
    info = c.image_info(REPO + ":sha256-0123456789ab-sparkops-sshd", PULLED, "", PINNED, {"Image": "sha256:" + "d" * 64})
    assert info["id"] == ID_A and info["digest"] == "sha256:" + HEX
    assert info["repo_digests"] == PULLED["RepoDigests"] and info["container_image_id"] == "sha256:" + "d" * 64


def test_engine_container_publishes_the_digest_and_the_running_image_id(monkeypatch):
    monkeypatch.setattr(_action, "_apply_action_arg_defaults", None)
    calls = []

    def execute_module(module_name=None, module_args=None, task_vars=None, **_):
        calls.append(module_name)
        if module_name == engine_container.DOCKER_CONTAINER:
            return {"changed": False, "container": {"Id": "c1", "Image": ID_A, "State": {"Running": True}}}
        raise AssertionError(module_name)

    spec = {"name": "trtllm-multinode", "image": PINNED, "state": "started", "command": ["bash", "/x/entrypoint.sh"]}
    task = types.SimpleNamespace(args={"spec": spec, "image": PULLED, "reference": PINNED}, check_mode=False, diff=False,
                                 async_val=0, action="sparkops.specdec.engine_container")
    action = engine_container.ActionModule(task, types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None)),
                                           None, None, None, None)
    action._execute_module = execute_module
    action._remove_tmp_path = lambda *a, **k: None
    result = action.run(task_vars={})
    info = result["ansible_facts"]["trtllm_container_image_info"]
    assert calls == [engine_container.DOCKER_CONTAINER] and result["changed"] is False
    assert (info["id"], info["digest"], info["container_image_id"]) == (ID_A, "sha256:" + HEX, ID_A)


# --- a failed pull or load: one line with the cause and the fix ---------------------------------------
# The daemon's messages as community.docker.docker_image reports them (the lab's registry gave the first one for a
# digest it does not hold; the others are moby's texts for the same failure classes).
MANIFEST_UNKNOWN = (
    'Error pulling image 192.168.250.6:5000/sparkops-lab/trtllm-standin:sha256:%s - 404 Client Error for '
    'http+docker://localhost/v1.41/images/create?tag=sha256%%3A%s&fromImage=192.168.250.6%%3A5000%%2Fsparkops-lab%%2F'
    'trtllm-standin: Not Found ("manifest for 192.168.250.6:5000/sparkops-lab/trtllm-standin@sha256:%s not found: '
    'manifest unknown: manifest unknown")' % ("0" * 64, "0" * 64, "0" * 64))


@pytest.mark.parametrize("message, meaning, fix", [
    (MANIFEST_UNKNOWN, "the registry has no image under that tag or digest", "check the name and the tag or digest"),
    ("Error pulling image nvcr.io/nvidia/x:1 - 500 Server Error: Internal Server Error (\"unauthorized: authentication "
     "required\")", "refused the deploy user's credentials", "docker login nvcr.io, user $oauthtoken"),
    ("pull access denied for nvcr.io/nvidia/nope, repository does not exist or may require 'docker login'",
     "refused the deploy user's credentials", "check that the repository exists"),
    ('Get "https://192.168.250.6:5000/v2/": http: server gave HTTP response to HTTPS client',
     "speaks plain HTTP", "insecure-registries in /etc/docker/daemon.json"),
    ('Get "https://reg.example/v2/": x509: certificate signed by unknown authority', "does not trust the registry's TLS",
     "/etc/docker/certs.d/"),
    ("failed to register layer: write /var/lib/docker/overlay2/x: no space left on device",
     "Docker storage is full", "docker system df"),
    ('Get "https://nvcr.io/v2/": dial tcp: lookup nvcr.io on 127.0.0.53:53: server misbehaving',
     "cannot reach the registry", "trtllm_container_image_source: archive"),
    ('Get "https://nvcr.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded)',
     "cannot reach the registry", "HTTPS_PROXY"),
])
def test_fetch_failure_names_cause_and_fix_in_one_line(message, meaning, fix):
    line = node_setup.trtllm_image_fetch_failure(message + "\n  (more)\n", PINNED, "pull", "spark-2")
    assert "\n" not in line
    assert line.startswith("trtllm_container_image: spark-2 could not pull %s: " % PINNED)
    assert meaning in line and fix in line
    # docker's own words stay, in one line, and the consequence closes the line
    assert "Docker said: " + " ".join(message.split())[:60] in line
    assert line.endswith("Nothing was changed (no container recreated, no server stopped).")


def test_fetch_failure_first_cause_wins_and_long_messages_are_cut():
    # a manifest-unknown answer mentions "Not Found" and, here, a timeout-like word later: the manifest wins
    message = MANIFEST_UNKNOWN + " i/o timeout " + "x" * 500
    line = c.image_fetch_failure(message, PINNED, "pull", "spark-1")
    assert "(manifest unknown)" in line and "cannot reach" not in line
    assert "x" * 300 not in line and "..." in line


def test_fetch_failure_unknown_message_and_archive():
    line = c.image_fetch_failure("something new", PINNED, "pull", "spark-1")
    assert line == ("trtllm_container_image: spark-1 could not pull %s. Docker said: something new. Check the reference "
                    "and the node's access to its registry. Nothing was changed (no container recreated, no server "
                    "stopped)." % PINNED)
    line = c.image_fetch_failure("Error loading image: open /srv/x.tar: no such file or directory", REPO + ":1", "archive",
                                 "spark-1", archive="/srv/x.tar")
    assert line.startswith("trtllm_container_image: spark-1 could not load %s:1 from the archive /srv/x.tar "
                           "(trtllm_container_image_archive): Error loading image: open /srv/x.tar: no such file" % REPO)
    assert "(not set)" in c.image_fetch_failure("", REPO, "archive", "spark-1") and "no message" in c.image_fetch_failure(
        "", REPO, "archive", "spark-1")
