# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.engine_sshd_image (documentation: plugins/modules/engine_sshd_image.py).

Which image the multi-node engine container runs so that it has sshd: one community.docker.docker_image_info call for
the image and its derived (or named) image, then, only where the decision needs it, a throw-away container of an image
(no network) that says whether /usr/sbin/sshd is there. The decision is module_utils/_container.sshd_image_plan.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.module_utils import _container
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action

IMAGE_INFO = "community.docker.docker_image_info"
DOCKER_CONTAINER = "community.docker.docker_container"
# At most the named image and then the base are probed (sshd_image_plan asks for one at a time).
MAX_PROBES = 2

ARGUMENT_SPEC = {
    "image": {"type": "str", "required": True},
    "multinode": {"type": "bool", "default": True},
    "sshd_image": {"type": "str", "default": ""},
    "sshd_build": {"type": "bool", "default": False},
    "probe_name": {"type": "str", "default": "sparkops-sshd-probe"},
}


def plan_with_probes(settings, base_info, named_info, probe):
    """The decision, probing (probe(image, argv) -> docker_container result) each image the decision asks about.

    base_info / named_info: docker image inspect of the image and of its derived (or named) image, None when absent.
    Returns (plan, probes) where probes maps each probed image to True/False.
    """
    probed = {}
    plan = _container.sshd_image_plan(settings, base_info, named_info, probed)
    while plan.get("probe") and plan["probe"] not in probed and len(probed) < MAX_PROBES:
        probed[plan["probe"]] = _container.probe_has_sshd(probe(plan["probe"], plan["probe_command"]))
        plan = _container.sshd_image_plan(settings, base_info, named_info, probed)
    return plan, probed


def _first_image(result):
    images = (result or {}).get("images") or []
    return images[0] if images else None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_async = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        settings = {"multinode": args["multinode"], "image": args["image"], "sshd_image": args["sshd_image"],
                    "sshd_build": args["sshd_build"]}
        try:
            if not args["multinode"]:
                plan = _container.sshd_image_plan(settings, None, None, {})
                result.update(changed=False, probes={}, **plan)
                return result
            derived = args["sshd_image"] or _container.sshd_image_name(args["image"])
            found = []
            for name in (args["image"], derived):
                info = _action.run_module(self, IMAGE_INFO, {"name": [name]}, task_vars, check_mode=False)
                if info.get("failed"):
                    result.update(failed=True, changed=False,
                                  msg="docker image inspect %s failed on the node: %s" % (name, info.get("msg", "")))
                    return result
                found.append(_first_image(info))

            def probe(image, command):
                # Exit status 3 = no sshd (probe_has_sshd reads the status); a throw-away container without network.
                return _action.run_module(self, DOCKER_CONTAINER, {
                    "name": args["probe_name"], "image": image, "entrypoint": command[:1], "command": command[1:],
                    "network_mode": "none", "detach": False, "cleanup": True, "state": "started"}, task_vars, check_mode=False)

            plan, probes = plan_with_probes(settings, found[0], found[1], probe)
        except _container.ContainerError as exc:
            result.update(failed=True, changed=False, msg=str(exc))
            return result
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(changed=False, probes=probes, **plan)
        return result
