"""README.md is what a newcomer reads in five minutes; the rest is in docs/.

The README stays at most 250 lines and links every doc of docs/; every relative link of README.md and docs/*.md
points to a file or directory that exists (the part after ``#`` is not checked).
"""
from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 250

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...


def relative_links(text: str) -> list[str]:
    """The relative targets of the Markdown links in text, outside code, without their #anchor; pure anchors are
    left out."""
    text = INLINE_CODE.sub("", FENCE.sub("", text))
    out = []
    for target in LINK.findall(text):
        if EXTERNAL.match(target):
            continue
        path = target.split("#", 1)[0]
        if path:
            out.append(path)
    return out


def doc_files() -> list[pathlib.Path]:
    return [README] + sorted((ROOT / "docs").glob("*.md"))


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, "README.md has %d lines; at most %d (move the rest to docs/)" % (
        len(lines), MAX_LINES)


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(doc):
    links = relative_links(doc.read_text(encoding="utf-8"))
    missing = [target for target in links if not (doc.parent / target).exists()]
    assert missing == [], "%s links to missing paths: %s" % (doc.relative_to(ROOT), missing)


def test_the_readme_links_every_doc():
    linked = {(README.parent / target).resolve() for target in relative_links(README.read_text(encoding="utf-8"))}
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert unlinked == []


def test_the_link_finder_sees_links_and_skips_code():
    text = ("[a](docs/a.md) [b](b.md#part) [c](https://example.org/x) [d](#anchor) `[e](e.md)`\n"
            "```\n[f](f.md)\n```\n[g](../g.md \"title\")\n")
    assert relative_links(text) == ["docs/a.md", "b.md", "../g.md"]
