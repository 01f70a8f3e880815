"""Printed as one JSON document by `docker exec -i <node> python3 - < node_state.py` (molecule/layouts verify): the
files of /etc/netplan (name -> sha256 of the content, and whether it carries this collection's mark) and the IPv4
addresses of the ConnectX-7 interfaces (name -> [address/prefix])."""
import hashlib
import json
import os
import subprocess

MARK = "Managed by " + "sparkops.specdec"
CX7 = ("enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1")
files = {}
for name in sorted(os.listdir("/etc/netplan")):
    with open(os.path.join("/etc/netplan", name), "rb") as handle:
        data = handle.read()
    files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "ours": MARK.encode() in data}
links = json.loads(subprocess.run(["ip", "-j", "-4", "addr", "show"], stdout=subprocess.PIPE, check=True).stdout)
addresses = {link["ifname"]: ["%s/%s" % (a["local"], a["prefixlen"]) for a in link.get("addr_info", [])]
             for link in links if link["ifname"] in CX7}
print(json.dumps({"netplan": files, "addresses": addresses}))
