#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: endpoint_firewall
short_description: The host firewall (ufw) of the endpoint - plan, apply and remove our rules in one call, on the node
version_added: 0.3.0
description:
  - Runs on the node, as root (C(become)). One call reads ufw (the C(ufw) binary, C(ufw status verbose), the
    C(### tuple) lines of C(/etc/ufw/user.rules) and C(/etc/ufw/user6.rules), C(ENABLED) in C(/etc/ufw/ufw.conf) and
    the marker O(marker) that this collection enabled ufw), plans, refuses before any change, and applies the plan
    with the C(ufw) command line. The C(specdec_firewall) role calls it from its entry points C(main) (O(state=present)),
    C(check) (O(check_only=true)) and C(remove) (O(state=absent)).
  - "O(state=present): the rules, in the order ufw must evaluate them: allow TCP to the port of the Ansible SSH
    connection (the server port of E(SSH_CONNECTION), else O(ansible_port)) from anywhere; allow everything coming in
    on each fabric interface (OpenMPI and NCCL use random TCP ports); allow TCP to the container sshd port from the
    fabric subnets; allow TCP to the endpoint port from each network of O(networks); reject TCP to the endpoint port
    from anywhere else. Every rule carries the comment C(sparkops-specdec:<deployment>). A rule of ours that the plan
    no longer holds is deleted first; a client network added after the reject rule makes the reject rule go and come
    back last. When ufw is inactive (and O(consent) given), the marker O(marker) is written and ufw enabled last."
  - "It refuses, before any change, with one line naming the setting and the fix: a network that is not an IP network
    in CIDR form or has host bits set; C(ufw) not installed; ufw inactive without O(consent); the endpoint port equal
    to the SSH port; two nodes without their fabric interfaces; an existing deny or reject rule of someone else that
    matches the Ansible connection (its client address and port) and would, ahead of ours, lock Ansible out."
  - O(check_only=true) runs only those refusals (the playbooks' preflight, before the fabric is known) and changes
    nothing.
  - "O(state=absent) (teardown): the rules carrying a C(sparkops-specdec) comment are deleted, ufw is disabled again
    when this collection enabled it (the marker), and the marker is removed. When ufw stays active and no other rule
    (nor an allow default) admits the Ansible connection, our SSH rule stays, and RV(kept) says so. Nothing happens
    where ufw is missing (but a marker left behind is removed)."
  - E(SSH_CONNECTION) is read from O(ssh_connection) when given, else from the module's environment or, when C(sudo)
    dropped it, from its parent processes (as root).
  - The decisions are those of the deprecated controller-side M(sparkops.specdec.firewall_plan) (the same module_utils),
    so rules applied by it and M(community.general.ufw) are recognised and a deployment made with them converges
    unchanged.
author:
  - sparkops maintainers (@sparkops)
options:
  state:
    description: V(present) plans and applies the rules of a deployment, V(absent) removes them.
    type: str
    choices: [present, absent]
    default: present
  check_only:
    description:
      - With O(state=present), only the refusals (the playbooks' firewall preflight); the fabric is not known yet and
        not required. Changes nothing; returns C(changed=false), RV(client), RV(ssh_port) and RV(msg).
    type: bool
    default: false
  networks:
    description: The client networks admitted to the endpoint (C(specdec_server_allowed_networks)), CIDRs.
    type: list
    elements: str
    default: []
  port:
    description: The endpoint's TCP port (the plan's C(port)). Required with O(state=present).
    type: int
  consent:
    description: Enable ufw when it is inactive (C(specdec_server_firewall_enable)).
    type: bool
    default: false
  fabric_interfaces:
    description: The node's fabric interfaces (C(netplan_qsfp_fabric.interfaces)); all traffic in on them is allowed.
    type: list
    elements: str
    default: []
  fabric_addresses:
    description: The node's fabric addresses in CIDR form (C(netplan_qsfp_fabric.addresses)); their subnets may reach
      the container sshd port.
    type: list
    elements: str
    default: []
  container_ssh_port:
    description: The container sshd port (C(specdec_container_ssh_port)); 0 for none (one node).
    type: int
    default: 0
  management_peers:
    description:
      - The other members' management IP addresses (their C(ansible_host)) when NCCL, UCX and OpenMPI bootstrap over
        the management interface (C(specdec_nccl_bootstrap=management_interface)); each is admitted on every port, as
        OpenMPI's out-of-band TCP, NCCL's and Gloo's bootstrap and vLLM's rendezvous listen there on random ports.
    type: list
    elements: str
    default: []
  deployment:
    description: The deployment id, part of the rules' comment.
    type: str
    default: default
  two_nodes:
    description: The deployment is a pair (its fabric interfaces must then be known).
    type: bool
    default: false
  ssh_connection:
    description:
      - E(SSH_CONNECTION) of the Ansible connection (C(client cport server sport)). Empty (the default) - read from the
        module's environment or its parent processes.
    type: str
    default: ""
  ansible_port:
    description: The SSH port used when E(SSH_CONNECTION) is unknown (the node's C(ansible_port)).
    type: int
    default: 22
  marker:
    description:
      - The file recording that this collection enabled ufw (C(<specdec_state_dir>/firewall-ufw-enabled.json)); its
        directory must exist. Required unless O(check_only=true).
    type: path
  node_name:
    description: The node's name in messages (C(inventory_hostname)); default the host name.
    type: str
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: full
    details: Reads and plans as in a normal run and reports what would change (RV(commands) lists the ufw commands that would
      run); changes nothing.
  diff_mode:
    support: full
    details: Our rules (and whether ufw is active) before and after, one line per rule.
  idempotent:
    support: full
  platform:
    details: Linux with ufw (Ubuntu, DGX OS).
notes:
  - Needs root (C(become)) for ufw and its rules files.
seealso:
  - module: sparkops.specdec.firewall_plan
  - module: community.general.ufw
"""

EXAMPLES = r"""
- name: Admit the endpoint only from the controller's network
  sparkops.specdec.endpoint_firewall:
    networks: [192.168.1.0/24]
    port: 8355
    consent: true
    fabric_interfaces: [enp1s0f1np1, enP2p1s0f1np1]
    fabric_addresses: [192.168.100.11/24, 192.168.101.11/24]
    container_ssh_port: 2233
    deployment: spark-1
    two_nodes: true
    marker: /var/lib/sparkops/firewall-ufw-enabled.json
    node_name: "{{ inventory_hostname }}"
  become: true

- name: Remove our rules (and disable ufw if this collection enabled it)
  sparkops.specdec.endpoint_firewall:
    state: absent
    marker: /var/lib/sparkops/firewall-ufw-enabled.json
  become: true
"""

RETURN = r"""
add:
  description: The rules added (or, in check mode, to add), in order, as M(community.general.ufw) options (C(rule),
    C(from_ip), C(comment), C(delete)=false, and where needed C(proto), C(to_port), C(interface), C(direction));
    C(label) describes it.
  returned: state is present and not check_only
  type: list
  elements: dict
delete:
  description: Our rules deleted (run before RV(add)), as M(community.general.ufw) options with C(delete)=true.
  returned: success, except with check_only
  type: list
  elements: dict
rules:
  description: Every rule of the plan (O(state=present)), in order, with C(action), C(proto), C(port), C(source),
    C(interface), C(why), C(comment) and C(label).
  returned: state is present and not check_only
  type: list
  elements: dict
enable:
  description: ufw was inactive and is enabled (O(consent) was given); the marker is written.
  returned: state is present and not check_only
  type: bool
disable:
  description: Teardown disables ufw (this collection enabled it).
  returned: state is absent
  type: bool
remove_marker:
  description: Teardown removes the marker that this collection enabled ufw.
  returned: state is absent
  type: bool
kept:
  description: Teardown keeps these rules of ours (the SSH rule, when nothing else would admit the Ansible connection).
  returned: state is absent
  type: list
  elements: str
pending:
  description: The firewall differed from the plan.
  returned: success, except with check_only
  type: bool
commands:
  description: The ufw commands run (in check mode, those that would run), each as its argument list.
  returned: success, except with check_only
  type: list
  elements: list
client:
  description: The client address of the Ansible connection (from E(SSH_CONNECTION)), or null.
  returned: state is present
  type: str
ssh_port:
  description: The TCP port of the Ansible connection that stays open.
  returned: state is present
  type: int
msg:
  description: With O(check_only), that the rules can be applied; on failure, the refusals joined.
  returned: check_only or failure
  type: str
errors:
  description: The refusals (one line each; the task fails with them joined as RV(msg)).
  returned: failure
  type: list
  elements: str
"""

import json
import os
import re
import socket
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.sparkops.specdec.plugins.module_utils import _firewall
from ansible_collections.sparkops.specdec.plugins.module_utils._ssh_connection import ssh_connection

# ufw's files (the unit tests point these at a temporary directory).
USER_RULES = ("/etc/ufw/user.rules", "/etc/ufw/user6.rules")
UFW_CONF = "/etc/ufw/ufw.conf"
_ENABLED_RE = re.compile(r'^[ \t]*ENABLED[ \t]*=[ \t]*"?yes"?', re.I | re.M)
_ENV = {"LANG": "C", "LC_ALL": "C"}


def _read(path):
    try:
        with open(path, "rb") as handle:
            return to_text(handle.read(), errors="surrogate_or_replace")
    except OSError:
        return None


def read_ufw(module, marker):
    """What the plan reads: ``ufw_path``, ``status``, ``tuples``, ``enabled`` (None when unknown), ``marker``."""
    found = {"ufw_path": module.get_bin_path("ufw") or "", "status": "", "tuples": "", "enabled": None,
             "marker": bool(marker) and os.path.isfile(marker)}
    if not found["ufw_path"]:
        return found
    rc, out, err = module.run_command([found["ufw_path"], "status", "verbose"], environ_update=_ENV)
    if rc != 0:
        module.fail_json(msg="ufw status verbose failed on %s (rc %s): %s; check ufw (sudo ufw status) and that the "
                             "task runs as root (become)." % (_node(module), rc, " ".join((err or out).split())))
    found["status"] = out
    lines = []
    for path in USER_RULES:
        lines.extend(line for line in (_read(path) or "").splitlines() if line.startswith("### tuple"))
    found["tuples"] = "\n".join(lines)
    conf = _read(UFW_CONF)
    found["enabled"] = None if conf is None else bool(_ENABLED_RE.search(conf))
    return found


def ufw_argv(ufw, args):
    """The ufw command of community.general.ufw options (as the plan gives them), as an argument list."""
    argv = [ufw] + (["delete"] if args.get("delete") else []) + [args["rule"]]
    if args.get("interface"):
        argv += [args.get("direction") or "in", "on", args["interface"]]
    argv += ["from", args["from_ip"], "to", "any"]
    if args.get("to_port"):
        argv += ["port", str(args["to_port"])]
    if args.get("proto"):
        argv += ["proto", args["proto"]]
    if args.get("comment") and not args.get("delete"):
        argv += ["comment", args["comment"]]
    return argv


def _node(module):
    return module.params.get("node_name") or socket.gethostname()


def _run(module, argv, done):
    rc, out, err = module.run_command(argv, environ_update=_ENV)
    if rc != 0:
        what = " ".join(argv[1:]) or "ufw"
        why = " ".join((err or out).split())
        module.fail_json(msg="%s failed on %s (rc %s): %s; the firewall is partly changed, run again after fixing "
                             "ufw (sudo ufw status)." % (what, _node(module), rc, why),
                         commands=done + [argv], changed=bool(done))
    done.append(argv)


def _write_marker(path, deployment):
    content = json.dumps({"enabled_by": "sparkops.specdec", "deployment": deployment})
    handle, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".firewall-marker.")
    with os.fdopen(handle, "w") as out:
        out.write(content)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


def present(module, node, found):
    params = module.params
    inputs = dict(found, ssh_connection=params["ssh_connection"] or ssh_connection(),
                  ansible_port=params["ansible_port"], networks=params["networks"], port=params["port"],
                  consent=params["consent"], fabric_interfaces=params["fabric_interfaces"],
                  fabric_addresses=params["fabric_addresses"], container_ssh_port=params["container_ssh_port"],
                  management_peers=params["management_peers"],
                  deployment=params["deployment"], two_nodes=params["two_nodes"], check_only=params["check_only"])
    plan = _firewall.plan_apply(node, inputs)
    if plan["errors"]:
        module.fail_json(msg=" ".join(plan["errors"]), errors=plan["errors"], changed=False)
    if params["check_only"]:
        module.exit_json(changed=False, client=plan["client"], ssh_port=plan["ssh_port"],
                         msg="the firewall rules can be applied on %s" % node)
    marker = params["marker"]
    if plan["enable"] and not os.path.isdir(os.path.dirname(marker)):
        module.fail_json(msg="marker: the directory of %s does not exist on %s; run the trtllm_container role first "
                             "(it creates specdec_state_dir)." % (marker, node), changed=False)
    ufw = found["ufw_path"]
    commands = [ufw_argv(ufw, args) for args in plan["delete"] + plan["add"]]
    if plan["enable"]:
        commands.append([ufw, "-f", "enable"])
    done = []
    if not module.check_mode:
        for argv in commands[:len(plan["delete"]) + len(plan["add"])]:
            _run(module, argv, done)
        if plan["enable"]:
            _write_marker(marker, params["deployment"])
            _run(module, commands[-1], done)
    result = dict(plan, changed=plan["pending"], commands=commands)
    diff = result.pop("diff")
    result.pop("errors")
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


def absent(module, node, found):
    params = module.params
    inputs = dict(found, ssh_connection=params["ssh_connection"] or ssh_connection(),
                  ansible_port=params["ansible_port"])
    plan = _firewall.plan_remove(node, inputs)
    ufw = found["ufw_path"]
    commands = [ufw_argv(ufw, args) for args in plan["delete"]]
    if plan["disable"]:
        commands.append([ufw, "-f", "disable"])
    done = []
    if not module.check_mode:
        for argv in commands:
            _run(module, argv, done)
        if plan["remove_marker"]:
            try:
                os.unlink(params["marker"])
            except FileNotFoundError:
                pass
    result = dict(plan, changed=bool(plan["pending"] or plan["remove_marker"]), commands=commands)
    diff = result.pop("diff")
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="present", choices=["present", "absent"]),
            check_only=dict(type="bool", default=False),
            networks=dict(type="list", elements="str", default=[]),
            port=dict(type="int"),
            consent=dict(type="bool", default=False),
            fabric_interfaces=dict(type="list", elements="str", default=[]),
            fabric_addresses=dict(type="list", elements="str", default=[]),
            container_ssh_port=dict(type="int", default=0),
            management_peers=dict(type="list", elements="str", default=[]),
            deployment=dict(type="str", default="default"),
            two_nodes=dict(type="bool", default=False),
            ssh_connection=dict(type="str", default=""),
            ansible_port=dict(type="int", default=22),
            marker=dict(type="path"),
            node_name=dict(type="str"),
        ),
        required_if=[("state", "present", ("port",))],
        supports_check_mode=True,
    )
    params = module.params
    if not params["check_only"] and not params["marker"]:
        module.fail_json(msg="marker: required (the file recording that this collection enabled ufw); pass "
                             "<specdec_state_dir>/firewall-ufw-enabled.json.")
    node = _node(module)
    found = read_ufw(module, params["marker"])
    if params["state"] == "absent":
        absent(module, node, found)
    present(module, node, found)


if __name__ == "__main__":
    main()
