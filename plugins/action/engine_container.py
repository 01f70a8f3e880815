# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.engine_container (documentation: plugins/modules/engine_container.py).

Runs community.docker.docker_container in check mode first; refuses, changing nothing, when that would recreate a
running container without consent, or when a bind-mount source is missing or of the wrong type; else applies it,
waits for the container's sshd on its first fabric address, and publishes the image facts. The decisions are in module_utils/_container.py.

With ``previous_record``, a consented recreation of a running container keeps it (stopped, renamed, recorded) until
the new container's server serves; ``previous: restore`` gives the node the kept container back, ``previous: release``
removes it. The state machine is in module_utils/_container_change.py.
"""

from __future__ import annotations

import base64
import datetime
import json
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.module_utils import _container
from ansible_collections.sparkops.specdec.plugins.module_utils import _container_change as _change
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

DOCKER_CONTAINER = "community.docker.docker_container"
DOCKER_EXEC = "community.docker.docker_container_exec"
DOCKER_INFO = "community.docker.docker_container_info"
COMMAND = "ansible.legacy.command"
SLURP = "ansible.legacy.slurp"
FILE = "ansible.legacy.file"
MOUNTS = "sparkops.specdec.engine_mounts"
# Written whole (a temporary file renamed over it): a record is never half written.
WRITE = 'umask 022; cat > "$1.tmp" && mv -f "$1.tmp" "$1"'
WAIT_FOR = "ansible.legacy.wait_for"
PACKAGE_VERSION = "import importlib.metadata as m; print(m.version('tensorrt_llm'))"
# Engine vllm: the version of its vllm package (the plan checks the method against it).
VLLM_PACKAGE_VERSION = "import importlib.metadata as m; print(m.version('vllm'))"
# Right after a node or container restart, docker exec can meet a container that is not Running yet ("Container ... is
# restarting, wait until the container is running"; seen on the lab after a node restart, when the read then counted as
# an image without the package): such a read is tried again, EXEC_TRIES times in all, EXEC_DELAY seconds apart.
EXEC_TRIES = 5
EXEC_DELAY = 2.0
EXEC_TRANSIENT = ("is restarting", "is not running", "is paused")

ARGUMENT_SPEC = {
    "spec": {"type": "dict", "default": {}},
    "allow_recreate": {"type": "bool", "default": False},
    "image": {"type": "dict", "default": {}},
    "trtllm_version": {"type": "str", "default": ""},
    "reference": {"type": "str", "default": ""},
    "engine": {"type": "str", "default": "trtllm", "choices": ["trtllm", "llamacpp", "vllm"]},
    "sshd_port": {"type": "int", "default": 0},
    "start_timeout": {"type": "int", "default": 300},
    "mount_stats": {"type": "list", "elements": "dict", "default": []},
    "previous_record": {"type": "str", "default": ""},
    "stop_command": {"type": "list", "elements": "str", "default": []},
    "previous": {"type": "str", "default": "keep", "choices": ["keep", "restore", "release"]},
    "files": {"type": "list", "elements": "dict", "default": []},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_async = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        if args["previous"] != "keep":
            try:
                return self._previous(result, args, task_vars)
            finally:
                self._remove_tmp_path(self._connection._shell.tmpdir)
        spec = dict(args["spec"])
        name = spec.get("name")
        if not name or not spec.get("image"):
            raise AnsibleActionFail("engine_container: spec needs name and image (from sparkops.specdec.trtllm_container_spec).")
        check = bool(self._task.check_mode)
        want_diff = bool(self._task.diff)
        try:
            # What docker_container would do, with the differences named (diff on), changing nothing.
            plan = _action.run_module(self, DOCKER_CONTAINER, spec, task_vars, check_mode=True, diff=True)
            if plan.get("failed"):
                return self._failed(result, plan, "docker_container (check mode)")
            # A change left pending by an earlier run: its record must name the containers as they are.
            path = args["previous_record"]
            record = self._read_record(path, task_vars) if path else {}
            kept_matches = False
            if record:
                problem = _change.pending_problem(record, plan.get("container"),
                                                  self._inspect(record["kept_name"], task_vars), path)
                if problem:
                    result.update(failed=True, changed=False, msg=problem, previous=dict(record, path=path))
                    return result
                if plan.get("changed"):
                    # Does the kept container already have the requested settings (the user backs out)?
                    kept_plan = _action.run_module(self, DOCKER_CONTAINER, dict(spec, name=record["kept_name"], state="present"),
                                                   task_vars, check_mode=True, diff=False)
                    kept_matches = not kept_plan.get("failed") and not kept_plan.get("changed")
            refusal = _container.recreate_refusal(plan, args["allow_recreate"], name)
            if refusal:
                result.update(failed=True, changed=False, msg=refusal, differences=_container.plan_differences(plan))
                return result
            run = plan
            if plan.get("changed") and not check and args["mount_stats"]:
                # Docker would create a missing bind-mount source as an empty directory (a missing host key file too).
                problems = _container.mount_problems(spec, args["mount_stats"])
                if problems:
                    result.update(failed=True, changed=False, msg="\n".join(problems), mount_problems=problems)
                    return result
            # The container's files (bind-mounted into it) only now: a refused run leaves the running container's.
            written = {}
            if args["files"]:
                written = _action.run_module(self, MOUNTS, {"files": args["files"]}, task_vars, check_mode=check, diff=want_diff)
                if written.get("failed"):
                    return self._failed(result, written, "engine_mounts (the container's files)")
            decision = _change.apply_decision(plan, args["allow_recreate"], record, kept_matches) if path else {}
            result["previous_action"] = decision
            if decision.get("action") == "restore" and not check:
                # Backed out: the kept container gets its name back (the same container), the record goes.
                back = self._restore(record, path, task_vars)
                if back.get("failed"):
                    result.update(failed=True, changed=bool(back.get("changed")), msg=back["msg"])
                    return result
                result["previous_restored"] = True
                record = {}
                run = {"changed": True, "container": back.get("container") or {}}
            elif plan.get("changed") and not check:
                kept = self._keep(spec, plan, record, decision, args, path, task_vars)
                if kept.get("failed"):
                    result.update(failed=True, changed=bool(kept.get("changed")), msg=kept["msg"])
                    return result
                record = kept.get("record", record)
                run = _action.run_module(self, DOCKER_CONTAINER, spec, task_vars, check_mode=False)
                if run.get("failed"):
                    if decision.get("action") == "keep":
                        # The new container could not be created: the kept one serves again at once.
                        back = self._restore(record, path, task_vars)
                        result["previous_restored"] = not back.get("failed")
                    return self._failed(result, run, "docker_container")
            result["changed"] = bool(run.get("changed")) or bool(written.get("changed"))
            result["container"] = run.get("container") or {}
            result["files"] = written.get("files") or []
            result["container_changed"] = bool(run.get("changed"))
            if check and "actions" in plan:
                result["actions"] = plan["actions"]
            diffs = []
            if want_diff and run.get("changed") and (run.get("diff") or plan.get("diff")):
                diffs.append(run.get("diff") or plan.get("diff"))
            if want_diff and written.get("changed"):
                diffs.extend(written.get("diff") or [])
            if diffs:
                result["diff"] = diffs[0] if len(diffs) == 1 else diffs

            port = args["sshd_port"]
            if port and not check:
                # sshd listens on the fabric addresses only; the container sees ssh_mesh's current mesh files through
                # its read-only mount (nothing to refresh in a kept container).
                host = _container.sshd_wait_address(spec)
                waited = _action.run_module(self, WAIT_FOR, {"host": host, "port": port, "timeout": args["start_timeout"]},
                                            task_vars, check_mode=False)
                if waited.get("failed"):
                    result.update(failed=True, msg="The sshd of container %s does not listen on %s:%s after %s s: %s "
                                  "(docker logs %s shows which fabric address it waits for)."
                                  % (name, host, port, args["start_timeout"], waited.get("msg", ""), name))
                    return result

            image = args["image"] or {}
            version, version_error = "", None
            # llama.cpp images have no TensorRT-LLM version to read (nor, often, python3).
            vllm = args["engine"] == "vllm"
            if ((vllm or (args["engine"] == "trtllm" and _container.needs_package_version(image, args["trtllm_version"])))
                    and (not check or result["container"])):
                version, version_error = self._exec_read(name, [
                    "python3", "-c", VLLM_PACKAGE_VERSION if vllm else PACKAGE_VERSION], task_vars)
            spec_types = None
            if args["engine"] == "llamacpp" and (not check or result["container"]):
                # The speculation types this llama-server build knows (the plan renders draft-eagle3 / draft-mtp only
                # when they are listed).
                read = _action.run_module(self, DOCKER_EXEC, {"container": name, "argv": ["llama-server", "--help"]},
                                          task_vars, check_mode=False)
                if not read.get("failed") and read.get("rc", 1) == 0:
                    spec_types = _container.llama_spec_types(read.get("stdout") or "")
            info = _container.image_info(spec["image"], image, version, args["reference"], result["container"],
                                         spec_types)
            if version_error:
                # Why the package version could not be read (the plan names it instead of "no package metadata").
                info["package_version_error"] = version_error
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result["image_info"] = info
        result["previous"] = dict(record, path=path) if record else {}
        result["ansible_facts"] = {"trtllm_container_image_info": info, "trtllm_container_previous": result["previous"]}
        return result

    def _exec_read(self, name, argv, task_vars):
        """(stdout, None) of ``argv`` run in container ``name``, or ("", the last line of why it failed, at most 300
        characters); a container that is not Running yet is tried again (EXEC_TRIES, EXEC_DELAY)."""
        why = ""
        for attempt in range(EXEC_TRIES):
            read = _action.run_module(self, DOCKER_EXEC, {"container": name, "argv": argv}, task_vars, check_mode=False)
            if not read.get("failed") and read.get("rc", 1) == 0:
                return read.get("stdout") or "", None
            lines = to_text(read.get("stderr") or read.get("msg") or "").strip().splitlines()
            why = (lines[-1] if lines else "exit status %s" % read.get("rc"))[:300]
            if attempt + 1 < EXEC_TRIES and any(t in to_text(read.get("msg") or "") + why for t in EXEC_TRANSIENT):
                time.sleep(EXEC_DELAY)
                continue
            break
        return "", why

    # ----------------------------------------------------------------- the kept previous container
    def _read_record(self, path, task_vars):
        read = _action.run_module(self, SLURP, {"src": path}, task_vars, check_mode=False)
        if read.get("failed"):
            return {}  # no record (the file is there only while a change is pending)
        try:
            text = base64.b64decode(read.get("content") or "").decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return {}
        return _change.parse_record(text)

    def _write_record(self, path, record, task_vars):
        return _action.run_module(self, COMMAND, {"argv": ["sh", "-c", WRITE, "sh", path],
                                                  "stdin": json.dumps(record, indent=2, sort_keys=True)},
                                  task_vars, check_mode=False)

    def _docker(self, step, task_vars):
        """One step of _container_change: remove, rename, start (the docker CLI renames: no module does)."""
        if step[0] == "remove":
            return _action.run_module(self, DOCKER_CONTAINER, {"name": step[1], "state": "absent", "force_kill": True},
                                      task_vars, check_mode=False)
        if step[0] == "rename":
            return _action.run_module(self, COMMAND, {"argv": ["docker", "rename", step[1], step[2]]}, task_vars, check_mode=False)
        if step[0] == "start":
            return _action.run_module(self, COMMAND, {"argv": ["docker", "start", step[1]]}, task_vars, check_mode=False)
        raise AnsibleActionFail("engine_container: unknown step %s" % (step,))

    def _inspect(self, name, task_vars):
        info = _action.run_module(self, DOCKER_INFO, {"name": name}, task_vars, check_mode=False)
        if info.get("failed"):
            raise AnsibleActionFail("docker_container_info %s failed: %s" % (name, info.get("msg")))
        return info.get("container") if info.get("exists") else None

    def _keep(self, spec, plan, record, decision, args, path, task_vars):
        """Before the apply: keep the running container (record, stop, rename) or note the newest request."""
        action = decision.get("action")
        if action not in ("keep", "replace") or not path:
            return {}
        differences = _container.plan_differences(plan)
        if action == "replace":
            if not record:
                return {}
            record = _change.updated_record(record, spec, differences, args["reference"])
        else:
            record = _change.new_record(spec, plan["container"], differences, args["reference"],
                                        datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                        _container.sshd_wait_address(spec) if args["sshd_port"] else "",
                                        args["sshd_port"], args["start_timeout"])
        if action == "keep" and args["stop_command"]:
            # Stops the server the way its owner does (which also withdraws its consent to be started again), so that
            # nothing starts it in the new container; the container itself is kept as it is.
            halted = _action.run_module(self, DOCKER_EXEC, {"container": spec["name"], "argv": args["stop_command"]}, task_vars,
                                        check_mode=False)
            if halted.get("failed") or halted.get("rc", 0) != 0:
                why = " ".join(str(halted.get("stderr") or halted.get("msg") or "").split())[:200]
                return {"failed": True, "changed": True,
                        "msg": "Stopping the server in %s before keeping it failed (%s): %s; the container was not "
                               "changed." % (spec["name"], " ".join(args["stop_command"]), why)}
        wrote = self._write_record(path, record, task_vars)
        if wrote.get("failed") or wrote.get("rc", 0) != 0:
            return {"failed": True, "msg": "Writing %s failed: %s; nothing was changed." % (
                path, " ".join(str(wrote.get("stderr") or wrote.get("msg") or "").split())[:200])}
        if action == "keep":
            stopped = _action.run_module(self, DOCKER_CONTAINER, {"name": spec["name"], "state": "stopped"}, task_vars,
                                         check_mode=False)
            renamed = stopped if stopped.get("failed") else self._docker(("rename", spec["name"], record["kept_name"]),
                                                                         task_vars)
            if renamed.get("failed") or renamed.get("rc", 0) != 0:
                back = self._restore(record, path, task_vars)
                return {"failed": True, "changed": True, "msg": "Keeping the running container %s as %s failed (%s); "
                        "%s." % (spec["name"], record["kept_name"], " ".join(str(renamed.get("msg") or renamed.get(
                            "stderr") or "").split())[:200], "it runs again" if not back.get("failed") else back["msg"])}
        return {"record": record}

    def _restore(self, record, path, task_vars):
        """Give the node its kept container back; returns {'changed', 'steps', 'container'} or failed and msg."""
        if not record:
            return {"changed": False, "steps": []}
        try:
            steps = _change.restore_steps(record, self._inspect(record["name"], task_vars),
                                          self._inspect(record["kept_name"], task_vars), path)
        except _change.ChangeError as exc:
            return {"failed": True, "msg": str(exc)}
        for step in steps:
            done = self._docker(step, task_vars)
            if done.get("failed") or done.get("rc", 0) != 0:
                return {"failed": True, "changed": True, "msg": "Restoring the container %s (step %s) failed: %s" % (
                    record["name"], " ".join(step), " ".join(str(done.get("msg") or done.get("stderr") or "").split())[:200])}
        sshd = record.get("sshd") or {}
        if sshd.get("port"):
            waited = _action.run_module(self, WAIT_FOR, {"host": sshd.get("host") or "127.0.0.1", "port": sshd["port"],
                                                         "timeout": sshd.get("timeout") or 300}, task_vars, check_mode=False)
            if waited.get("failed"):
                return {"failed": True, "changed": True, "msg": "The restored container %s does not listen on %s:%s: %s"
                        % (record["name"], sshd.get("host"), sshd["port"], waited.get("msg", ""))}
        forgot = _action.run_module(self, FILE, {"path": path, "state": "absent"}, task_vars, check_mode=False)
        if forgot.get("failed"):
            return {"failed": True, "changed": True, "msg": "Removing %s failed: %s" % (path, forgot.get("msg"))}
        return {"changed": bool(steps) or bool(forgot.get("changed")), "steps": [list(s) for s in steps],
                "container": self._inspect(record["name"], task_vars) or {}}

    def _previous(self, result, args, task_vars):
        """previous: restore or release, on the record at previous_record."""
        path = args["previous_record"]
        if not path:
            raise AnsibleActionFail("engine_container: previous: %s needs previous_record (the record's path)."
                                    % args["previous"])
        record = self._read_record(path, task_vars)
        result.update(changed=False, previous=dict(record, path=path) if record else {}, restored=False, summary="")
        # The node the record is on: the delegated host when a play's head runs this for every member.
        host = getattr(self._task, "delegate_to", None) or (task_vars or {}).get("inventory_hostname", "")
        if self._task.check_mode or not record:
            result["changed"] = bool(record)
            result["summary"] = _change.restored_summary(record, host, True) if record and args["previous"] == "restore" else ""
            return result
        if args["previous"] == "restore":
            done = self._restore(record, path, task_vars)
            if done.get("failed"):
                result.update(failed=True, changed=bool(done.get("changed")), msg=done["msg"])
                return result
            settings = _change.container_settings(done.get("container"))
            result.update(changed=done["changed"], restored=True, steps=done["steps"], container=done.get("container"),
                          summary=_change.restored_summary(record, host, True),
                          same_settings=settings == record["container"]["settings"])
            result["ansible_facts"] = {"trtllm_container_previous": {}}
            return result
        steps = _change.release_steps(record, self._inspect(record["kept_name"], task_vars))
        for step in steps:
            done = (self._docker(step, task_vars) if step[0] != "forget"
                    else _action.run_module(self, FILE, {"path": path, "state": "absent"}, task_vars, check_mode=False))
            if done.get("failed"):
                result.update(failed=True, msg="Releasing the kept container %s failed (step %s): %s" % (
                    record["kept_name"], step[0], done.get("msg")))
                return result
        result.update(changed=True, steps=[list(s) for s in steps])
        result["ansible_facts"] = {"trtllm_container_previous": {}}
        return result

    @staticmethod
    def _failed(result, inner, what):
        result.update(failed=True, changed=bool(inner.get("changed")),
                      msg="%s failed: %s" % (what, to_text(inner.get("msg") or inner.get("stderr") or inner)))
        return result
