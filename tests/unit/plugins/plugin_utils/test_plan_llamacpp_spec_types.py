# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""llama.cpp eagle3 and mtp (issue 23, item 6): --spec-type draft-eagle3 / draft-mtp only when the image's
llama-server --help lists them."""

from __future__ import annotations

import os

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _container
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _plan

HERE = os.path.dirname(os.path.abspath(__file__))
# Recorded from the lab's llama.cpp image (llama.cpp@0c1e57098); provenance in the file's comment lines.
LAB_HELP = os.path.join(HERE, "..", "..", "fixtures", "llamacpp", "llama-server-help-0c1e57098.txt")
TARGET = "sparkops-lab/Qwen2.5-Coder-1.5B-Instruct-GGUF"
DRAFT = "sparkops-lab/Qwen2.5-Coder-0.5B-Instruct-GGUF"
COMMITS = {TARGET: "1" * 40, DRAFT: "2" * 40}
CACHE = "/root/.cache/huggingface"


def lab_help():
    with open(LAB_HELP, encoding="utf-8") as handle:
        return handle.read()


def without(help_text, *types):
    """The recorded --help with ``types`` taken out of its --spec-type list: a build that does not know them
    (derived here from the recorded text, not recorded itself)."""
    lines = []
    for line in help_text.split("\n"):
        if line.startswith("--spec-type "):
            flag, values = line.split(" ", 1)
            line = flag + " " + ",".join(v for v in values.split(",") if v not in types)
        lines.append(line)
    return "\n".join(lines)


def plan(settings, spec_types):
    s = dict({"specdec_engine": "llamacpp", "trtllm_container_image": "sparkops-lab/llamacpp-server:0c1e57098"},
             **settings)
    dep = _plan.deployment_from_inventory(s, "single_spark", ["spark-1"], "spark-1")
    return _plan.build_plan(dep, commits=COMMITS, llama_spec_types=spec_types)


def test_the_lab_build_lists_draft_eagle3_and_draft_mtp():
    types = _container.llama_spec_types(lab_help())
    assert types == ["none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
                     "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"]


def test_help_without_spec_type_and_no_help():
    assert _container.llama_spec_types("usage: llama-server [options]\n-m, --model FNAME\n") == []
    assert _container.llama_spec_types("") is None


def test_eagle3_with_the_lab_build():
    built = plan({"specdec_server_method": "eagle3", "specdec_server_max_draft_len": 3},
                 _container.llama_spec_types(lab_help()))
    assert built["errors"] == []
    argv = built["plan"]["argv"]
    draft = "%s/hub/models--%s/snapshots/%s/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" % (
        CACHE, DRAFT.replace("/", "--"), "2" * 40)
    i = argv.index("-md")
    assert argv[i:i + 8] == ["-md", draft, "--spec-type", "draft-eagle3", "--spec-draft-n-max", "3",
                             "--spec-draft-n-min", "0"]
    assert built["plan"]["max_draft_len"] == 3


def test_mtp_with_the_lab_build_drafts_with_the_targets_layers():
    built = plan({"specdec_server_method": "mtp", "specdec_server_max_draft_len": 2},
                 _container.llama_spec_types(lab_help()))
    assert built["errors"] == []
    argv = built["plan"]["argv"]
    assert "-md" not in argv
    i = argv.index("--spec-type")
    assert argv[i:i + 6] == ["--spec-type", "draft-mtp", "--spec-draft-n-max", "2", "--spec-draft-n-min", "0"]
    assert [m["repo"] for m in built["plan"]["models"]] == [TARGET] and built["plan"]["max_draft_len"] == 2


@pytest.mark.parametrize("method,missing", [("eagle3", "draft-eagle3"), ("mtp", "draft-mtp")])
def test_a_build_without_the_type_is_refused_in_one_line(method, missing):
    types = _container.llama_spec_types(without(lab_help(), "draft-eagle3", "draft-mtp"))
    assert missing not in types and "draft-simple" in types
    errors = plan({"specdec_server_method": method}, types)["errors"]
    assert errors == ["specdec_server_method: %s needs llama-server --spec-type %s, which the llama-server of "
                      "sparkops-lab/llamacpp-server:0c1e57098 does not list (its --help lists %s); use a llama.cpp "
                      "build that lists it, or specdec_server_method: draft_target." % (method, missing, ", ".join(types))]


def test_draft_target_needs_no_listing_and_an_unread_help_refuses_nothing():
    assert plan({}, [])["errors"] == []
    assert plan({"specdec_server_method": "eagle3"}, None)["errors"] == []


def test_mtp_takes_no_draft_file():
    errors = plan({"specdec_server_method": "mtp", "specdec_server_draft_file": "d.gguf"},
                  _container.llama_spec_types(lab_help()))["errors"]
    assert len(errors) == 1 and errors[0].startswith("specdec_server_draft_file: method mtp serves without a draft GGUF")
