#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hf_download
short_description: Download a Hugging Face Hub repository snapshot idempotently
version_added: 0.1.0
description:
  - Resolves O(revision) of a Hugging Face Hub repository to a commit SHA, compares the files of that commit
    (optionally filtered by O(allow_patterns) / O(ignore_patterns)) with what is already on disk and downloads
    only what is missing, with C(huggingface_hub) (C(HfApi.repo_info), C(HfApi.list_repo_tree),
    C(snapshot_download)).
  - Idempotent by content. A complete snapshot is recognised from file names and sizes only (no re-hashing
    of large files) and nothing is downloaded; C(changed) is then V(false).
    Partial files are never reported complete. C(huggingface_hub) downloads to a temporary
    C(*.incomplete) file and gives it its final name only when it is complete, and the module checks sizes.
  - Interrupted downloads resume. C(huggingface_hub) 2.x names its temporary file per process
    (C(<etag>.<8 hex>.incomplete)) and never reuses it, so after a killed run (SIGKILL, OOM, reboot) the module
    itself completes the largest partial file of each missing file with an HTTP C(Range) request
    (C(huggingface_hub.file_download.http_get) with C(resume_size)), under C(huggingface_hub)'s lock for that
    file, checks its size and, for LFS files, its sha256, and moves it to its final name. Bytes kept this way are
    returned in RV(bytes_reused). A partial file that does not complete to the expected content is removed and
    the file is downloaded again (with a warning).
  - Files go either to the C(huggingface_hub) cache (O(cache_dir), the default) or to a plain directory
    (O(local_dir)).
  - With O(offline=true) no network access is made at all. The module only checks that the files recorded for
    O(revision) are present, and fails clearly if they are not.
  - Runs on the target host. C(huggingface_hub) must be installed for the Python interpreter that runs the module.
author:
  - sparkops maintainers (@sparkops)
requirements:
  - huggingface_hub >= 1.0 on the target (tested with 1.0.0, 1.33.0 and 2.4.0)
extends_documentation_fragment:
  - sparkops.specdec.attributes
  - sparkops.specdec.attributes.platform
attributes:
  check_mode:
    support: full
    details: Resolves the revision on the Hub and compares it with the files on disk. Reports the files and bytes that would
      be fetched (C(fetched_files), C(bytes_fetched)) and C(changed) accordingly. Downloads and writes nothing.
  diff_mode:
    support: full
    details: Returns the commit on disk before and after the run, and how many selected files were present.
  idempotent:
    support: full
    details: Fetches only the files missing or different from the revision.
  action_group:
    description: Use C(group/sparkops.specdec.specdec) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - sparkops.specdec.specdec
options:
  repo_id:
    description:
      - Repository id on the Hub, V(<namespace>/<name>), for example V(openai/gpt-oss-120b).
    type: str
    required: true
  revision:
    description:
      - Branch, tag or full 40-character commit SHA to download.
      - A branch or tag is resolved to a commit SHA on every online run, so a moved branch is detected.
    type: str
    default: main
  repo_type:
    description:
      - Type of the repository.
    type: str
    choices: [model, dataset]
    default: model
  cache_dir:
    description:
      - C(huggingface_hub) cache directory (the C(.../huggingface/hub) directory). Files land in
        C(<cache_dir>/<models|datasets>--<namespace>--<name>/snapshots/<commit>/), as symlinks to content-addressed blobs.
      - When neither O(cache_dir) nor O(local_dir) is set, the C(huggingface_hub) default is used
        (E(HF_HUB_CACHE), else C($HF_HOME/hub), else C(~/.cache/huggingface/hub)) of the user running the module.
      - Mutually exclusive with O(local_dir).
    type: path
  local_dir:
    description:
      - Download into this plain directory instead of the cache, keeping the repository layout.
        C(huggingface_hub) keeps its download metadata in C(<local_dir>/.cache/huggingface/).
      - Mutually exclusive with O(cache_dir).
    type: path
  allow_patterns:
    description:
      - Only files matching at least one of these glob patterns are selected (C(fnmatch) syntax, as in
        C(snapshot_download); V(*) also matches V(/)).
      - When not set, all files are selected.
    type: list
    elements: str
  ignore_patterns:
    description:
      - Files matching any of these glob patterns are not selected (applied after O(allow_patterns)).
    type: list
    elements: str
  token:
    description:
      - Hugging Face access token (read scope is enough). Needed for gated and private repositories.
      - If neither O(token) nor O(token_file) is set, the E(HF_TOKEN) environment variable of the module is used.
      - The stored login token of C(huggingface_hub) (C(hf auth login)) is deliberately not used.
      - Never logged nor returned. Every message that quotes an exception is scrubbed of it in every form
        (raw, escaped, URL-encoded, base64 of the token and of C(user:token), C(Bearer <token>)).
      - A malformed token fails the run before any network access, with C(error_kind) V(token_malformed), naming
        the defect and never the value - white space around it or inside it (a line break from a file or a YAML
        C(|) block), a C(Bearer ) prefix, quotes around it, non-printable or non-ASCII characters.
      - Mutually exclusive with O(token_file).
    type: str
  token_file:
    description:
      - Path of a file on the target that contains the token (surrounding whitespace is stripped; the rest is
        checked as for O(token)).
      - Mutually exclusive with O(token).
    type: path
  token_file_remove:
    description:
      - Remove O(token_file) as soon as the module starts (it is read first), whatever happens next, also when it
        is empty or the token is malformed; a missing file is no error for the removal.
      - For a file written for this run only, e.g. by the C(specdec_server) role for its background download
        (C(async)). Ansible keeps a background module's arguments in the node's remote temporary directory for the
        whole download, so the role passes the path of a 0600 token file in a private directory, never the token.
      - No effect without O(token_file).
    type: bool
    default: false
  manifest:
    description:
      - Also return, in RV(manifest), the file list M(sparkops.specdec.hf_peer_manifest) returns for the resolved commit
        (each file's size, etag and sha256, and the path to send), when the snapshot is complete here and nothing is
        fetched. The head of a pair passes it to M(sparkops.specdec.hf_peer_copy) on its peer, so that a warm run
        lists the head's models in the same module run that looks at them.
      - Reads only (the Hub's sha256 for LFS files; small files are hashed). Where the list cannot be made (an
        unreadable file, no recorded listing), RV(manifest) is left out and the module's result is unchanged; run
        M(sparkops.specdec.hf_peer_manifest) for that model to get its error.
    type: bool
    default: false
    version_added: 0.3.0
  endpoint:
    description:
      - Base URL of the Hub or of a Hub compatible mirror.
      - If not set, the E(HF_ENDPOINT) environment variable of the module is used, else the public Hub.
    type: str
    default: https://huggingface.co
  offline:
    description:
      - Use only what is already on disk, with no network access at all.
      - O(revision) is resolved from the local record (C(refs/)) of a previous online run, unless it is a full commit SHA.
      - Fails if the files are incomplete, or if completeness cannot be verified because no online run recorded the
        file listing of that commit.
    type: bool
    default: false
  max_workers:
    description:
      - Number of files downloaded in parallel.
    type: int
    default: 8
  timeout:
    description:
      - HTTP timeout in seconds for each connection and read of the Hub API and file downloads.
        It is not a limit on the total duration of the download.
    type: int
    default: 60
  rate_limit_retries:
    description:
      - How many times the run retries a step (resolve, access check, download) that the Hub answered with
        HTTP 429 (rate limited), in the whole run. V(0) fails at the first 429.
      - Each retry waits what the C(Retry-After) header asks (seconds or an HTTP-date); without it 1, 2, 4 ...
        seconds (at most 60). Completed files are kept across retries.
      - When the retries are used up the run fails with C(error_kind) V(rate_limited).
    type: int
    default: 5
    version_added: 0.2.0
  rate_limit_max_wait:
    description:
      - Longest total time in seconds the run waits on HTTP 429 answers. A wait that would pass it is not started
        (a C(Retry-After) of an hour is not slept through); the run fails at once with C(error_kind)
        V(rate_limited), saying how long the Hub asked to wait.
    type: int
    default: 600
    version_added: 0.2.0
  progress_file:
    description:
      - Path of a JSON file on the target that the module keeps up to date while it runs, so that a task started
        with C(async) and C(poll) V(0) can be followed (see EXAMPLES). Missing parent directories are created.
      - The file is replaced atomically (written to a temporary file in the same directory, then renamed), so a
        reader never sees a partial document. It is written when the run starts, then about every second in
        every state (C(updated) moves while the module lives, so a reader tells a dead run from a live one by it),
        and at the end. A previous document at that path is overwritten.
        Mode V(0644). Not written in check mode.
      - "Keys: C(repo_id), C(revision) (as given), C(commit) (full SHA, V(null) until resolved),
        C(state) (V(resolving), V(downloading), V(done) or V(failed)),
        C(files_total) and C(bytes_total) (number and size in bytes of the selected files; V(0) while resolving),
        C(files_done) and C(bytes_done) (of those, the files and bytes on disk, including what was there before the
        run and the partial files being downloaded; C(bytes_done) never decreases and moves during the download of
        a single large file), C(bytes_per_second) (integer, bytes per second over the last 5 seconds while
        downloading; the average of the whole download when V(done); V(0) when nothing was downloaded),
        C(started) and C(updated) (Unix epoch seconds, float), C(pid) (process id of the module).
        When C(state) is V(failed), also C(error_kind) (see the notes) and C(msg)."
      - It never contains the token.
      - If it cannot be written when the run starts, the module fails (C(error_kind) V(not_writable),
        V(disk_full) or V(invalid_option)); later write errors only produce a warning.
    type: path
    version_added: 0.2.0
notes:
  - "Errors name the problem and the fix. The C(error_kind) of the failure is one of:
    C(gated) (gated repository without access: request access to the repository on the Hub, then re-run),
    C(token_rejected) (invalid or expired token: set a valid token in E(HF_TOKEN) / O(token)),
    C(repo_not_found), C(revision_not_found), C(repo_disabled), C(entry_not_found),
    C(forbidden) (HTTP 403, token without read permission),
    C(rate_limited) (HTTP 429 after O(rate_limit_retries) retries, or a C(Retry-After) that would pass
    O(rate_limit_max_wait)), C(hub_error) (HTTP 5xx),
    C(http_error) (another HTTP error),
    C(unreachable) (network, DNS, proxy or timeout; names the endpoint),
    C(clock) (the endpoint's TLS certificate is not yet valid, or has expired, by the node's clock: check the node's
    clock with C(date) and enable NTP),
    C(interrupted) (connection dropped during a transfer: re-run), C(offline_env) (E(HF_HUB_OFFLINE) is set),
    C(offline_incomplete) (O(offline=true) and files are missing or cannot be verified),
    C(disk_full) (ENOSPC or quota; also checked before downloading), C(not_writable) (permission denied or read-only
    filesystem), C(incomplete) (files still missing after a download), C(missing_library)
    (C(huggingface_hub) not installed for the module's Python), C(token_file) (unreadable or empty token file),
    C(token_malformed) (the token has white space, a line break, a C(Bearer ) prefix, quotes or non-printable
    characters; the message names the defect, never the value),
    C(invalid_option), and C(error) (anything else)."
  - "On-disk formats are those of C(huggingface_hub): the cache layout
    (C(refs/<revision>), C(snapshots/<commit>/<path>), C(blobs/<etag>)), and for O(local_dir) the
    C(.cache/huggingface/download/<path>.metadata) files. See U(https://huggingface.co/docs/huggingface_hub/guides/manage-cache)."
  - "The module also records the file listing of each commit it resolved, in
    C(<cache_dir>/<repo folder>/.sparkops-hf_download/<commit>.json), or in C(<local_dir>/.cache/huggingface/sparkops-hf_download/)
    together with C(refs/<revision>). O(offline=true) uses that listing. The C(trees/<commit>.json) cache of C(huggingface_hub) 2.x
    is also accepted."
  - "C(changed) is V(true) when files were fetched. In the cache, it is also V(true) when the local C(refs/<revision>) is
    moved to another commit whose files are all present already, because the returned RV(path) changes."
  - "C(huggingface_hub) telemetry is disabled during the run: version 2.x would otherwise contact the public Hub even when
    O(endpoint) points to a mirror. Xet storage is used only when the Hub announces it and C(hf_xet) is installed;
    otherwise, or with E(HF_HUB_DISABLE_XET=1), files are downloaded over plain HTTP."
seealso:
  - name: huggingface_hub download guide
    description: Download files from the Hub with huggingface_hub.
    link: https://huggingface.co/docs/huggingface_hub/guides/download
"""

EXAMPLES = r"""
- name: Download the gpt-oss-120b target model into the default HF cache
  sparkops.specdec.hf_download:
    repo_id: openai/gpt-oss-120b
  register: target_model

- name: Download the EAGLE-3 draft model at a pinned commit, weights and configs only
  sparkops.specdec.hf_download:
    repo_id: nvidia/gpt-oss-120b-Eagle3-long-context
    revision: 0123456789abcdef0123456789abcdef01234567
    cache_dir: /srv/models/huggingface/hub
    allow_patterns: ["*.json", "*.safetensors"]

- name: Download a gated model with a token kept in a file on the target
  sparkops.specdec.hf_download:
    repo_id: nvidia/Llama-3.3-70B-Instruct-FP4
    cache_dir: /srv/models/huggingface/hub
    token_file: /etc/sparkops/hf_token
    max_workers: 16
    timeout: 120

- name: Download into a plain directory from a local Hub mirror
  sparkops.specdec.hf_download:
    repo_id: nvidia/Qwen3-235B-A22B-FP4
    local_dir: /srv/models/Qwen3-235B-A22B-FP4
    endpoint: http://hub.lab.internal:8080
    ignore_patterns: ["*.md"]

- name: Verify, without network, that the model is complete on an air-gapped Spark
  sparkops.specdec.hf_download:
    repo_id: openai/gpt-oss-120b
    cache_dir: /srv/models/huggingface/hub
    offline: true

- name: Use the snapshot path
  ansible.builtin.debug:
    msg: "serving {{ target_model.path }} (commit {{ target_model.commit }}, {{ target_model.bytes_total }} bytes)"

# A long download in the background, followed through progress_file.
- name: Start the download of the target model (returns at once)
  sparkops.specdec.hf_download:
    repo_id: openai/gpt-oss-120b
    cache_dir: /srv/models/huggingface/hub
    progress_file: /var/tmp/sparkops/gpt-oss-120b.progress.json
  async: 21600  # maximum duration of the download, in seconds
  poll: 0
  register: download_job

- name: Read the progress file (repeat this, e.g. from an included task file, to follow the download)
  ansible.builtin.slurp:
    src: /var/tmp/sparkops/gpt-oss-120b.progress.json
  register: progress_raw
  until: progress_raw is succeeded  # the module may not have written it yet
  retries: 10
  delay: 2

- name: Print bytes done / total and rate
  vars:
    progress: "{{ progress_raw.content | b64decode | from_json }}"
  ansible.builtin.debug:
    msg: >-
      {{ progress.state }}: {{ progress.bytes_done | human_readable }} / {{ progress.bytes_total | human_readable }}
      ({{ progress.files_done }}/{{ progress.files_total }} files) at {{ progress.bytes_per_second | human_readable }}/s

- name: Wait for the end of the download and get the module result
  ansible.builtin.async_status:
    jid: "{{ download_job.ansible_job_id }}"
  register: target_model
  until: target_model.finished
  retries: 2160
  delay: 10
"""

RETURN = r"""
path:
  description:
    - Local directory holding the selected files. In the cache, the snapshot directory of the commit.
      With O(local_dir), the absolute O(local_dir).
    - In check mode, the directory the files would be in.
  returned: success
  type: str
  sample: /srv/models/huggingface/hub/models--openai--gpt-oss-120b/snapshots/0123456789abcdef0123456789abcdef01234567
commit:
  description: Full commit SHA that O(revision) resolved to.
  returned: success
  type: str
  sample: 0123456789abcdef0123456789abcdef01234567
files:
  description: Number of files of the commit selected by O(allow_patterns) / O(ignore_patterns).
  returned: success
  type: int
  sample: 23
fetched_files:
  description:
    - Repository paths placed on disk by this run, sorted. Includes files only linked from a blob that was
      already in the cache. In check mode, the paths that would be fetched. Empty when nothing changed.
  returned: success
  type: list
  elements: str
  sample: ["config.json", "model-00001-of-00002.safetensors"]
bytes_fetched:
  description:
    - Size in bytes of the files downloaded from the Hub by this run (files linked from blobs already in the cache
      are not counted). In check mode, the bytes that would be downloaded.
  returned: success
  type: int
  sample: 65249924096
bytes_reused:
  description:
    - Size in bytes of partial files left by an interrupted earlier run that were kept and completed instead of
      being fetched again (not part of RV(bytes_fetched)). In check mode, the bytes that would be kept.
      If a server ignores the C(Range) request the file is fetched again from its start and this still counts it.
  returned: success
  type: int
  sample: 4294967296
  version_added: 0.2.0
bytes_total:
  description: Total size in bytes of the selected files.
  returned: success
  type: int
  sample: 65249924096
seconds:
  description: Wall-clock duration of the module run, in seconds.
  returned: success
  type: float
  sample: 12.345
rate_limit_waits:
  description:
    - Seconds waited after each HTTP 429 answer of the Hub in this run, in order (empty when none). See
      O(rate_limit_retries) and O(rate_limit_max_wait).
  returned: success
  type: list
  elements: float
  sample: [2.0]
  version_added: 0.2.0
manifest:
  description:
    - The snapshot's file list as M(sparkops.specdec.hf_peer_manifest) returns it (C(repo_id), C(commit), C(complete),
      C(missing), C(files), C(listing), C(bytes_total) in bytes), for O(manifest=true) when nothing is fetched.
  returned: when O(manifest=true), the snapshot is complete and the list could be made
  type: dict
  sample: {repo_id: nvidia/Qwen3-235B-A22B-FP4, commit: 4d8bb3e1c5a5e7a6f0f2c9f1b7a3c4d5e6f7a8b9, complete: true,
           missing: [], files: [], listing: {}, bytes_total: 0}
  version_added: 0.3.0
error_kind:
  description: Machine-readable class of the failure (see the notes), for C(failed_when) / C(rescue) logic.
  returned: failure
  type: str
  sample: gated
"""

import os

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.sparkops.specdec.plugins.module_utils._hf import (
    DEFAULT_ENDPOINT,
    DEFAULT_RATE_LIMIT_MAX_WAIT,
    DEFAULT_RATE_LIMIT_RETRIES,
    HAS_HF,
    HF_IMPORT_ERROR,
    HfDownloadError,
    Target,
    run,
)
from ansible_collections.sparkops.specdec.plugins.module_utils._secrets import Scrubber, token_defects
from ansible_collections.sparkops.specdec.plugins.module_utils import _peer_copy


def argument_spec():
    return dict(
        repo_id=dict(type='str', required=True),
        revision=dict(type='str', default='main'),
        repo_type=dict(type='str', default='model', choices=['model', 'dataset']),
        cache_dir=dict(type='path'),
        local_dir=dict(type='path'),
        allow_patterns=dict(type='list', elements='str'),
        ignore_patterns=dict(type='list', elements='str'),
        # HF_TOKEN is applied in main(), not with fallback=: Ansible applies fallbacks before the
        # mutually_exclusive check, so HF_TOKEN in the environment would make token_file unusable.
        token=dict(type='str', no_log=True),
        token_file=dict(type='path'),
        token_file_remove=dict(type='bool', default=False),
        endpoint=dict(type='str', default=DEFAULT_ENDPOINT, fallback=(env_fallback, ['HF_ENDPOINT'])),
        offline=dict(type='bool', default=False),
        max_workers=dict(type='int', default=8),
        timeout=dict(type='int', default=60),
        rate_limit_retries=dict(type='int', default=DEFAULT_RATE_LIMIT_RETRIES),
        rate_limit_max_wait=dict(type='int', default=DEFAULT_RATE_LIMIT_MAX_WAIT),
        progress_file=dict(type='path'),
        manifest=dict(type='bool', default=False),
    )


def _read_token_file(module, path, remove=False):
    token = None
    error = None
    try:
        with open(path, 'r') as f:
            token = f.read()
            module.no_log_values.add(token)
            token = token.strip()
    except (IOError, OSError) as e:
        error = e
    finally:
        if remove:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                module.fail_json(msg='cannot remove token_file %s (%s): make its directory writable by the user running '
                                     'the module, or set token_file_remove: false' % (path, e.strerror or type(e).__name__),
                                 error_kind='token_file')
    if error is not None:
        module.fail_json(msg='cannot read token_file %s (%s): make it readable by the user running the module, or use '
                             'the token option / HF_TOKEN' % (path, error.strerror or type(error).__name__),
                         error_kind='token_file')
    if not token:
        module.fail_json(msg='token_file %s is empty: write the HF token in it (one line)' % path, error_kind='token_file')
    return token


def _with_manifest(params, commit):
    """{'manifest': hf_peer_manifest's result for the complete snapshot}, or {} where it cannot be made (that module
    reports why, run on its own)."""
    target = Target(params['repo_id'], params['repo_type'], cache_dir=params['cache_dir'], local_dir=params['local_dir'])
    try:
        return {'manifest': _peer_copy.sender_manifest(target, params['repo_id'], commit, params['allow_patterns'],
                                                       params['ignore_patterns'])}
    except (_peer_copy.PeerCopyError, IOError, OSError):
        return {}


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        mutually_exclusive=[('cache_dir', 'local_dir'), ('token', 'token_file')],
        supports_check_mode=True,
    )
    params = dict(module.params)

    if params['token_file']:
        params['token'] = _read_token_file(module, params['token_file'], params['token_file_remove'])
    elif not params['token']:
        params['token'] = os.environ.get('HF_TOKEN', '').strip() or None
    token = params['token'] or None
    if token:
        module.no_log_values.add(token)
        if token.strip():
            module.no_log_values.add(token.strip())
    scrub = Scrubber([token] if token else [])

    def fail(msg, kind, **kwargs):
        module.fail_json(msg=scrub(msg), error_kind=kind, **kwargs)

    defects = token_defects(token)
    if defects:
        source = ('token_file %s' % params['token_file'] if params['token_file']
                  else 'the token option' if module.params['token'] else 'HF_TOKEN')
        fail('the HF token (from %s) %s: set the token alone, exactly as the Hub shows it (e.g. hf_...), with no '
             'white space or "Bearer " around it (| trim in a template; ansible-vault encrypt_string without a trailing '
             'newline: printf %%s TOKEN | ansible-vault encrypt_string)' % (source, '; '.join(defects)),
             'token_malformed')

    if not HAS_HF:
        fail(missing_required_lib('huggingface_hub'), 'missing_library', exception=scrub(HF_IMPORT_ERROR))

    repo_id = (params['repo_id'] or '').strip()
    if not repo_id or repo_id.startswith('/') or repo_id.endswith('/') or repo_id.count('/') > 1 or '..' in repo_id:
        fail('repo_id %r is not a Hub repository id: use <namespace>/<name>, e.g. openai/gpt-oss-120b' % repo_id,
             'invalid_option')
    params['repo_id'] = repo_id
    if not (params['revision'] or '').strip():
        fail('revision must not be empty: use a branch, tag or commit SHA (default main)', 'invalid_option')
    endpoint = (params['endpoint'] or DEFAULT_ENDPOINT).strip().rstrip('/')
    if not endpoint.startswith(('http://', 'https://')):
        fail('endpoint %r is not an http(s) URL: use e.g. https://huggingface.co or http://mirror:8080' % endpoint,
             'invalid_option')
    params['endpoint'] = endpoint
    if params['max_workers'] < 1:
        fail('max_workers must be >= 1 (got %d)' % params['max_workers'], 'invalid_option')
    if params['timeout'] < 1:
        fail('timeout must be >= 1 second (got %d)' % params['timeout'], 'invalid_option')
    if params['rate_limit_retries'] < 0:
        fail('rate_limit_retries must be >= 0 (got %d): set how many HTTP 429 answers to retry, e.g. 5'
             % params['rate_limit_retries'], 'invalid_option')
    if params['rate_limit_max_wait'] < 0:
        fail('rate_limit_max_wait must be >= 0 seconds (got %d): set the longest total wait on HTTP 429, e.g. 600'
             % params['rate_limit_max_wait'], 'invalid_option')
    for key in ('cache_dir', 'local_dir', 'progress_file'):
        if params[key]:
            params[key] = os.path.abspath(params[key])

    try:
        result = run(params, check_mode=module.check_mode)
    except HfDownloadError as e:
        fail(e.msg, e.kind)
        return

    if params['manifest'] and not result.get('changed') and result.get('commit'):
        result.update(_with_manifest(params, result['commit']))

    for warning in result.pop('warnings', []):
        module.warn(scrub(warning))
    diff = result.pop('diff')
    if module._diff:
        result['diff'] = diff
    module.exit_json(**result)


if __name__ == '__main__':
    main()
