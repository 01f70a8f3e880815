#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_mounts
short_description: The engine container's host directories and bind-mount sources, in one call on the node
version_added: 0.3.0
description:
  - Runs on the node, as root (C(become)). Used by the C(trtllm_container) role before it decides about the engine
    container.
  - Ensures each of O(directories) is a directory owned by O(owner) with mode O(mode), as
    M(ansible.builtin.file) with C(state=directory) would (missing parent directories are created with the same owner
    and mode; the group is left alone). A path that exists as anything but a directory (or a symbolic link to one) is
    an error; nothing is changed on the node then.
  - Looks for O(python_modules) in the node's Python (the C(trtllm_container) role installs C(python3-requests) only
    when C(requests) is missing).
  - Then looks at the source of each of O(mounts) (following symbolic links, as M(ansible.builtin.stat) with
    C(follow=true)) and returns RV(mount_stats) in the shape of that stat loop's results, which the
    M(sparkops.specdec.engine_container) action checks before a container is created or started (Docker would create a
    missing source as an empty directory owned by root).
  - One call (one round trip) instead of a M(ansible.builtin.file) loop and a M(ansible.builtin.stat) loop (eight
    module runs on a two-node pair's warm re-run). Written for this collection because no maintained module creates
    several directories and stats several paths in one call.
author:
  - sparkops maintainers (@sparkops)
options:
  directories:
    description: Absolute paths of the directories the container needs (the state directory, its C(deployments/), the
      Hugging Face cache), in creation order.
    type: list
    elements: path
    default: []
  owner:
    description: The user that owns O(directories) (the deploy user). Required with O(directories).
    type: str
  mode:
    description: The mode of O(directories), octal as a string.
    type: str
    default: '0755'
  python_modules:
    description: Python modules to look for in the Python this module runs with (the one Ansible runs every module
      with on the node); those it cannot import are returned in RV(python_modules_missing). For example V(requests),
      which the C(community.docker) modules need. Only looked for (C(importlib.util.find_spec)), never imported.
    type: list
    elements: str
    default: []
  files:
    description:
      - Files to write, each C(path) (absolute), C(content) (text) and C(mode) (octal string), as
        M(ansible.builtin.copy) with C(content) would write them as the user the module runs as (the content compared
        byte for byte, then written to a temporary name in the same directory and renamed into place; a mode that
        differs is set). The M(sparkops.specdec.engine_container) action writes the container's files with it
        (entrypoint, OpenMPI hostfile, supervisor) once it has decided about the container, one call for all of them.
      - A path that exists as anything but a regular file (or a link to one) is an error; nothing is changed then.
    type: list
    elements: dict
    default: []
  mounts:
    description: The bind mounts to look at - the items of the filter C(sparkops.specdec.trtllm_container_mounts), each
      with C(source) (absolute path) and the other keys returned unchanged in the C(item) of RV(mount_stats).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: full
    details: Reports which directories would be created or changed and which files written; creates and changes
      nothing. RV(mount_stats) is the node as it is (a directory check mode would create is reported missing, as a
      stat loop reports it).
  diff_mode:
    support: full
    details: Before and after (state, owner, mode) of each directory it creates or changes, and the content (and
      mode) of each file it writes.
  idempotent:
    support: full
notes:
  - "Errors a user can meet (each one line, before any change): O(owner) is not a user of the node; a path in
    O(directories) that is not absolute; a path in O(directories) (or one of its parents) that exists and is not a
    directory; O(mode) that is not octal. A source that cannot be looked at (a parent directory without search
    permission) is not an error here: its RV(mount_stats) entry has C(failed) and C(msg), and the container's check
    reports it."
seealso:
  - module: sparkops.specdec.engine_container
  - module: ansible.builtin.file
  - module: ansible.builtin.stat
"""

EXAMPLES = r"""
- name: Create the container's directories and look at its bind-mount sources
  sparkops.specdec.engine_mounts:
    directories: [/var/lib/sparkops-specdec, /var/lib/sparkops-specdec/deployments, /home/spark/.cache/huggingface]
    owner: spark
    python_modules: [requests]
    mounts: "{{ settings | sparkops.specdec.trtllm_container_mounts }}"
  become: true
  register: mounts
"""

RETURN = r"""
directories:
  description: Each of O(directories) and what was done (or, in check mode, would be done).
  returned: always
  type: list
  elements: dict
  contains:
    path: {description: The directory., type: str}
    created: {description: It (or a parent of it) did not exist., type: bool}
    changed: {description: 'It was created, or its owner or mode changed.', type: bool}
files:
  description: Each of O(files) (its C(path)) and whether it was (or, in check mode, would be) written.
  returned: always
  type: list
  elements: dict
  contains:
    path: {description: The file., type: str}
    changed: {description: 'Its content or mode changed, or it was created.', type: bool}
python_modules_missing:
  description: The O(python_modules) the node's Python cannot import.
  returned: always
  type: list
  elements: str
  sample: [requests]
mount_stats:
  description: One entry per O(mounts) item, as an M(ansible.builtin.stat) loop result - C(item) (the mount as given)
    and C(stat) (C(exists), C(isdir), C(isreg), C(islnk)), or C(failed) and C(msg) when the source cannot be looked
    at.
  returned: always
  type: list
  elements: dict
  sample:
    - item: {source: /var/lib/sparkops-specdec, type: directory}
      stat: {exists: true, isdir: true, isreg: false, islnk: false}
"""

import importlib.util
import os
import pwd
import stat as statmod
import tempfile

from ansible.module_utils.basic import AnsibleModule


class MountsError(Exception):
    """A one-line error for the user; nothing was changed."""


def _mode(value):
    try:
        mode = int(str(value), 8)
    except ValueError:
        raise MountsError("mode: %r is not an octal mode; give it as a string such as '0755'." % (value,))
    if mode < 0 or mode > 0o7777:
        raise MountsError("mode: %r is out of range; give it as a string such as '0755'." % (value,))
    return mode


def _owner_uid(owner):
    try:
        return pwd.getpwnam(owner).pw_uid
    except KeyError:
        raise MountsError("owner: %s is not a user of this node (getent passwd %s); set it to the deploy user."
                          % (owner, owner))


def _describe(path):
    """{'state', 'owner', 'mode'} of path for the diff ('absent' when missing)."""
    try:
        st = os.stat(path)
    except OSError:
        return {"path": path, "state": "absent"}
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    return {"path": path, "state": "directory" if statmod.S_ISDIR(st.st_mode) else "file", "owner": owner,
            "mode": "%04o" % statmod.S_IMODE(st.st_mode)}


def plan_directories(directories, uid, mode):
    """The steps that make each directory right: [(path, action)] with action 'mkdir' or 'fix', in order.

    Raises MountsError when a path (or a parent) exists and is not a directory, or is not absolute.
    """
    steps = []
    planned = set()
    for path in directories:
        path = os.path.normpath(str(path))
        if not os.path.isabs(path):
            raise MountsError("directories: %s is not an absolute path; give the full path." % path)
        chain = []
        current = path
        while current not in ("/", "") and current not in planned and not os.path.isdir(current):
            if os.path.lexists(current):
                raise MountsError(
                    "%s exists and is not a directory (the engine container needs a directory %s): move it away, "
                    "then re-run. Nothing was changed." % (current, path))
            chain.append(current)
            current = os.path.dirname(current)
        for missing in reversed(chain):
            steps.append((missing, "mkdir"))
            planned.add(missing)
        if path not in planned:
            st = os.stat(path)
            if st.st_uid != uid or statmod.S_IMODE(st.st_mode) != mode:
                steps.append((path, "fix"))
            planned.add(path)
    return steps


def plan_files(files):
    """[(path, content bytes, mode, before bytes or None, before mode or None, changed)] of each entry of files.

    Raises MountsError, before any change, on a path that is not absolute or exists as anything but a regular file.
    """
    planned = []
    for entry in files:
        entry = entry or {}
        path = os.path.normpath(str(entry.get("path") or ""))
        if not os.path.isabs(path):
            raise MountsError("files: %r is not an absolute path; give the full path." % (entry.get("path"),))
        content = str(entry.get("content") if entry.get("content") is not None else "").encode("utf-8")
        mode = _mode(entry.get("mode") or "0644")
        before = before_mode = None
        if os.path.lexists(path):
            if not os.path.isfile(path):
                raise MountsError("%s exists and is not a regular file (the engine container needs a file there): move "
                                  "it away, then re-run. Nothing was changed." % path)
            with open(path, "rb") as handle:
                before = handle.read()
            before_mode = statmod.S_IMODE(os.stat(path).st_mode)
        planned.append((path, content, mode, before, before_mode, before != content or before_mode != mode))
    return planned


def write_file(path, content, mode):
    """Write content to a temporary name beside path, set mode, rename it into place (path keeps its name)."""
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        os.chmod(tmp, mode)
        os.replace(tmp, os.path.realpath(path) if os.path.islink(path) else path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def _text(data):
    return data.decode("utf-8", "replace") if data is not None else ""


def apply_steps(steps, uid, mode):
    for path, action in steps:
        if action == "mkdir":
            os.mkdir(path, mode)
        os.chown(path, uid, -1)
        os.chmod(path, mode)


def mount_stat(mount):
    """The ansible.builtin.stat (follow: true) loop result of a mount's source, reduced to what is checked."""
    source = str((mount or {}).get("source") or "")
    result = {"item": mount, "changed": False}
    try:
        if not os.path.lexists(source):
            result["stat"] = {"exists": False}
            return result
        link = os.path.islink(source)
        try:
            st = os.stat(source)
        except FileNotFoundError:
            result["stat"] = {"exists": True, "isdir": False, "isreg": False, "islnk": True}
            return result
        result["stat"] = {"exists": True, "isdir": statmod.S_ISDIR(st.st_mode), "isreg": statmod.S_ISREG(st.st_mode),
                          "islnk": link}
    except OSError as err:
        result.update(failed=True, msg="cannot look at %s: %s" % (source, err.strerror or err))
    return result


def run(module):
    params = module.params
    directories = [str(path) for path in params["directories"] or []]
    result = {"changed": False, "directories": [], "files": [], "mount_stats": []}
    if directories and not params["owner"]:
        raise MountsError("owner: missing; give the user that owns directories (the deploy user).")
    mode = _mode(params["mode"])
    steps = []
    if directories:
        uid = _owner_uid(params["owner"])
        steps = plan_directories(directories, uid, mode)
    planned = plan_files(params["files"] or [])
    before = [_describe(path) for path, _action in steps]
    if steps and not module.check_mode:
        apply_steps(steps, uid, mode)
    stepped = dict(steps)
    for path in directories:
        path = os.path.normpath(path)
        result["directories"].append({"path": path, "created": stepped.get(path) == "mkdir", "changed": path in stepped})
    if steps:
        result["changed"] = True
        if module._diff:
            after = [{"path": path, "state": "directory", "owner": params["owner"], "mode": "%04o" % mode}
                     for path, _action in steps]
            result["diff"] = [{"before_header": item["path"], "after_header": item["path"], "before": before_item,
                               "after": after_item}
                              for item, before_item, after_item in zip(after, before, after)]
    for path, content, file_mode, old, old_mode, changed in planned:
        if changed and not module.check_mode:
            write_file(path, content, file_mode)
        result["files"].append({"path": path, "changed": changed})
        if changed:
            result["changed"] = True
            if module._diff:
                mode_note = old_mode not in (None, file_mode)
                result.setdefault("diff", []).append({
                    "before_header": path if old is not None else "%s (absent)" % path, "after_header": path,
                    "before": _text(old) + ("# mode %04o\n" % old_mode if mode_note else ""),
                    "after": _text(content) + ("# mode %04o\n" % file_mode if mode_note else "")})
    result["mount_stats"] = [mount_stat(mount) for mount in params["mounts"] or []]
    result["python_modules_missing"] = [name for name in params["python_modules"] or [] if not _importable(name)]
    return result


def _importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="path", default=[]),
            owner=dict(type="str"),
            mode=dict(type="str", default="0755"),
            files=dict(type="list", elements="dict", default=[]),
            mounts=dict(type="list", elements="dict", default=[]),
            python_modules=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except MountsError as err:
        module.fail_json(msg=str(err), changed=False)
    except OSError as err:
        module.fail_json(msg="%s: %s" % (getattr(err, "filename", "") or "engine_mounts", err.strerror or err),
                         changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
