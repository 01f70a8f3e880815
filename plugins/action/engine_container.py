# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.engine_container (documentation: plugins/modules/engine_container.py).

Runs community.docker.docker_container in check mode first; refuses, changing nothing, when that would recreate a
running container without consent, or when a bind-mount source is missing or of the wrong type; else applies it,
waits for the container's sshd on its first fabric address, and publishes the image facts. The decisions are in module_utils/_container.py.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.module_utils import _container

try:  # ansible-core 2.19+
    from ansible.executor.module_common import _apply_action_arg_defaults
except ImportError:  # pragma: no cover
    _apply_action_arg_defaults = None

DOCKER_CONTAINER = "community.docker.docker_container"
DOCKER_EXEC = "community.docker.docker_container_exec"
WAIT_FOR = "ansible.legacy.wait_for"
PACKAGE_VERSION = "import importlib.metadata as m; print(m.version('tensorrt_llm'))"

ARGUMENT_SPEC = {
    "spec": {"type": "dict", "required": True},
    "allow_recreate": {"type": "bool", "default": False},
    "image": {"type": "dict", "default": {}},
    "trtllm_version": {"type": "str", "default": ""},
    "reference": {"type": "str", "default": ""},
    "engine": {"type": "str", "default": "trtllm", "choices": ["trtllm", "llamacpp"]},
    "sshd_port": {"type": "int", "default": 0},
    "start_timeout": {"type": "int", "default": 300},
    "mount_stats": {"type": "list", "elements": "dict", "default": []},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_async = False
    _supports_check_mode = True

    def _module(self, name, args, task_vars, check_mode=None, diff=None):
        """Run a module on the node with this task's connection and module_defaults, in the given check/diff mode."""
        if _apply_action_arg_defaults is not None:
            args = _apply_action_arg_defaults(name, self._task, dict(args), self._templar)
        saved = (self._task.check_mode, self._task.diff)
        try:
            if check_mode is not None:
                self._task.check_mode = check_mode
            if diff is not None:
                self._task.diff = diff
            return self._execute_module(module_name=name, module_args=args, task_vars=task_vars)
        finally:
            self._task.check_mode, self._task.diff = saved

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        spec = dict(args["spec"])
        name = spec.get("name")
        if not name or not spec.get("image"):
            raise AnsibleActionFail("engine_container: spec needs name and image (from sparkops.specdec.trtllm_container_spec).")
        check = bool(self._task.check_mode)
        want_diff = bool(self._task.diff)
        try:
            # What docker_container would do, with the differences named (diff on), changing nothing.
            plan = self._module(DOCKER_CONTAINER, spec, task_vars, check_mode=True, diff=True)
            if plan.get("failed"):
                return self._failed(result, plan, "docker_container (check mode)")
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
            if plan.get("changed") and not check:
                run = self._module(DOCKER_CONTAINER, spec, task_vars, check_mode=False)
                if run.get("failed"):
                    return self._failed(result, run, "docker_container")
            result["changed"] = bool(run.get("changed"))
            result["container"] = run.get("container") or {}
            if check and "actions" in plan:
                result["actions"] = plan["actions"]
            if want_diff and result["changed"] and (run.get("diff") or plan.get("diff")):
                result["diff"] = run.get("diff") or plan.get("diff")

            port = args["sshd_port"]
            if port and not check:
                # sshd listens on the fabric addresses only; the container sees ssh_mesh's current mesh files through
                # its read-only mount (nothing to refresh in a kept container).
                host = _container.sshd_wait_address(spec)
                waited = self._module(WAIT_FOR, {"host": host, "port": port, "timeout": args["start_timeout"]},
                                      task_vars, check_mode=False)
                if waited.get("failed"):
                    result.update(failed=True, msg="The sshd of container %s does not listen on %s:%s after %s s: %s "
                                  "(docker logs %s shows which fabric address it waits for)."
                                  % (name, host, port, args["start_timeout"], waited.get("msg", ""), name))
                    return result

            image = args["image"] or {}
            version = ""
            # llama.cpp images have no TensorRT-LLM version to read (nor, often, python3).
            if (args["engine"] == "trtllm" and _container.needs_package_version(image, args["trtllm_version"])
                    and (not check or result["container"])):
                read = self._module(DOCKER_EXEC, {"container": name, "argv": ["python3", "-c", PACKAGE_VERSION]},
                                    task_vars, check_mode=False)
                if not read.get("failed") and read.get("rc", 1) == 0:
                    version = read.get("stdout") or ""
            info = _container.image_info(spec["image"], image, version, args["reference"], result["container"])
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result["image_info"] = info
        result["ansible_facts"] = {"trtllm_container_image_info": info}
        return result

    @staticmethod
    def _failed(result, inner, what):
        result.update(failed=True, changed=bool(inner.get("changed")),
                      msg="%s failed: %s" % (what, to_text(inner.get("msg") or inner.get("stderr") or inner)))
        return result
