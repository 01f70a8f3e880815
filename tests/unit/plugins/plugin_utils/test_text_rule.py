# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The one text rule of every path, name and text setting, and Linux's rule for interface names (issue 38 item 4;
plugin_utils/_text.py), through the per-setting checks the preflight runs (_settings.check_settings): property
tests over every string setting of the argument specs."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings, strategies as st

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _settings, _text

SPECS = _action.specs()
OPTIONS = _settings.known_options(SPECS)
FAST = settings(max_examples=80, deadline=None)


def _string_settings():
    out = []
    for name, spec in sorted(OPTIONS.items()):
        kind, elements = spec.get("type", "str"), spec.get("elements")
        if _settings._secret(name, spec) or name in _settings.REMOVED or spec.get("choices"):
            continue
        if kind in ("str", "path") or (kind == "list" and elements in ("str", "path")):
            out.append(name)
    return out


def lines_of(name, value):
    return [p for p in _settings.check_settings({name: value}, SPECS) if p.startswith(name + ":")]


# Characters a terminal does not show: every C0/C1 control and Unicode format (Cf) character.
INVISIBLE = st.characters(categories=("Cc", "Cf"))


_CANDIDATES = ("x1", "/srv/x1", "a1/b1", "/etc/netplan/40-x.yaml", "x1.gguf", "a1==1.0", "192.168.100.10",
               "https://x1.example.com")


def _good(name):
    """A value of the setting that its own checks accept: the spec's default, else the first candidate that passes
    (None: none does; the setting is left out of the properties, the coverage test bounds how many)."""
    spec = OPTIONS[name]
    default = spec.get("default")
    listed = spec.get("type") == "list"
    tries = ([default] if default and "{{" not in str(default) else []) + [[c] if listed else c for c in _CANDIDATES]
    for value in tries:
        if isinstance(value, (str, list)) and value and not lines_of(name, value):
            return value
    return None


STRING_SETTINGS = [n for n in _string_settings() if _good(n) is not None]


def test_every_string_setting_is_covered_and_its_good_value_passes():
    assert len(STRING_SETTINGS) >= 60, len(STRING_SETTINGS)
    assert len(_string_settings()) - len(STRING_SETTINGS) <= 8, sorted(set(_string_settings()) - set(STRING_SETTINGS))


@FAST
@given(st.sampled_from(STRING_SETTINGS), INVISIBLE, st.data())
def test_an_invisible_character_anywhere_is_one_line_naming_the_setting(name, char, data):
    if name in _text.PROSE and char in "\n\t":
        return  # a prompt or a note may hold line breaks and tabs
    good = _good(name)
    text = good[0] if isinstance(good, list) else good
    at = data.draw(st.integers(0, len(text)))
    bad = text[:at] + char + text[at:]
    found = lines_of(name, [bad] if isinstance(good, list) else bad)
    assert len(found) == 1, (name, bad, found)
    assert "U+%04X" % ord(char) in found[0] or "not" in found[0], found


@FAST
@given(st.sampled_from(STRING_SETTINGS), st.integers(1, 64))
def test_a_value_beyond_the_length_bound_is_one_line(name, extra):
    good = _good(name)
    text = good[0] if isinstance(good, list) else good
    long = text + "a" * (_text.TEXT_MAX + extra) if not text.startswith("/") else text + "/" + "a" * 300
    found = lines_of(name, [long] if isinstance(good, list) else long)
    assert len(found) == 1, (name, found)


IFNAME_SETTINGS = ("specdec_nccl_management_interface", "trtllm_container_fabric_interfaces")


@FAST
@given(st.sampled_from(IFNAME_SETTINGS), st.text(st.characters(exclude_categories=("Cs",)), min_size=0, max_size=20))
def test_an_interface_name_is_accepted_exactly_when_linux_takes_it(name, value):
    """dev_valid_name() of net/core/dev.c, modelled on the UTF-8 bytes (_text.kernel_accepts), and the text rule."""
    raw = value.encode("utf-8")
    linux = _text.kernel_accepts(raw) and b"\0" not in raw
    visible = not any(unicodedata.category(c) in ("Cc", "Cf") for c in value)
    given_value = [value] if name.endswith("interfaces") else value
    found = lines_of(name, given_value)
    assert (found == []) == (linux and visible), (value, raw, found)
    assert len(found) <= 1


def test_interface_names_at_the_kernels_edges():
    assert _text.ifname_problem("a" * 15) is None
    assert "16 bytes" in _text.ifname_problem("a" * 16)
    # 14 characters, 16 bytes: a name the old check (15 characters) let through to the host.
    assert "17 bytes" in _text.ifname_problem("enp1s0f1np" + "\u00e9" * 3 + "1")
    assert _text.ifname_problem("\u00e0") is not None  # UTF-8 C3 A0: the kernel's isspace(0xA0)
    for bad in (".", "..", "a/b", "a:1", "a b", ""):
        assert _text.ifname_problem(bad) is not None
