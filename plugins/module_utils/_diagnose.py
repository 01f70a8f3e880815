# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: the support bundle of playbooks/diagnose.yml. Not a public API.
# Standard library only: the collection part runs on the nodes (module diagnose_info), the bundle part on
# the controller (action plugins diagnose_info and diagnose_bundle).
"""Support bundle: what is collected on a node, how each item is classified, the manifest and the tarball.

* ``ITEMS``: every item of a node, in bundle order: name -> (file name in the bundle, what it is).
* ``outcome(rc, stdout, stderr, what)``: one collected item from a command's result: ``ok``, ``missing``
  (program not installed, container or file absent: recorded, never a failure) or ``error``.
* ``tail(path, lines)``: the last lines of a (possibly large) log file.
* ``fabric_env(env)``: the NCCL_/UCX_/OMPI_/PMIX_ entries of a container's ``Config.Env``.
* ``build(nodes, controller, redactor, created)``: the bundle's files (redacted) and its manifest.
* ``tarball(root, files, mtime)``: the ``.tar.gz`` bytes (the action writes them 0600, atomically).
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile

SCHEMA_VERSION = 1
BUNDLE_PREFIX = 'sparkops-diagnose-'

# name -> (file in the bundle under nodes/<node>/, what it is). The order is the bundle's.
ITEMS = {
    'os': ('os.json', '/etc/os-release, uname and /proc/version (OS and kernel)'),
    'docker_version': ('docker-version.json', 'docker version'),
    'docker_info': ('docker-info.json', 'docker info (runtimes, storage driver, proxies with passwords removed)'),
    'nvidia_runtime': ('nvidia-runtime.json', 'the NVIDIA runtime: docker info runtimes, nvidia-ctk/nvidia-smi if present'),
    'container_inspect': ('container-inspect.json', 'docker container inspect of the engine container, secrets removed'),
    'container_env': ('container-env.json', 'NCCL_, UCX_, OMPI_ and PMIX_ variables of the container (Config.Env)'),
    'container_log': ('container-log.txt', 'docker logs --tail of the engine container (its entrypoint, sshd)'),
    'netplan': ('netplan', 'the netplan file(s) of netplan_qsfp (directory, one file each)'),
    'ip_addr': ('ip-addr.json', 'ip -j addr'),
    'ibdev2netdev': ('ibdev2netdev.txt', 'ibdev2netdev (RDMA device to interface map)'),
    'hostfile': ('openmpi-hostfile', 'the OpenMPI hostfile of the state directory'),
    'server_log': ('server.log.tail', 'the last lines of the server log of the state directory'),
    'state': ('state', 'the deployment state files (directory, one JSON file each)'),
}
CONTROLLER_ITEMS = {
    'preflight_report': ('preflight-report.json', 'the preflight report (playbooks/preflight.yml), if present'),
}
FABRIC_PREFIXES = ('NCCL_', 'UCX_', 'OMPI_', 'PMIX_')
MANAGED_MARK = 'Managed by sparkops.specdec'
# What the bundle's redaction removes (manifest.json says so to whoever reads the bundle).
REDACTED = (
    'every form of the secrets given (raw, JSON/repr-escaped, URL-encoded, base64 also of user:secret, Bearer) '
    'replaced by ********',
    'values of secret-looking names (HF_TOKEN, *_PASSWORD, API_KEY, ...) in mappings, NAME=value strings and '
    'key: value / KEY=value lines',
    'any Bearer/Basic credential and the password of scheme://user:password@ URLs',
)

_MISSING_PATTERNS = (
    re.compile(r'(?i)no such (container|object|file or directory)'),
    re.compile(r'(?i)command not found'),
)


def item(status, reason='', source='', content=None, fmt='text'):
    """One collected item (the module's return format)."""
    return {'status': status, 'reason': reason, 'source': source, 'content': content, 'format': fmt}


def outcome(rc, stdout, stderr, what, fmt='text'):
    """A command's result as an item: ok (rc 0), missing (rc 127 or an absent object), else error.

    A JSON item whose stdout does not parse is an error naming the command.
    """
    stdout = stdout or ''
    stderr = (stderr or '').strip()
    if rc == 0:
        if fmt == 'json':
            try:
                return item('ok', source=what, content=json.loads(stdout), fmt='json')
            except ValueError as exc:
                return item('error', 'the output of %s is not JSON (%s)' % (what, exc), what)
        return item('ok', source=what, content=stdout)
    first = stderr.splitlines()[0] if stderr else 'exit code %s' % rc
    if rc == 127 or any(p.search(stderr) for p in _MISSING_PATTERNS):
        return item('missing', first, what)
    return item('error', '%s failed (rc %s): %s' % (what, rc, first), what)


def tail(path, lines, block=65536):
    """The last ``lines`` lines of the file at path (text, undecodable bytes replaced); OSError is raised."""
    lines = max(int(lines), 0)
    if not lines:
        return ''
    with open(path, 'rb') as handle:
        handle.seek(0, os.SEEK_END)
        end = handle.tell()
        data = b''
        pos = end
        while pos > 0 and data.count(b'\n') <= lines:
            step = min(block, pos)
            pos -= step
            handle.seek(pos)
            data = handle.read(step) + data
    text = data.decode('utf-8', 'replace')
    kept = text.splitlines(True)[-lines:]
    return ''.join(kept)


def fabric_env(env):
    """NAME -> value of the fabric/MPI variables in a Config.Env list ("NAME=value")."""
    out = {}
    for entry in env or ():
        name, sep, value = str(entry).partition('=')
        if sep and name.startswith(FABRIC_PREFIXES):
            out[name] = value
    return out


def _safe_name(name):
    """A path component for the bundle (host names and file names as given, minus path tricks)."""
    name = re.sub(r'[^A-Za-z0-9._@+-]', '_', str(name)).lstrip('.')
    return name or '_'


def _dump(data):
    return (json.dumps(data, indent=2, sort_keys=True) + '\n').encode('utf-8')


def _files_of(base, filename, got, redactor):
    """(files, relative paths) of one ok item, redacted. Directory items hold {name: content}."""
    files = []
    content = got.get('content')
    if got.get('format') == 'dir':
        for name in sorted(content or {}):
            sub = content[name]
            path = '%s/%s/%s' % (base, filename, _safe_name(name))
            if isinstance(sub, (dict, list)):
                files.append((path, _dump(redactor.data(sub))))
            else:
                files.append((path, redactor.text(sub).encode('utf-8')))
        return files
    path = '%s/%s' % (base, filename)
    if got.get('format') == 'json':
        files.append((path, _dump(redactor.data(content))))
    else:
        files.append((path, redactor.text(content).encode('utf-8')))
    return files


def _entry(got, files):
    entry = {'status': got.get('status', 'error'), 'reason': got.get('reason') or '', 'source': got.get('source') or ''}
    if files:
        entry['files'] = [name for name, _data in files]
    return entry


def gave_up_lines(node, state_item):
    """'node: <state file>: the supervisor gave up ...' for each state file of a node's ``state`` item that records the
    supervisor's give-up (key supervisor_gave_up, written by specdec_supervisor.py after its cap of failed starts)."""
    lines = []
    if not isinstance(state_item, dict) or state_item.get('status') != 'ok' or state_item.get('format') != 'dir':
        return lines
    for name in sorted(state_item.get('content') or {}):
        state = state_item['content'][name]
        entry = state.get('supervisor_gave_up') if isinstance(state, dict) else None
        if isinstance(entry, dict):
            lines.append('%s: %s: the supervisor gave up at %s after %s consecutive failed starts (last: %s); a start '
                         'by the deploy playbook clears it' % (node, name, entry.get('at'), entry.get('failed_starts'),
                                                               entry.get('last_failure')))
    return lines


def build(nodes, controller, redactor, created):
    """The bundle: ([(path in the bundle, bytes)], manifest dict).

    ``nodes``: node -> its items (ITEMS names -> item dicts), or None for a node that returned nothing
    (unreachable, or the collection failed; its ``reason`` in ``controller['node_errors']``).
    ``controller``: {'items': {CONTROLLER_ITEMS name -> item}, 'node_errors': {node: reason}}.
    Every file's content goes through ``redactor`` (data() for JSON, text() for text) and so do the
    reasons in the manifest. Missing items are listed in the manifest's ``missing`` ("node: item (reason)"); state
    files that record a give-up of the supervisor in its ``supervisor_gave_up`` (gave_up_lines).
    """
    files = []
    manifest = {'schema_version': SCHEMA_VERSION, 'created': created, 'nodes': {}, 'controller': {}, 'missing': [],
                'errors': [], 'items': dict((k, v[1]) for k, v in list(ITEMS.items()) + list(CONTROLLER_ITEMS.items())),
                'redacted': list(REDACTED), 'supervisor_gave_up': []}
    node_errors = (controller or {}).get('node_errors') or {}
    for node in sorted(nodes):
        got_items = nodes[node]
        base = 'nodes/%s' % _safe_name(node)
        if got_items is None:
            reason = redactor.text(node_errors.get(node) or 'no result from the node (unreachable or failed)')
            manifest['nodes'][node] = {'collected': False, 'reason': reason, 'items': {}}
            manifest['errors'].append('%s: not collected (%s)' % (node, reason))
            continue
        entries = {}
        for name, (filename, _what) in ITEMS.items():
            got = got_items.get(name) or item('error', 'not returned by the node')
            got = dict(got, reason=redactor.text(got.get('reason') or ''))
            item_files = _files_of(base, filename, got, redactor) if got.get('status') == 'ok' else []
            files.extend(item_files)
            entries[name] = _entry(got, item_files)
            if got.get('status') == 'missing':
                manifest['missing'].append('%s: %s (%s)' % (node, name, got['reason']))
            elif got.get('status') != 'ok':
                manifest['errors'].append('%s: %s (%s)' % (node, name, got['reason']))
        manifest['nodes'][node] = {'collected': True, 'items': entries}
        manifest['supervisor_gave_up'].extend(redactor.text(line) for line in gave_up_lines(node, got_items.get('state')))
    for name, (filename, _what) in CONTROLLER_ITEMS.items():
        got = ((controller or {}).get('items') or {}).get(name) or item('missing', 'not collected')
        got = dict(got, reason=redactor.text(got.get('reason') or ''))
        item_files = _files_of('controller', filename, got, redactor) if got.get('status') == 'ok' else []
        files.extend(item_files)
        manifest['controller'][name] = _entry(got, item_files)
        if got.get('status') == 'missing':
            manifest['missing'].append('controller: %s (%s)' % (name, got['reason']))
        elif got.get('status') != 'ok':
            manifest['errors'].append('controller: %s (%s)' % (name, got['reason']))
    files.insert(0, ('manifest.json', _dump(manifest)))
    return files, manifest


def secret_values(value):
    """The non-empty secrets of a task's secrets option (a string or a list); ValueError for anything else."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError('secrets must be a list of strings (e.g. ["{{ specdec_server_hf_token }}"]), not %s'
                         % type(value).__name__)
    out = []
    for entry in value:
        if isinstance(entry, bytes):
            entry = entry.decode('utf-8', 'replace')
        if entry is not None and str(entry).strip():
            out.append(str(entry))
    return out


def default_path(directory, stamp):
    """<directory>/sparkops-diagnose-<stamp>.tar.gz."""
    return os.path.join(directory, '%s%s.tar.gz' % (BUNDLE_PREFIX, stamp))


def tarball(root, files, mtime):
    """The gzip tarball (bytes) of files [(relative path, bytes)] under root/, each member mode 0600 with mtime.
    The diagnose_bundle action writes it with plugin_utils/_files.write_private (0600, atomic)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode='w:gz') as tar:
        for name, data in files:
            info = tarfile.TarInfo('%s/%s' % (root, name))
            info.size = len(data)
            info.mtime = int(mtime)
            info.mode = 0o600
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
