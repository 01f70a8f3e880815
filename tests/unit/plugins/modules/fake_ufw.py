# -*- coding: utf-8 -*-
"""A fake ``ufw`` for the unit tests of sparkops.specdec.endpoint_firewall, put on PATH as ``ufw``.

It keeps its state in $FAKE_UFW_DIR: ``user.rules`` / ``user6.rules`` (the ``### tuple`` lines as ufw 0.36.2 of the
lab node writes them: a rule from anywhere goes to both files, a rule from an IPv4 source to user.rules only, a /32
source is stored as the bare address; a new rule is appended, an existing one skipped), ``ufw.conf`` (ENABLED),
``active`` (present when ufw is active) and ``calls`` (one JSON argument list a line). $FAKE_UFW_FAIL makes a
command whose arguments contain it fail.
"""

import ipaddress
import json
import os
import sys

HERE = os.environ["FAKE_UFW_DIR"]


def path(name):
    return os.path.join(HERE, name)


def read_lines(name):
    try:
        with open(path(name)) as handle:
            return handle.read().splitlines()
    except FileNotFoundError:
        return []


def write_lines(name, lines):
    with open(path(name), "w") as handle:
        handle.write("".join(line + "\n" for line in lines))


def parse_rule(args):
    """``[delete] ACTION [in on IFACE] from SRC to any [port P] [proto P] [comment C]`` -> (delete, fields, comment)."""
    delete = args[0] == "delete"
    if delete:
        args = args[1:]
    action, rest = args[0], args[1:]
    opts = {"on": None, "from": "any", "to": "any", "port": "any", "proto": "any", "comment": ""}
    if rest[:1] == ["in"]:
        rest = rest[1:]
    while rest:
        opts[rest[0]] = rest[1]
        rest = rest[2:]
    return delete, action, opts


def tuples_for(action, opts):
    direction = "in" + ("_" + opts["on"] if opts["on"] else "")
    src = opts["from"]
    out = []
    if src == "any":
        out.append(("user.rules", "%s %s %s 0.0.0.0/0 any 0.0.0.0/0 %s" % (action, opts["proto"], opts["port"],
                                                                           direction)))
        out.append(("user6.rules", "%s %s %s ::/0 any ::/0 %s" % (action, opts["proto"], opts["port"], direction)))
    else:
        net = ipaddress.ip_network(src, strict=False)
        shown = str(net.network_address) if net.prefixlen == net.max_prefixlen else str(net)
        dst = "0.0.0.0/0" if net.version == 4 else "::/0"
        out.append(("user.rules" if net.version == 4 else "user6.rules",
                    "%s %s %s %s any %s %s" % (action, opts["proto"], opts["port"], dst, shown, direction)))
    return out


def main(argv):
    with open(path("calls"), "a") as handle:
        handle.write(json.dumps(argv) + "\n")
    if os.environ.get("FAKE_UFW_FAIL") and os.environ["FAKE_UFW_FAIL"] in argv:
        sys.stderr.write("ERROR: fake failure\n")
        return 1
    if argv == ["status", "verbose"]:
        if os.path.exists(path("active")):
            print("Status: active\nLogging: on (low)\nDefault: deny (incoming), allow (outgoing), deny (routed)\n"
                  "New profiles: skip\n")
        else:
            print("Status: inactive")
        return 0
    if argv in (["-f", "enable"], ["-f", "disable"]):
        on = argv[1] == "enable"
        if on:
            open(path("active"), "w").close()
        elif os.path.exists(path("active")):
            os.unlink(path("active"))
        write_lines("ufw.conf", ["ENABLED=%s" % ("yes" if on else "no"), "LOGLEVEL=low"])
        return 0
    delete, action, opts = parse_rule(argv)
    for name, rule in tuples_for(action, opts):
        lines = read_lines(name)
        same = [i for i, line in enumerate(lines)
                if line.startswith("### tuple ### ") and line[len("### tuple ### "):].split(" comment=")[0] == rule]
        if delete:
            lines = [line for i, line in enumerate(lines) if i not in same]
        elif not same:
            comment = " comment=" + opts["comment"].encode().hex() if opts["comment"] else ""
            lines.append("### tuple ### " + rule + comment)
        write_lines(name, lines)
    print("Rule updated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
