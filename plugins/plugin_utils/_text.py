# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE: the one text rule of every path, name and text setting, and Linux's rule for interface names
(issue 38 item 4). Pure functions, no Ansible.

The text rule: no control character (Unicode category Cc: C0, DEL, C1; a line break among them) and no format
character (category Cf: zero-width space and joiners, bidi marks and overrides, the BOM, soft hyphen), which a
terminal does not show and a copy-paste brings along; and a length bound:

* a path: at most PATH_MAX_BYTES bytes in UTF-8 (Linux PATH_MAX is 4096 with the terminating NUL,
  include/uapi/linux/limits.h), each component at most NAME_MAX_BYTES (NAME_MAX, 255);
* any other string: at most TEXT_MAX characters.

Prose settings (PROSE: a prompt, a note) may hold line breaks and tabs, nothing else of the rule changes.
"""

from __future__ import annotations

import unicodedata

TEXT_MAX = 4096
PATH_MAX_BYTES = 4095
NAME_MAX_BYTES = 255
# Settings of free text: a line break or a tab is part of the text.
PROSE = frozenset(("specdec_server_smoke_prompt", "specdec_benchmark_note"))
# Linux IFNAMSIZ (include/uapi/linux/if.h): 16 bytes with the terminating NUL.
IFNAMSIZ = 16
# The bytes the kernel's isspace() takes for white space (lib/ctype.c: 9-13 and 32 are _S, and so is 160, Latin-1's
# no-break space; the kernel tests the name's bytes one by one, so a UTF-8 sequence holding 0xA0 is refused too).
_KERNEL_SPACE = frozenset((9, 10, 11, 12, 13, 32, 160))


def invisible(value, allow=""):
    """The first control or format character of ``value`` as ``U+XXXX (NAME)``, else None."""
    for char in value:
        if char in allow:
            continue
        if unicodedata.category(char) in ("Cc", "Cf"):
            name = "a line break" if char in "\r\n" else "a tab" if char == "\t" else unicodedata.name(
                char, "a control character").lower()
            return "U+%04X (%s)" % (ord(char), name)
    return None


def problem(value, kind="text", allow=""):
    """The text rule's problem of a string (the part after the value: "holds ..."), else None. ``kind``: path or
    text."""
    found = invisible(value, allow)
    if found:
        return "holds the invisible character %s; retype it without it" % found
    if kind == "path":
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > PATH_MAX_BYTES:
            return "is %d bytes long; a path is at most %d bytes (Linux PATH_MAX)" % (size, PATH_MAX_BYTES)
        for part in value.split("/"):
            if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES:
                return "has a component of more than %d bytes (Linux NAME_MAX)" % NAME_MAX_BYTES
    elif len(value) > TEXT_MAX:
        return "is %d characters long, more than %d" % (len(value), TEXT_MAX)
    return None


def ifname_problem(value):
    """Why Linux would refuse ``value`` as a network interface name, else None.

    net/core/dev.c dev_valid_name(): not empty, strnlen(name, IFNAMSIZ) < IFNAMSIZ (1 to 15 bytes), not "." or
    "..", and no byte that is '/', ':' or isspace(). The bytes are the name's UTF-8."""
    raw = value.encode("utf-8", "surrogatepass")
    if not raw or b"\0" in raw:
        return "is empty" if not raw else "holds a NUL byte"
    if len(raw) >= IFNAMSIZ:
        return "is %d bytes long; Linux takes 1 to %d" % (len(raw), IFNAMSIZ - 1)
    if value in (".", ".."):
        return "is %s, which Linux refuses" % value
    for byte in raw:
        if byte in (0x2F, 0x3A) or byte in _KERNEL_SPACE:
            return "holds %s, which Linux refuses in a name" % (
                "'/'" if byte == 0x2F else "':'" if byte == 0x3A else "white space (byte 0x%02X)" % byte)
    return None


def kernel_accepts(raw):
    """dev_valid_name() of net/core/dev.c on the bytes ``raw`` (the model the property test compares with)."""
    if not raw or raw[0] == 0:
        return False
    if len(raw.split(b"\0", 1)[0]) >= IFNAMSIZ:
        return False
    name = raw.split(b"\0", 1)[0]
    if name in (b".", b".."):
        return False
    return not any(b in (0x2F, 0x3A) or b in _KERNEL_SPACE for b in name)
