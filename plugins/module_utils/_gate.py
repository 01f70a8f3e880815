# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection. Not a public API; names and return shapes may
# change in any release without notice.
"""The correctness gate as a pure function (no Ansible, no I/O): greedy outputs with and without
speculation, prompt by prompt.

Why a gate, and why this default: greedy speculative decoding is lossless in exact arithmetic
(the target verifies every drafted token and keeps only its own argmax). Real kernels are not
exact: verifying k+1 positions in one batched pass sums in another order than decoding one token
at a time, so where two candidate tokens are nearly tied the argmax can flip, and from there the
two outputs differ. Such a flip needs a near-tie, so it is rare and tends to come late in a long
output. A wrong draft/target pairing, a sampler that is not greedy, a chat-template or
tokenizer mismatch, or a verification bug shows up differently: early, and on most prompts.

Comparison unit: whitespace-separated words (``str.split()``), because neither the controller nor
the node has the model's tokenizer (nothing is downloaded at run time); the first diverging
character index is reported too. A prompt is ``match`` (identical text), ``late`` (first divergence
at word ``early_words`` or later) or ``early`` (before it; an empty output on one side is early).

Default verdict: fail on ANY early divergence (``max_early`` 0, ``early_words`` 32), or when more
than ``max_late_fraction`` (0.25) of the prompts diverge late. Both are options of the caller.
"""

from __future__ import annotations

EARLY_WORDS = 32
MAX_EARLY = 0
MAX_LATE_FRACTION = 0.25


class GateError(Exception):
    """Inputs that cannot be compared (missing prompts, duplicate ids)."""


def _by_id(outputs, side):
    table = {}
    for index, item in enumerate(outputs or []):
        if isinstance(item, str):
            key, text = str(index), item
        else:
            key = str(item.get("prompt_id", item.get("id", index)))
            text = item.get("text")
        if key in table:
            raise GateError("%s outputs have prompt id %s twice" % (side, key))
        table[key] = "" if text is None else str(text)
    return table


def first_divergence(left, right):
    """(word index, character index) of the first difference, or (None, None) when the texts are equal."""
    if left == right:
        return None, None
    chars = next((i for i, (a, b) in enumerate(zip(left, right)) if a != b), min(len(left), len(right)))
    words_l, words_r = left.split(), right.split()
    words = next((i for i, (a, b) in enumerate(zip(words_l, words_r)) if a != b), min(len(words_l), len(words_r)))
    return words, chars


def compare(baseline, speculative, early_words=EARLY_WORDS, max_early=MAX_EARLY,
            max_late_fraction=MAX_LATE_FRACTION):
    """Per-prompt comparison and verdict.

    ``baseline`` / ``speculative``: lists of ``{"prompt_id", "text"}`` (or plain strings, matched by
    position), both at temperature 0 and concurrency 1. Returns ``{"passed", "msg", "prompts": [{prompt_id,
    status (match|late|early), first_diverging_word, first_diverging_char, baseline_words, speculative_words,
    baseline_excerpt, speculative_excerpt}], "counts": {match, late, early}, "thresholds": {...}}``.
    """
    base = _by_id(baseline, "baseline")
    spec = _by_id(speculative, "speculative")
    if set(base) != set(spec):
        raise GateError("baseline and speculative outputs cover different prompts: only in baseline %s, only in "
                        "speculative %s" % (sorted(set(base) - set(spec)), sorted(set(spec) - set(base))))
    if not base:
        raise GateError("no outputs to compare")
    prompts = []
    counts = {"match": 0, "late": 0, "early": 0}
    for key in base:
        left, right = base[key], spec[key]
        word, char = first_divergence(left, right)
        if word is None:
            status = "match"
        elif not left.strip() or not right.strip() or word < int(early_words):
            status = "early"
        else:
            status = "late"
        counts[status] += 1
        entry = {"prompt_id": key, "status": status, "first_diverging_word": word, "first_diverging_char": char,
                 "baseline_words": len(left.split()), "speculative_words": len(right.split())}
        if char is not None:
            entry["baseline_excerpt"] = left[max(0, char - 40):char + 40]
            entry["speculative_excerpt"] = right[max(0, char - 40):char + 40]
        prompts.append(entry)
    total = len(prompts)
    late_fraction = counts["late"] / float(total)
    problems = []
    if counts["early"] > int(max_early):
        firsts = ", ".join("%s (word %s)" % (p["prompt_id"], p["first_diverging_word"])
                           for p in prompts if p["status"] == "early")
        problems.append("%d prompt(s) diverge before word %d (allowed %d): %s; greedy speculation must reproduce the "
                        "baseline, so check the draft/target pair (same tokenizer), temperature 0 and the chat "
                        "template" % (counts["early"], int(early_words), int(max_early), firsts))
    if late_fraction > float(max_late_fraction):
        problems.append("%d of %d prompts diverge late (%.0f%% > %.0f%%): more than float rounding explains"
                        % (counts["late"], total, 100 * late_fraction, 100 * float(max_late_fraction)))
    passed = not problems
    msg = ("correctness gate passed: %d of %d prompts identical, %d diverge late (at or after word %d)"
           % (counts["match"], total, counts["late"], int(early_words)) if passed else
           "correctness gate FAILED: " + "; ".join(problems))
    return {"passed": passed, "msg": msg, "prompts": prompts, "counts": counts,
            "thresholds": {"early_words": int(early_words), "max_early": int(max_early),
                           "max_late_fraction": float(max_late_fraction)}}
