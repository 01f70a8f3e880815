# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Node side: the Ansible SSH connection a module runs under (netplan_fabric's guard, endpoint_firewall's SSH rule).

``sudo`` (become) resets the environment, so E(SSH_CONNECTION) is looked for in this process first, then in its
parent processes (the shell sshd started holds it). Linux ``/proc`` only; stdlib only.
"""

from __future__ import annotations

import os

from ansible.module_utils.common.text.converters import to_text


def ssh_connection():
    """E(SSH_CONNECTION) of this process or, when sudo dropped it, of the nearest parent process that has it
    (``client cport server sport``); "" when none has it."""
    value = os.environ.get("SSH_CONNECTION")
    if value:
        return value
    pid = os.getppid()
    for dummy in range(16):
        if pid <= 1:
            return ""
        try:
            with open("/proc/%d/environ" % pid, "rb") as handle:
                env = handle.read()
        except OSError:
            env = b""
        for item in env.split(b"\0"):
            if item.startswith(b"SSH_CONNECTION="):
                return to_text(item.split(b"=", 1)[1], errors="surrogate_or_replace")
        try:
            with open("/proc/%d/stat" % pid) as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return ""
    return ""
