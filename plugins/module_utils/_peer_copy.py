# -*- coding: utf-8 -*-
# PRIVATE to the sparkops.specdec collection: helpers for hf_peer_manifest, hf_peer_copy, docker_image_peer_copy,
# the peer_copy_role filters and the plan. Not a public API; it may change in any release without notice.
#
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Fetch once per pair: one node downloads a model from the Hub (and pulls or loads the engine image), its peer
copies it over the fabric.

* ``peer_copy_role`` (controller): which node of a deployment fetches (its head) and which receive, and the
  head's fabric address the receivers copy from. The copy runs ``ssh`` as the deploy user, so it is used only where
  the SSH mesh is that user's (``mesh_user_decision``: ``auto`` falls back to every node fetching by itself and
  says why; ``true`` with another ``ssh_mesh_user`` is a one-line error); ``plan_peer_copy`` gives the plan the same
  verdict before any change.
* ``sender_manifest`` (on the head, read-only): the files of the downloaded commit with size, the HF etag and a
  sha256 per file: the Hub's recorded sha256 for LFS files (their etag), else the sha256 of the head's file.
* ``receive`` (on the peer): every file not already complete is streamed from the head (by default
  ``ssh <head fabric address> cat -- <path>`` with the SSH mesh's key and pinned host keys: nothing is installed)
  into a temporary name beside its final place, hashed while it is written, checked by size and sha256 against
  the manifest, and only then renamed to its final name in huggingface_hub's layout (cache blob plus snapshot
  link, or local_dir file plus download metadata). A mismatch removes the temporary file and fails with one line
  naming the file. The commit's listing and ref are recorded as hf_download records them, so ``hf_download``
  with ``offline=true`` accepts the copy, and a second run finds every file complete and copies nothing.
* ``copy_image`` (on the peer, when it has no image under the name): the head's ``docker save`` streamed over SSH into
  the peer's ``docker load`` (Docker checks each layer against the image config), then the id the name got must be the
  head's; otherwise the wrong image is untagged and the copy fails with one line.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.sparkops.specdec.plugins.module_utils._hf import (
    REGEX_COMMIT,
    REGEX_SHA256,
    RemoteFile,
    _unlink,
    select_paths,
)
from ansible_collections.sparkops.specdec.plugins.module_utils._netplan import addresses_in_subnets

CHUNK = 4 * 1024 * 1024
TEMP_PREFIX = '.sparkops-peer-'
TEMP_SUFFIX = '.part'
DEFAULT_SSH_OPTIONS = ('-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=yes')


class PeerCopyError(Exception):
    """A failure with a one-line message naming the file or setting, the problem and the fix."""

    def __init__(self, msg, kind='error'):
        super().__init__(msg)
        self.msg = msg
        self.kind = kind


# --------------------------------------------------------------------------- the modules' shared options
# Documented once in plugins/doc_fragments/peer_copy.py: SSH_SOURCE_SPEC is sparkops.specdec.peer_copy
# (hf_peer_copy, docker_image_peer_copy), HF_SNAPSHOT_SPEC is sparkops.specdec.peer_copy.hf_snapshot (hf_peer_manifest,
# hf_peer_copy).

SSH_SOURCE_SPEC = {
    'source_address': {'type': 'str', 'required': True},
    'source_name': {'type': 'str'},
    'ssh_options': {'type': 'list', 'elements': 'str', 'default': list(DEFAULT_SSH_OPTIONS)},
    'connect_timeout': {'type': 'int', 'default': 10},
}

HF_SNAPSHOT_SPEC = {
    'repo_id': {'type': 'str', 'required': True},
    'repo_type': {'type': 'str', 'default': 'model', 'choices': ['model', 'dataset']},
    'cache_dir': {'type': 'path'},
    'local_dir': {'type': 'path'},
    'allow_patterns': {'type': 'list', 'elements': 'str'},
    'ignore_patterns': {'type': 'list', 'elements': 'str'},
}

# AnsibleModule keywords that go with HF_SNAPSHOT_SPEC: exactly one of cache_dir and local_dir.
HF_SNAPSHOT_RULES = {
    'mutually_exclusive': [('cache_dir', 'local_dir')],
    'required_one_of': [('cache_dir', 'local_dir')],
}


def argument_spec(*shared, **own):
    """A module's argument spec: copies of the shared specs, then its own options."""
    spec = {}
    for part in shared:
        spec.update((name, copy.deepcopy(option)) for name, option in part.items())
    spec.update(own)
    return spec


def ssh_source(params):
    """``(address, problem)`` from the SSH_SOURCE_SPEC options: ``problem`` is a one-line message (naming the option
    and the fix) or None."""
    address = (params.get('source_address') or '').strip()
    if not address or address.startswith('-') or any(c.isspace() for c in address):
        return address, ('source_address %r is not an address: set the sender\'s fabric address, e.g. 192.168.100.10'
                         % address)
    if params.get('connect_timeout') is not None and params['connect_timeout'] < 1:
        return address, 'connect_timeout must be >= 1 second (got %d)' % params['connect_timeout']
    return address, None


# --------------------------------------------------------------------------- who fetches (controller)


MODELS_SETTING = 'specdec_server_peer_copy'
IMAGE_SETTING = 'trtllm_container_image_peer_copy'
_TRUE = ('true', 'yes', 'on', '1')
_FALSE = ('false', 'no', 'off', '0')


def setting_value(name, value):
    """``auto``, True or False from a peer-copy setting (``auto``, or a boolean as YAML or -e gives it)."""
    if isinstance(value, bool):
        return value
    text = str(value if value is not None else '').strip().lower()
    if text == 'auto':
        return 'auto'
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise PeerCopyError('%s: %r is not auto, true or false; set auto (the default: fetch once per pair when the SSH '
                        'mesh is the deploy user\'s), true or false.' % (name, value), 'invalid_option')


def mesh_user_decision(name, value, mesh_user='', deploy_user=''):
    """Whether peer copy may be used as far as the SSH mesh is concerned: ``(use, reason)``.

    The copy runs ``ssh <head>`` as the deploy user (the user Ansible connects as), so it needs that user's mesh key.
    ``mesh_user`` is ``ssh_mesh_user`` (empty: the deploy user); ``deploy_user`` is the deploy user's name (empty or
    None: not known yet, e.g. before connecting without ``ansible_user``: no verdict, ``use`` follows the setting).
    ``auto`` with another mesh user: every node fetches by itself (``use`` false, the reason says why); ``true``
    with another mesh user: PeerCopyError (one line naming the setting, the problem and the fix); ``false``: off.
    """
    mode = setting_value(name, value)
    if mode is False:
        return False, '%s is false: every node fetches for itself' % name
    mesh_user, deploy_user = str(mesh_user or '').strip(), str(deploy_user or '').strip()
    if not mesh_user or not deploy_user or mesh_user == deploy_user:
        return True, None
    if mode is True:
        raise PeerCopyError('%s: true, but ssh_mesh_user %s is not the deploy user %s, and the copy runs ssh as the '
                            'deploy user, whose key the SSH mesh does not set up: set %s: auto (each node then fetches '
                            'by itself) or false, or set ssh_mesh_user to %s (or empty).'
                            % (name, mesh_user, deploy_user, name, deploy_user), 'mesh_user')
    alone = 'every node pulls or loads the image itself' if name == IMAGE_SETTING else 'every node fetches for itself'
    return False, ('%s is auto and ssh_mesh_user %s is not the deploy user %s (the copy runs ssh as the deploy user, '
                   'whose key the SSH mesh does not set up): %s; set %s: false to say so, or ssh_mesh_user to %s (or '
                   'empty) to fetch once per pair' % (name, mesh_user, deploy_user, alone, name, deploy_user))


FABRIC_BY_MEMBER_FIX = ("pass dict(members | zip(members | map('extract', hostvars) | map(attribute='netplan_qsfp_fabric', "
                        "default={}))), not hostvars")


def _fabric_by_member(fabrics):
    """``fabrics`` as given: member -> that member's published ``netplan_qsfp_fabric`` ({} or None: it has none). Anything
    else, hostvars among them (a member's entry holding its variables), is a PeerCopyError of one line."""
    if not isinstance(fabrics, Mapping):
        raise PeerCopyError('peer copy: expected each member\'s netplan_qsfp_fabric by member, got %s: %s.'
                            % (type(fabrics).__name__, FABRIC_BY_MEMBER_FIX))
    for member, fabric in fabrics.items():
        if fabric is None:
            continue
        if not isinstance(fabric, Mapping) or 'netplan_qsfp_fabric' in fabric or 'inventory_hostname' in fabric:
            what = type(fabric).__name__ if not isinstance(fabric, Mapping) else 'its variables'
            raise PeerCopyError('peer copy: expected the netplan_qsfp_fabric of %s, got %s: %s.'
                                % (member, what, FABRIC_BY_MEMBER_FIX))
    return fabrics


def peer_copy_role(fabrics, me, members, head, enabled='auto', download=True, mesh_user='', deploy_user='',
                   setting=MODELS_SETTING):
    """This node's part in fetching the models of its deployment.

    ``fabrics``: each member's published ``netplan_qsfp_fabric`` by member ({} or None for one that has none; only
    the head's is read). Not hostvars: a member's variables in it are a PeerCopyError.

    Returns ``{'mode': 'fetch'|'receive'|'alone', 'source': head or None, 'source_address': IP or None,
    'reason': str}``. A deployment of one node, ``enabled`` false, ``download`` false (each node only checks its
    cache), or ``enabled`` auto with an SSH mesh user that is not the deploy user (``mesh_user_decision``) is
    ``alone``: the node does what it did before (fetch or check by itself). In a pair the head fetches from the Hub
    and every other member receives from the head's address on a link they share (``_netplan.addresses_in_subnets``: a
    pair's and a switch's ``netplan_qsfp_fabric.ips[0]``, a ring's on the cable between them). A member that shares
    no link with the head (the Spark opposite it in an accepted 4-node ring) receives from the head's management address
    (the ``management`` of its entry, its ``ansible_host``, which the filter peer_copy_fabrics adds; on the SSH mesh
    like the rest), else from the head's first one.
    ``enabled`` true with another mesh user is a PeerCopyError.
    """
    fabrics = _fabric_by_member(fabrics)
    members = list(members or [])
    if me not in members:
        raise PeerCopyError('%s is not a member of its deployment (%s): run the role on the deployment\'s nodes.'
                            % (me, ', '.join(members) or 'none'))
    mode = setting_value(setting, enabled)
    if len(members) < 2:
        return {'mode': 'alone', 'source': None, 'source_address': None, 'reason': 'single node'}
    if mode is not False and not download:
        return {'mode': 'alone', 'source': None, 'source_address': None,
                'reason': 'specdec_server_download is false: every node checks its own cache'}
    use, why = mesh_user_decision(setting, mode, mesh_user, deploy_user)
    if not use:
        return {'mode': 'alone', 'source': None, 'source_address': None, 'reason': why}
    if head not in members:
        raise PeerCopyError('specdec_head_host %r is not a member of the deployment (%s): set it to one of them.'
                            % (head, ', '.join(members)))
    if me == head:
        return {'mode': 'fetch', 'source': None, 'source_address': None,
                'reason': 'the head fetches once for %s' % ', '.join(m for m in members if m != head)}
    fabric = fabrics.get(head) or {}
    ips = fabric.get('ips') if isinstance(fabric, Mapping) else None
    if not ips or not isinstance(ips, list) or not ips[0]:
        raise PeerCopyError('%s: the head %s has no fabric address (netplan_qsfp_fabric.ips) to copy from: run the '
                            'netplan_qsfp role on the pair first, or set %s: false.' % (setting, head, setting))
    # The head's address on a link it shares with this node (a ring's neighbours share one cable).
    mine = fabrics.get(me) if isinstance(fabrics.get(me), Mapping) else {}
    shared = addresses_in_subnets(fabric.get('addresses'), mine.get('addresses'))
    over = str(fabric.get('management') or '').strip() if not shared and mine.get('addresses') else ''
    if over:
        return {'mode': 'receive', 'source': head, 'source_address': over,
                'reason': 'copied from %s over the management network (%s): no fabric link to it' % (head, over)}
    address = (shared or [str(ips[0])])[0]
    return {'mode': 'receive', 'source': head, 'source_address': address,
            'reason': 'copied from %s over the fabric (%s)' % (head, address)}


def image_peer_copy_role(fabrics, me, members, head, enabled='auto', image='', mesh_user='', deploy_user=''):
    """``peer_copy_role`` for the engine image. An image pinned by digest (``name@sha256:...``) is pulled by every
    node: ``docker load`` records no registry digest, so a loaded copy could not be found by it."""
    fabrics = _fabric_by_member(fabrics)
    mode = setting_value(IMAGE_SETTING, enabled)
    if '@' in str(image or ''):
        if me not in list(members or []):
            raise PeerCopyError('%s is not a member of its deployment (%s): run the role on the deployment\'s nodes.'
                                % (me, ', '.join(members or []) or 'none'))
        return {'mode': 'alone', 'source': None, 'source_address': None,
                'reason': 'pinned by digest: every node pulls it (docker load records no registry digest)'}
    role = peer_copy_role(fabrics, me, members, head, mode, True, mesh_user, deploy_user, IMAGE_SETTING)
    if mode is False and role['mode'] == 'alone' and len(list(members or [])) > 1:
        role['reason'] = '%s is false: every node pulls or loads the image itself' % IMAGE_SETTING
    return role


def _as_bool(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in _FALSE


def plan_peer_copy(settings, members, deploy_user=''):
    """The plan's view of fetch once per pair (controller, before any change): for ``models`` and ``image``,
    ``{'setting', 'value' (auto, true or false), 'use' (true, false, or None when the deploy user is not known
    yet: the nodes decide), 'reason', 'mesh_user_differs' (auto fell back because ssh_mesh_user is not the deploy
    user)}``, and the problems (one line each) of an explicit ``true`` that cannot work.

    ``settings``: the deployment's settings (``specdec_server_peer_copy``, ``trtllm_container_image_peer_copy``,
    ``ssh_mesh_user``, ``specdec_server_download``, ``trtllm_container_image``); ``deploy_user``: the user Ansible
    connects as when the inventory names it (``ansible_user``), else empty.
    """
    out, errors = {}, []
    mesh_user = str(settings.get('ssh_mesh_user') or '').strip()
    for key, name in (('models', MODELS_SETTING), ('image', IMAGE_SETTING)):
        entry = {'setting': name, 'value': None, 'use': False, 'reason': None, 'mesh_user_differs': False}
        out[key] = entry
        try:
            mode = setting_value(name, settings.get(name, 'auto'))
        except PeerCopyError as e:
            errors.append(e.msg)
            entry['reason'] = e.msg
            continue
        entry['value'] = {True: 'true', False: 'false'}.get(mode, mode)
        if len(list(members or [])) < 2:
            entry['reason'] = 'single node'
            continue
        if mode is not False and key == 'models' and not _as_bool(settings.get('specdec_server_download', True)):
            entry['reason'] = 'specdec_server_download is false: every node checks its own cache'
            continue
        if key == 'image' and '@' in str(settings.get('trtllm_container_image') or ''):
            entry['reason'] = 'pinned by digest: every node pulls it (docker load records no registry digest)'
            continue
        try:
            use, why = mesh_user_decision(name, mode, mesh_user, deploy_user)
        except PeerCopyError as e:
            errors.append(e.msg)
            entry['reason'] = e.msg
            continue
        if not use:
            # auto with another mesh user: the run says why each node fetches by itself (the plan warns).
            entry['reason'], entry['mesh_user_differs'] = why, mode == 'auto'
        elif mesh_user and not str(deploy_user or '').strip():
            entry['use'] = None
            entry['reason'] = ('ssh_mesh_user is %s and the inventory does not name the deploy user (ansible_user): '
                               'each node decides once it knows its user' % mesh_user)
        else:
            entry['use'] = True
            entry['reason'] = 'the head fetches once; its peer copies over the SSH mesh of %s' % (
                str(deploy_user or '').strip() or 'the deploy user')
    return out, errors


# --------------------------------------------------------------------------- the sender's manifest


def _source_path(target, commit, path):
    parts = path.split('/')
    if target.local_dir:
        return os.path.join(target.local_dir, *parts)
    # The snapshot entry is a link to the blob: send the blob (the real file).
    return os.path.realpath(os.path.join(target.storage_folder, 'snapshots', commit, *parts))


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(CHUNK), b''):
            digest.update(block)
    return digest.hexdigest()


def selected_files(listing, allow_patterns, ignore_patterns):
    by_path = dict((f.path, f) for f in listing)
    return [by_path[p] for p in select_paths(sorted(by_path), allow_patterns, ignore_patterns)]


def sender_manifest(target, repo_id, commit, allow_patterns=None, ignore_patterns=None, hasher=sha256_file):
    """What the head holds of ``commit``: every selected file with size, etag, sha256 and the path to send.

    ``complete`` is false (and ``missing`` names the files) when the head does not hold every selected file
    complete (a check-mode run before the download). Reads only.
    """
    if not commit or not REGEX_COMMIT.match(commit):
        raise PeerCopyError('%s: commit %r is not a full commit SHA: pass the commit hf_download resolved on the head.'
                            % (repo_id, commit), 'invalid_option')
    listing = target.read_listing(commit)
    if listing is None:
        raise PeerCopyError('%s: the head has no file listing of commit %s (hf_download records it when it resolves '
                            'the revision): run hf_download on the head first.' % (repo_id, commit), 'no_listing')
    files, missing = [], []
    for rfile in selected_files(listing, allow_patterns, ignore_patterns):
        if target.file_state(commit, rfile) != 'present':
            missing.append(rfile.path)
            files.append({'path': rfile.path, 'size': rfile.size, 'etag': rfile.etag, 'sha256': None,
                          'sha256_source': None, 'source': None})
            continue
        source = _source_path(target, commit, rfile.path)
        if rfile.etag and REGEX_SHA256.match(rfile.etag):
            sha, origin = rfile.etag, 'hub'
        else:
            sha, origin = hasher(source), 'sender'
        files.append({'path': rfile.path, 'size': rfile.size, 'etag': rfile.etag, 'sha256': sha,
                      'sha256_source': origin, 'source': source})
    return {
        'repo_id': repo_id,
        'commit': commit,
        'complete': not missing,
        'missing': missing,
        'files': files,
        'listing': dict((f.path, f.to_json()) for f in listing),
        'bytes_total': sum(f['size'] for f in files),
    }


# --------------------------------------------------------------------------- transport


# Seconds between the attempts of one file's ssh when ssh itself failed (exit 255) before any byte arrived: with three
# or four Sparks every receiver copies from the one head at once (receivers x models x streams), more unauthenticated
# connections than sshd's MaxStartups (default 10:30:100) lets through, and it resets some (issue 24).
RETRY_DELAYS = (0.5, 1, 2, 4)
SSH_FAILED = 255


class SshTransport:
    """``ssh [options] ADDRESS cat -- PATH``: the peer's file on stdout (the SSH mesh's client, no extra tool)."""

    def __init__(self, address, options=DEFAULT_SSH_OPTIONS, connect_timeout=10, ssh='ssh', retry_delays=RETRY_DELAYS):
        self.address = address
        self.argv = [ssh] + list(options) + ['-o', 'ConnectTimeout=%d' % int(connect_timeout), address]
        self.retry_delays = tuple(retry_delays)

    def __call__(self, path, sink):
        self.stream('cat', path, sink)

    def stream(self, command, operand, sink):
        """Run ``COMMAND -- OPERAND`` on the peer and pass its stdout to ``sink`` in blocks; PeerCopyError if it fails.
        A connection that ssh itself could not make (exit 255, nothing received) is tried again after each of
        ``retry_delays``; a remote command that failed (its own exit status) or a stream cut after its first byte is not."""
        for delay in self.retry_delays + (None,):
            rc, text, received = self._once(command, operand, sink)
            if rc == 0:
                return
            if rc != SSH_FAILED or received or delay is None:
                raise PeerCopyError('ssh %s %s %s exited %d: %s' % (self.address, command, operand, rc, text),
                                    'transport')
            time.sleep(delay)

    def _once(self, command, operand, sink):
        proc = subprocess.Popen(self.argv + ['%s -- %s' % (command, shlex.quote(operand))], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err = []
        received = 0
        reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))
        reader.start()
        try:
            for block in iter(lambda: proc.stdout.read(CHUNK), b''):
                received += len(block)
                sink(block)
        finally:
            proc.stdout.close()
            rc = proc.wait()
            reader.join()
        text = (b''.join(err).decode('utf-8', 'replace').strip().splitlines() or ['no message'])[-1] if rc else ''
        return rc, text, received


# --------------------------------------------------------------------------- the receiver


def _temp_dir(target, rfile):
    if target.local_dir:
        return os.path.join(target.local_dir, '.cache', 'huggingface', 'download', *rfile.path.split('/')[:-1])
    return os.path.join(target.storage_folder, 'blobs')


def _temp_name(rfile):
    return '%s%s.%d.%d%s' % (TEMP_PREFIX, rfile.etag or 'file', os.getpid(), threading.get_ident(), TEMP_SUFFIX)


def _remove_stale_temps(directory, rfile):
    """Temporary files of this file left by a killed earlier copy (never a complete file: those are renamed)."""
    prefix = '%s%s.' % (TEMP_PREFIX, rfile.etag or 'file')
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix) and name.endswith(TEMP_SUFFIX):
            _unlink(os.path.join(directory, name))


def _link_snapshot(target, commit, rfile):
    """Cache mode: snapshots/<commit>/<path> -> ../../blobs/<etag> (relative, as huggingface_hub makes it)."""
    pointer = os.path.join(target.storage_folder, 'snapshots', commit, *rfile.path.split('/'))
    blob = os.path.join(target.storage_folder, 'blobs', rfile.etag)
    os.makedirs(os.path.dirname(pointer), exist_ok=True)
    tmp = pointer + '%s%d%s' % (TEMP_PREFIX, os.getpid(), TEMP_SUFFIX)
    _unlink(tmp)
    os.symlink(os.path.relpath(blob, os.path.dirname(pointer)), tmp)
    os.replace(tmp, pointer)


def mismatch_message(repo_id, entry, source, got_size, got_sha):
    what = "the Hub's recorded sha256" if entry.get('sha256_source') == 'hub' else "the sender's sha256"
    return ('%s: %s copied from %s does not match %s (got %d bytes, sha256 %s; expected %d bytes, sha256 %s): the '
            'partial copy was removed and nothing was kept; re-run, and if it recurs check the fabric link and the '
            'file on %s (or set specdec_server_peer_copy: false).'
            % (repo_id, entry['path'], source, what, got_size, got_sha, entry['size'], entry['sha256'], source))


def copy_one(target, commit, repo_id, entry, transport, source_name):
    """Stream one file into a temporary name, verify size and sha256, then rename it into place."""
    rfile = RemoteFile(entry['path'], entry['size'], entry.get('etag'))
    directory = _temp_dir(target, rfile)
    os.makedirs(directory, exist_ok=True)
    _remove_stale_temps(directory, rfile)
    tmp = os.path.join(directory, _temp_name(rfile))
    digest = hashlib.sha256()
    size = [0]
    try:
        with open(tmp, 'wb') as out:
            def sink(block):
                digest.update(block)
                size[0] += len(block)
                if size[0] > rfile.size:
                    raise PeerCopyError(mismatch_message(repo_id, entry, source_name, size[0], 'not computed (too long)'),
                                        'mismatch')
                out.write(block)
            transport(entry['source'], sink)
        got = digest.hexdigest()
        if size[0] != rfile.size or got != entry['sha256']:
            raise PeerCopyError(mismatch_message(repo_id, entry, source_name, size[0], got), 'mismatch')
        if target.local_dir is None and not rfile.etag:
            raise PeerCopyError('%s: %s has no etag in the listing: the cache needs one to name the blob; set '
                                'specdec_server_peer_copy: false.' % (repo_id, rfile.path), 'invalid_manifest')
        target.finish(rfile, commit, tmp)
    except BaseException:
        _unlink(tmp)
        raise
    if target.local_dir is None:
        _link_snapshot(target, commit, rfile)
    return size[0]


def _check_manifest(repo_id, manifest, allow_patterns, ignore_patterns):
    commit = manifest.get('commit') if isinstance(manifest, dict) else None
    if not commit or not REGEX_COMMIT.match(str(commit)):
        raise PeerCopyError('%s: the manifest has no commit: pass the registered result of hf_peer_manifest on the '
                            'sender.' % repo_id, 'invalid_manifest')
    if manifest.get('repo_id') not in (None, repo_id):
        raise PeerCopyError('%s: the manifest is of %s: pass the manifest of this repository.'
                            % (repo_id, manifest.get('repo_id')), 'invalid_manifest')
    try:
        listing = [RemoteFile(p, v['size'], v.get('etag')) for p, v in sorted(manifest['listing'].items())]
        entries = dict((e['path'], e) for e in manifest['files'])
    except (KeyError, TypeError, AttributeError):
        raise PeerCopyError('%s: the manifest lacks its listing or files: pass the registered result of '
                            'hf_peer_manifest on the sender.' % repo_id, 'invalid_manifest')
    wanted = selected_files(listing, allow_patterns, ignore_patterns)
    absent = [f.path for f in wanted if f.path not in entries]
    if absent:
        raise PeerCopyError('%s: the sender\'s manifest has no entry for %s: use the same allow_patterns / '
                            'ignore_patterns on both nodes.' % (repo_id, ', '.join(absent[:5])), 'invalid_manifest')
    return commit, listing, [entries[f.path] for f in wanted]


def receive(target, repo_id, revision, manifest, transport, source_name, allow_patterns=None, ignore_patterns=None,
            endpoint=None, check_mode=False, max_workers=4):
    """Make the receiver hold every selected file of the manifest's commit, copying only what is not complete.

    Returns hf_download's keys (commit, path, files, fetched_files, bytes_fetched = 0: nothing from the Hub,
    bytes_total) plus bytes_copied, copied_files, linked_files, source and the sha256 of every file copied.
    """
    started = time.time()
    commit, listing, wanted = _check_manifest(repo_id, manifest, allow_patterns, ignore_patterns)
    to_copy, to_link = [], []
    for entry in wanted:
        state = target.file_state(commit, RemoteFile(entry['path'], entry['size'], entry.get('etag')))
        if state == 'link':
            to_link.append(entry)
        elif state == 'missing':
            to_copy.append(entry)
    if to_copy and not manifest.get('complete', True) and not check_mode:
        raise PeerCopyError('%s: the sender %s does not hold %s complete at commit %s: download it there first.'
                            % (repo_id, source_name, ', '.join(manifest.get('missing') or [])[:300], commit),
                            'sender_incomplete')
    bad = [e['path'] for e in to_copy if not check_mode and (not e.get('source') or not e.get('sha256')
                                                             or not REGEX_SHA256.match(str(e['sha256'])))]
    if bad:
        raise PeerCopyError('%s: the manifest has no sha256 or source path for %s: pass the registered result of '
                            'hf_peer_manifest on the sender.' % (repo_id, ', '.join(bad[:5])), 'invalid_manifest')
    ref_moves = target.read_ref(revision) != commit if not REGEX_COMMIT.match(revision) else False
    listing_missing = target.read_listing(commit) is None
    result = {
        'commit': commit,
        'path': target.path_for(commit),
        'files': len(wanted),
        'fetched_files': sorted(e['path'] for e in to_copy + to_link),
        'copied_files': sorted(e['path'] for e in to_copy),
        'linked_files': sorted(e['path'] for e in to_link),
        'bytes_fetched': 0,
        'bytes_copied': sum(e['size'] for e in to_copy),
        'bytes_total': sum(e['size'] for e in wanted),
        'source': source_name,
        'verified': [{'path': e['path'], 'sha256': e.get('sha256'), 'sha256_source': e.get('sha256_source')}
                     for e in sorted(to_copy, key=lambda e: e['path'])],
        'changed': bool(to_copy or to_link or ref_moves or listing_missing),
    }
    if check_mode:
        result['seconds'] = round(time.time() - started, 3)
        return result
    for entry in to_link:
        _link_snapshot(target, commit, RemoteFile(entry['path'], entry['size'], entry.get('etag')))
    if to_copy:
        errors = []
        with ThreadPoolExecutor(max_workers=max(1, int(max_workers))) as pool:
            futures = [pool.submit(copy_one, target, commit, repo_id, e, transport, source_name) for e in to_copy]
            for future in futures:
                try:
                    future.result()
                except PeerCopyError as e:
                    errors.append(e)
        if errors:
            raise errors[0]
    target.write_listing(commit, listing, endpoint, revision)
    target.write_ref(revision, commit)
    result['seconds'] = round(time.time() - started, 3)
    return result


# --------------------------------------------------------------------------- the engine image


class DockerCli:
    """The node's Docker CLI: inspect, load from a stream, tag, untag."""

    def __init__(self, docker='docker'):
        self.docker = docker

    def _run(self, *args):
        proc = subprocess.run([self.docker] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, check=False)
        return proc.returncode, proc.stdout.decode('utf-8', 'replace'), proc.stderr.decode('utf-8', 'replace')

    def inspect(self, name):
        """The image's ``docker image inspect`` document, or None when there is no such image."""
        rc, out, _err = self._run('image', 'inspect', '--', name)
        if rc != 0:
            return None
        try:
            data = json.loads(out)
        except ValueError:
            return None
        return data[0] if isinstance(data, list) and data else None

    def load(self, feed):
        """``docker load`` reading what ``feed(sink)`` writes; returns (rc, last line of its output)."""
        proc = subprocess.Popen([self.docker, 'load'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        out = []
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))
        reader.start()
        try:
            feed(proc.stdin.write)
        except BrokenPipeError:
            pass  # docker load stopped reading (a damaged stream): its exit status says why
        finally:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass
            rc = proc.wait()
            reader.join()
        lines = b''.join(out).decode('utf-8', 'replace').strip().splitlines()
        return rc, (lines[-1] if lines else '')

    def tag(self, image_id, name):
        return self._run('image', 'tag', image_id, name)[0] == 0

    def untag(self, name):
        return self._run('image', 'rm', '--no-prune', name)[0] == 0


class SshImageTransport:
    """``ssh [options] ADDRESS docker save -- NAME``: the peer's image as a ``docker save`` stream on stdout."""

    def __init__(self, address, options=DEFAULT_SSH_OPTIONS, connect_timeout=10, ssh='ssh'):
        self.files = SshTransport(address, options, connect_timeout, ssh)
        self.address = address

    def __call__(self, name, sink):
        self.files.stream('docker save', name, sink)


def copy_image(name, expected_id, docker, transport, source_name, check_mode=False):
    """Make this node hold ``name`` as the image ``expected_id`` (the sender's), streaming it from the sender only
    when this node has no image under ``name``. An image already under the name is never replaced (``differs`` says
    whether it is another one than the sender's: the same-image check of the deployment refuses that).

    The stream goes straight into ``docker load`` (Docker checks every layer against the image's config); the id of
    what got the name must then be ``expected_id``. A damaged stream (load fails, or another id) fails with one line;
    the name is given back to the image it named before (none: the wrong image is untagged), so a wrong image is never
    left under it. Returns ``{changed, copied, differs, image (inspect, {} in check mode before a copy), previous_id,
    bytes_copied, stream_sha256, source}``.
    """
    if not expected_id or not re.match(r'^sha256:[0-9a-f]{64}$', str(expected_id)):
        raise PeerCopyError('%s: the sender\'s image id %r is not a sha256: id: pass the Id of the sender\'s docker image '
                            'inspect (trtllm_container_image_info.id).' % (name, expected_id), 'invalid_option')
    before = docker.inspect(name)
    previous_id = (before or {}).get('Id')
    result = {'changed': False, 'copied': False, 'image': before or {}, 'previous_id': previous_id,
              'bytes_copied': 0, 'stream_sha256': None, 'source': source_name}
    if previous_id:
        # Present (the head's image, or another one): never replaced, as docker_image never pulls a present tag again.
        # Another image is refused by the deployment's same-image check, which names both ids and the fix.
        result['differs'] = previous_id != expected_id
        return result
    result['differs'] = False
    result.update(changed=True, copied=True)
    if check_mode:
        result['image'] = {}
        return result
    digest, size = hashlib.sha256(), [0]
    failure = []

    def feed(write):
        def sink(block):
            digest.update(block)
            size[0] += len(block)
            write(block)
        try:
            transport(name, sink)
        except PeerCopyError as e:
            failure.append(e)

    rc, last = docker.load(feed)
    result.update(bytes_copied=size[0], stream_sha256=digest.hexdigest())
    after = docker.inspect(name)
    got = (after or {}).get('Id')
    if failure or rc != 0 or got != expected_id:
        restored = _give_name_back(docker, name, previous_id, got)
        if failure:
            why = failure[0].msg
        elif rc != 0:
            why = 'docker load failed (%s)' % (last or 'rc %d' % rc)
        else:
            why = 'the loaded image has id %s' % got
        raise PeerCopyError('%s: the image copied from %s does not match the sender\'s id %s: %s (%d bytes, stream '
                            'sha256 %s); %s; re-run, and if it recurs check the fabric link and the image on %s (or '
                            'set trtllm_container_image_peer_copy: false).'
                            % (name, source_name, expected_id, why, size[0], digest.hexdigest(), restored, source_name),
                            'transport' if failure else 'mismatch')
    result['image'] = after
    return result


def _give_name_back(docker, name, previous_id, now_id):
    if now_id == previous_id:
        return 'the name still names %s' % (previous_id or 'no image')
    if previous_id:
        return ('the name was given back to %s' % previous_id if docker.tag(previous_id, name)
                else 'the name could not be given back to %s: docker tag it by hand' % previous_id)
    return ('the wrong image was untagged' if docker.untag(name)
            else 'the wrong image could not be untagged: docker image rm %s by hand' % name)
