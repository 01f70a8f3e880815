# -*- coding: utf-8 -*-
"""No Jinja expression in roles/ and playbooks/ is longer than 200 characters.

Scanned: the YAML files (.yml, .yaml) and the .j2 templates under roles/ and playbooks/.

- ``{{ ... }}`` and ``{% ... %}`` blocks, found in the raw text of every file (so line numbers are exact and a
  block spread over the lines of a folded ``>-`` or literal ``|`` scalar is one block). The end of a block is
  found past string literals and nested ``{...}`` dict literals, so ``{{ {'a': {'b': 1}} }}`` is one block.
- Bare Jinja in conditionals: the string values (or list items) of ``when``, ``that``, ``failed_when``,
  ``changed_when`` and ``until``, read with PyYAML's safe loader (``yaml.compose_all`` with ``SafeLoader``:
  the node tree of ``yaml.safe_load``, which carries line numbers and accepts Ansible tags such as ``!unsafe``).
  Folded scalars arrive folded. Conditionals that contain ``{{``/``{%`` are left to the block scan.

Length: the expression between the delimiters (without ``-`` trim markers), every run of whitespace collapsed
to one space, stripped. Each failure names file, line, length and the first 80 characters.
"""

from __future__ import annotations

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCAN_DIRS = ("roles", "playbooks")
YAML_SUFFIXES = (".yml", ".yaml")
TEMPLATE_SUFFIXES = (".j2",)
MAX_LENGTH = 200
CONDITIONAL_KEYS = frozenset(("when", "that", "failed_when", "changed_when", "until"))
STR_TAG = "tag:yaml.org,2002:str"
OPENERS = {"{{": "}}", "{%": "%}"}
_OPEN_RE = re.compile(r"\{\{|\{%")
_WS_RE = re.compile(r"\s+")


def collapse(text):
    return _WS_RE.sub(" ", text).strip()


def _block_end(text, start, closer):
    """Index just past the closer of the block whose opener ends at start, or None.

    String literals and nested curly braces are skipped over, so a dict literal's ``}}`` does not end the block.
    """
    depth = 0
    quote = None
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif depth == 0 and text.startswith(closer, i):
            return i + 2
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        i += 1
    return None


def _inner(block):
    inner = block[2:-2]
    if inner.startswith(("-", "+")):
        inner = inner[1:]
    if inner.endswith(("-", "+")):
        inner = inner[:-1]
    return collapse(inner)


def scan_blocks(text):
    """Every ``{{ }}`` / ``{% %}`` block of text: list of (line, expression with whitespace collapsed)."""
    found = []
    pos = 0
    while True:
        m = _OPEN_RE.search(text, pos)
        if not m:
            return found
        closer = OPENERS[m.group()]
        end = _block_end(text, m.end(), closer)
        if end is None:
            # Unbalanced quotes or braces (e.g. YAML escapes such as \" around the block): the first closer.
            end = text.find(closer, m.end())
            end = len(text) if end < 0 else end + 2
        found.append((text.count("\n", 0, m.start()) + 1, _inner(text[m.start():end])))
        pos = end


def _conditionals(node, out):
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value in CONDITIONAL_KEYS:
                items = value.value if isinstance(value, yaml.SequenceNode) else [value]
                for item in items:
                    if isinstance(item, yaml.ScalarNode) and item.tag == STR_TAG and item.value.strip():
                        if "{{" not in item.value and "{%" not in item.value:
                            out.append((item.start_mark.line + 1, collapse(item.value)))
            _conditionals(value, out)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _conditionals(item, out)


def scan_conditionals(text):
    """Bare Jinja of the conditionals of a YAML document: list of (line, expression with whitespace collapsed)."""
    out = []
    for doc in yaml.compose_all(text, Loader=yaml.SafeLoader):
        _conditionals(doc, out)
    return out


def scan_text(text, name, limit=MAX_LENGTH):
    """All expressions of one file's text (YAML when name ends .yml/.yaml); returns (expressions, offenders).

    An offender is a string ``name:line: N chars: <first 80 characters>``.
    """
    expressions = [("block", line, expr) for line, expr in scan_blocks(text)]
    if name.endswith(YAML_SUFFIXES):
        expressions += [("conditional", line, expr) for line, expr in scan_conditionals(text)]
    offenders = [
        "%s:%d: %d chars (%s): %s" % (name, line, len(expr), kind, expr[:80])
        for kind, line, expr in sorted(expressions, key=lambda e: e[1])
        if len(expr) > limit
    ]
    return expressions, offenders


def scanned_files(root=ROOT):
    for d in SCAN_DIRS:
        for path in sorted((root / d).rglob("*")):
            if path.is_file() and path.name.endswith(YAML_SUFFIXES + TEMPLATE_SUFFIXES):
                yield path


def scan_tree(root=ROOT):
    files = list(scanned_files(root))
    expressions = 0
    offenders = []
    for path in files:
        found, bad = scan_text(path.read_text(encoding="utf-8"), str(path.relative_to(root)))
        expressions += len(found)
        offenders += bad
    return files, expressions, offenders


# --------------------------------------------------------------------------- self-tests (in memory)


def _expr(n):
    """A realistic expression of exactly n characters, single-spaced."""
    words = " and ".join("item_%03d is defined" % i for i in range(40))
    e = words[:n]
    if e.endswith(" "):
        e = e[:-1] + "x"
    assert len(e) == n and "  " not in e
    return e


def _folded(expr, indent="      ", width=40):
    """expr spread over several lines of a folded scalar (whitespace collapses back to expr)."""
    lines, line = [], ""
    for word in expr.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = (line + " " + word) if line else word
    lines.append(line)
    return ("\n" + indent).join(lines)


def test_self_test_when_just_under_and_just_over():
    text = (
        "- name: under\n"
        "  ansible.builtin.debug:\n"
        "    msg: hi\n"
        "  when: %s\n"
        "- name: over\n"
        "  ansible.builtin.debug:\n"
        "    msg: hi\n"
        "  when:\n"
        "    - short is defined\n"
        "    - %s\n"
    ) % (_expr(MAX_LENGTH), _expr(MAX_LENGTH + 1))
    found, offenders = scan_text(text, "t.yml")
    assert len([e for e in found if e[0] == "conditional"]) == 3
    assert len(offenders) == 1
    assert offenders[0].startswith("t.yml:10: 201 chars (conditional): item_000 is defined and")
    assert offenders[0].endswith(_expr(80))


def test_self_test_folded_braces_and_assert_that():
    under = _folded("{{ %s }}" % _expr(MAX_LENGTH))
    over = _folded("{{ %s }}" % _expr(MAX_LENGTH + 1))
    text = (
        "- name: under, folded\n"
        "  ansible.builtin.set_fact:\n"
        "    a: >-\n"
        "      %s\n"
        "- name: over, folded\n"
        "  ansible.builtin.set_fact:\n"
        "    b: >-\n"
        "      %s\n"
        "- name: assert\n"
        "  ansible.builtin.assert:\n"
        "    that:\n"
        "      - >-\n"
        "        %s\n"
        "  failed_when: \"{{ {'a': {'b': 1}} | length > 0 }}\"\n"
    ) % (under, over, _folded(_expr(MAX_LENGTH + 1), indent="        "))
    assert len(under) > MAX_LENGTH + 6  # the raw text is longer than the collapsed expression
    found, offenders = scan_text(text, "t.yml")
    assert [len(e[2]) for e in found if e[0] == "block"] == [200, 201, len("{'a': {'b': 1}} | length > 0")]
    over_line = text.splitlines().index("    b: >-") + 2
    that_line = text.splitlines().index("      - >-") + 1
    assert [o.split(" chars")[0] for o in offenders] == ["t.yml:%d: 201" % over_line, "t.yml:%d: 201" % that_line]


def test_self_test_template_blocks():
    text = "x\n{%% if %s %%}\nok\n{%%- endif -%%}\n{{- %s -}}\n{# %s #}\n" % (
        _expr(MAX_LENGTH + 1), _expr(MAX_LENGTH), _expr(300))
    found, offenders = scan_text(text, "t.j2")
    assert [(line, len(e)) for dummy, line, e in found] == [(2, 204), (4, 5), (5, 200)]  # "if " + 201
    assert offenders == ["t.j2:2: 204 chars (block): if " + _expr(77)]


def test_self_test_finds_the_tree():
    files, expressions, dummy = scan_tree()
    assert any(p.suffix == ".j2" for p in files) and any(p.parts[-2] == "tasks" for p in files)
    assert expressions > 100


# --------------------------------------------------------------------------- the real tree


def test_no_jinja_expression_longer_than_200():
    offenders = scan_tree()[2]
    assert not offenders, "%d Jinja expressions longer than %d characters:\n%s" % (
        len(offenders), MAX_LENGTH, "\n".join(offenders))
