# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.engine_sshd_image (documentation: plugins/modules/engine_sshd_image.py).

Which image the multi-node engine container runs so that it has sshd: one community.docker.docker_image_info call for
the image and its derived (or named) image, then, only where the decision needs it, a throw-away container of an image
(no network) that says whether /usr/sbin/sshd is there. The decision is module_utils/_container.sshd_image_plan.

An image's files are fixed by its id, so a probe's answer is kept on the controller (probe_cache, a JSON file: image id
and probe command -> has sshd) and not asked again of that image id: a warm run starts no probe container.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

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
    "probe_cache": {"type": "path", "default": ""},
}


def cache_key(image_id, command):
    """The probe cache's key: the image id (its files) and the probe's argv (what was asked of them)."""
    return "%s %s" % (image_id, hashlib.sha256(json.dumps(list(command)).encode()).hexdigest()[:16])


def load_cache(path):
    """The probe cache (key -> True/False); {} when there is none or it cannot be read (it is only a cache)."""
    if not path:
        return {}
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return dict((k, v) for k, v in data.items() if isinstance(v, bool)) if isinstance(data, dict) else {}


def save_cache(path, entries):
    """Add entries to the probe cache file (written whole, then renamed into place); False when it cannot be written."""
    if not path or not entries:
        return False
    try:
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, mode=0o700, exist_ok=True)
        merged = load_cache(path)
        merged.update(entries)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".sshd-probes-")
        with os.fdopen(fd, "w") as handle:
            json.dump(merged, handle, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def cached_probe(probe, ids, cache, learned):
    """probe, answered from cache (key -> bool) for an image whose id is known (ids: image name -> id); a fresh answer
    (exit status 0 = sshd, 3 = none; not an error) goes into learned."""
    def ask(image, command):
        key = cache_key(ids[image], command) if ids.get(image) else None
        if key and key in cache:
            return cache[key]
        result = probe(image, command)
        if key and (result or {}).get("status") in (0, 3):
            learned[key] = result["status"] == 0
        return result
    return ask


def plan_with_probes(settings, base_info, named_info, probe):
    """The decision, probing (probe(image, argv) -> docker_container result, or True/False) each image the decision
    asks about.

    base_info / named_info: docker image inspect of the image and of its derived (or named) image, None when absent.
    Returns (plan, probes) where probes maps each probed image to True/False.
    """
    probed = {}
    plan = _container.sshd_image_plan(settings, base_info, named_info, probed)
    while plan.get("probe") and plan["probe"] not in probed and len(probed) < MAX_PROBES:
        probed[plan["probe"]] = _container.probe_has_sshd(probe(plan["probe"], plan["probe_command"]))
        plan = _container.sshd_image_plan(settings, base_info, named_info, probed)
    return plan, probed


def split_images(names, images):
    """docker_image_info's images for [image, derived] (it lists the ones it found, in the order asked) as
    [image's inspect or None, derived's or None]; None when that cannot be told (one image, tagged by neither name)."""
    images = list(images or [])
    if len(images) == 2:
        return images
    if not images:
        return [None, None]
    if len(images) == 1:
        refs = set(images[0].get("RepoTags") or []) | set(images[0].get("RepoDigests") or [])
        base, derived = names
        if derived in refs and base not in refs:
            return [None, images[0]]
        if base in refs and derived not in refs:
            return [images[0], None]
    return None


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
                result.update(changed=False, probes={}, probes_cached=[], **plan)
                return result
            derived = args["sshd_image"] or _container.sshd_image_name(args["image"])
            names = [args["image"], derived]
            # One docker_image_info run for both names; only when its answer cannot be told apart (one image found
            # that neither name tags), one run per name.
            info = _action.run_module(self, IMAGE_INFO, {"name": names}, task_vars, check_mode=False)
            found = None if info.get("failed") else split_images(names, info.get("images"))
            if found is None:
                found = []
                for name in names:
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

            ids = {}
            for name, info in ((derived, found[1]), (args["image"], found[0])):
                if info and info.get("Id"):
                    ids[name] = str(info["Id"])
            cache = load_cache(args["probe_cache"])
            learned = {}
            plan, probes = plan_with_probes(settings, found[0], found[1], cached_probe(probe, ids, cache, learned))
            save_cache(args["probe_cache"], learned)
            cached = sorted(name for name in probes if ids.get(name) and cache_key(ids[name], plan["probe_command"]) in cache)
        except _container.ContainerError as exc:
            result.update(failed=True, changed=False, msg=str(exc))
            return result
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(changed=False, probes=probes, probes_cached=cached, **plan)
        return result
