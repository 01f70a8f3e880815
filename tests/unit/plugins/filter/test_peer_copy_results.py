# -*- coding: utf-8 -*-
# Unit tests for the PRIVATE filter peer_copy_results (specdec_server role, peer_copy.yml): a warm run runs
# hf_peer_copy once per model (the read-only look); the copy runs only for a model the look found incomplete.

from __future__ import annotations

from ansible_collections.sparkops.specdec.plugins.filter import peer_copy

MODEL_A = {"repo": "org/target"}
MODEL_B = {"repo": "org/draft"}


def test_the_look_stands_in_for_a_skipped_copy_and_a_copy_that_ran_wins():
    looked = {"results": [{"item": MODEL_A, "changed": False, "commit": "a" * 40, "copied_files": []},
                          {"item": MODEL_B, "changed": True, "commit": "b" * 40, "copied_files": ["x.bin"]}]}
    copied = {"results": [{"item": MODEL_A, "skipped": True, "changed": False},
                          {"item": MODEL_B, "changed": True, "commit": "b" * 40, "copied_files": ["x.bin"],
                           "bytes_copied": 10}]}
    out = peer_copy.peer_copy_results(copied, looked)["results"]
    assert out[0] is looked["results"][0]
    assert out[1] is copied["results"][1]


def test_check_mode_keeps_the_copy_results_when_the_look_was_skipped():
    looked = {"results": [{"item": MODEL_A, "skipped": True}]}
    copied = {"results": [{"item": MODEL_A, "changed": True, "commit": "a" * 40}]}
    assert peer_copy.peer_copy_results(copied, looked) == copied
    assert peer_copy.peer_copy_results(copied, {"skipped": True}) == copied
    assert peer_copy.peer_copy_results({"results": [{"skipped": True}]}, None) == {"results": [{"skipped": True}]}
