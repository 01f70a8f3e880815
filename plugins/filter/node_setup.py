# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PRIVATE filters of the trtllm_container role (the logic is in module_utils/_container.py).

- ``settings | sparkops.specdec.trtllm_container_spec``: the docker_container parameters of the engine container.
- ``settings | sparkops.specdec.trtllm_container_mounts``: its bind mounts, each with the type its source must have
  (file or directory), what it is and the fix; sparkops.specdec.engine_mounts looks at each source for
  engine_container's check.
- ``msg | sparkops.specdec.trtllm_sshd_build_failure(image, base, host)``: the one-line error of a failed build of
  the image with sshd (which image that is: the action sparkops.specdec.engine_sshd_image).
- ``image | sparkops.specdec.trtllm_image_reference_problems(source)``: the problems of the image reference before
  anything changes (a malformed digest, a digest with an archive); ``pulled |
  sparkops.specdec.trtllm_image_problems(me, image)`` (``pulled``: each node's ``trtllm_container_pulled``): after
  the pull or load, a pinned image that does not carry its digest, and different images under one name on the nodes
  of the deployment (TP=2 ranks run one build);
  ``msg | sparkops.specdec.trtllm_image_fetch_failure(image, source, host, archive)``: the one-line error of a failed
  pull or load (what docker's message means, and the fix).
- ``specs | sparkops.specdec.trtllm_container_sshd_targets(hostfile_hosts)`` (``specs``: each node's
  ``trtllm_container_spec``): what the head probes before mpirun (module container_sshd_wait): each hostfile address
  with the node whose container sshd listens there.
- ``fabric | sparkops.specdec.fabric_hostfile_hosts(layout, head, management)`` (``fabric``: each node's
  ``netplan_qsfp_fabric``, in the deployment's fabric order; ``management``: each node's management address): the
  OpenMPI hostfile's addresses, head first, in the layout's plan (issue 24; an accepted 4-node ring's on the
  management network).

A refusal fails the task that uses the filter, before the task changes anything, with a one-line message.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.module_utils import _container, _layout


def trtllm_container_spec(settings):
    try:
        return _container.container_spec(dict(settings))
    except _container.ContainerError as exc:
        raise AnsibleFilterError(str(exc)) from None


def trtllm_container_mounts(settings):
    return _container.container_mounts(dict(settings))


def trtllm_sshd_build_failure(message, image, base, host):
    """The one-line error of a failed build of the derived image (its first cause and the air-gapped way out)."""
    return _container.sshd_build_failure(message, image, base, host)


# The trtllm_container role's registered pull or load of trtllm_container_image (community.docker.docker_image).


def trtllm_image_reference_problems(image, source="pull"):
    """[] or one line: a malformed digest, or a reference pinned by digest with trtllm_container_image_source archive."""
    try:
        problem = _container.pinned_source_problem(image, str(source))
    except _container.ContainerError as exc:
        return [str(exc)]
    return [problem] if problem else []


def trtllm_image_fetch_failure(message, image, source, host, archive=""):
    """The one-line error of a failed pull or load of image on host (module_utils/_container.image_fetch_failure)."""
    return _container.image_fetch_failure(message, image, str(source), host, archive=str(archive or ""))


def trtllm_image_problems(pulled, me, image):
    """[] or the one-line refusals after the pull or load: this node's image does not carry the pinned digest, or the
    nodes hold different images under image. ``pulled`` maps each node of the deployment (this node alone for a
    single Spark) to its published ``trtllm_container_pulled`` (docker_image's result; None for a node that has none)."""
    if not isinstance(pulled, Mapping):
        raise AnsibleFilterError("trtllm_image_problems: expected a mapping of node to trtllm_container_pulled, got %s"
                                 % type(pulled).__name__)
    problems = []
    try:
        _container.image_identity(image, (pulled.get(me) or {}).get("image"))
    except _container.ContainerError as exc:
        problems.append(str(exc))
    images = {host: result for host, result in pulled.items() if isinstance(result, Mapping)}
    line = _container.same_image_problem(images, image)
    if line:
        problems.append(line)
    return problems


def trtllm_container_sshd_targets(specs, hostfile_hosts):
    """What the head probes before mpirun (module container_sshd_wait): [{'node', 'address'}], one per
    hostfile address, each named by the node whose container sshd listens there. ``specs`` maps each node of the
    deployment to its published ``trtllm_container_spec`` (SSHD_LISTEN_ADDRESSES in its env; None for a node that has
    none)."""
    if not isinstance(specs, Mapping):
        raise AnsibleFilterError("trtllm_container_sshd_targets: expected a mapping of node to trtllm_container_spec, "
                                 "got %s" % type(specs).__name__)
    listen = {}
    for host, spec in specs.items():
        spec = spec if isinstance(spec, Mapping) else {}
        listen[host] = str((spec.get("env") or {}).get(_container.LISTEN_ENV) or "").split()
    try:
        return _container.sshd_targets(hostfile_hosts, listen)
    except _container.ContainerError as exc:
        raise AnsibleFilterError(str(exc)) from None


def fabric_hostfile_hosts(fabric, layout, head, management=None):
    """The OpenMPI hostfile's addresses of a deployment, head first (module_utils/_layout.hostfile_addresses):
    ``fabric`` maps each node, in the deployment's fabric order, to its published ``netplan_qsfp_fabric``;
    ``management`` each node to its management address (an accepted 4-node ring is reached over it)."""
    if not isinstance(fabric, Mapping):
        raise AnsibleFilterError("fabric_hostfile_hosts: expected a mapping of node to netplan_qsfp_fabric, got %s"
                                 % type(fabric).__name__)
    published = {str(h): (f if isinstance(f, Mapping) else {}) for h, f in fabric.items()}
    hosts, error = _layout.hostfile_addresses(None if layout in (None, "", _layout.AUTO) else str(layout), str(head),
                                              list(published), published,
                                              dict(management) if isinstance(management, Mapping) else None)
    if error:
        raise AnsibleFilterError(error)
    return hosts


class FilterModule(object):
    def filters(self):
        return {
            "trtllm_container_spec": trtllm_container_spec,
            "trtllm_container_mounts": trtllm_container_mounts,
            "trtllm_sshd_build_failure": trtllm_sshd_build_failure,
            "trtllm_image_reference_problems": trtllm_image_reference_problems,
            "trtllm_image_problems": trtllm_image_problems,
            "trtllm_image_fetch_failure": trtllm_image_fetch_failure,
            "trtllm_container_sshd_targets": trtllm_container_sshd_targets,
            "fabric_hostfile_hosts": fabric_hostfile_hosts,
        }
