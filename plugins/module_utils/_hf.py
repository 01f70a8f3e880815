# -*- coding: utf-8 -*-
# PRIVATE to the sparkops.specdec collection: helpers for the sparkops.specdec.hf_download module.
# Not a public API; it may change in any release without notice. Do not import it from other collections.
#
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Planning, download and error mapping for sparkops.specdec.hf_download.

Built on huggingface_hub (HfApi.repo_info, HfApi.list_repo_tree, get_hf_file_metadata,
snapshot_download). All on-disk formats are the huggingface_hub ones:

* cache mode (cache_dir): ``<cache_dir>/<models|datasets>--<org>--<name>/{refs/<revision>,
  snapshots/<commit>/<path> -> ../../blobs/<etag>, blobs/<etag>}``. A blob only gets its final
  name after a complete download (huggingface_hub downloads to a temporary ``*.incomplete`` file
  then renames it), so a snapshot entry of the expected size is complete.
* local_dir mode: ``<local_dir>/<path>`` plus ``<local_dir>/.cache/huggingface/download/<path>.metadata``
  (three lines: commit, etag, unix timestamp).

On top of that this module records, per commit, the repo file listing it resolved (so that
``offline`` runs can tell complete from incomplete without the network) in
``<repo storage folder>/.sparkops-hf_download/<commit>.json`` (cache mode) or
``<local_dir>/.cache/huggingface/sparkops-hf_download/<commit>.json`` plus ``refs/<revision>`` there
(local_dir mode). huggingface_hub >= 2 also keeps ``trees/<commit>.json`` which is used as a fallback.

With ``progress_file`` a small JSON document describing the run (state, files and bytes done, rate) is
kept up to date while it runs, see ``Progress``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import datetime
import email.utils
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
import traceback

from ansible_collections.sparkops.specdec.plugins.module_utils._secrets import scrub

HF_IMPORT_ERROR = None
try:
    import huggingface_hub
    from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url, snapshot_download
    from huggingface_hub import constants as hf_constants
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import WeakFileLock, build_hf_headers, filter_repo_objects
    try:
        from huggingface_hub import errors as hf_errors
    except ImportError:  # huggingface_hub < 0.23
        from huggingface_hub import utils as hf_errors
    HAS_HF = True
except Exception:  # pylint: disable=broad-except  # ImportError, or a broken installation
    HAS_HF = False
    HF_IMPORT_ERROR = traceback.format_exc()
    hf_errors = None


class _Never(Exception):
    """Placeholder for an error class the installed huggingface_hub does not define."""


def _hf_error(name):
    return getattr(hf_errors, name, None) or _Never


GatedRepoError = _hf_error('GatedRepoError')
RepositoryNotFoundError = _hf_error('RepositoryNotFoundError')
RevisionNotFoundError = _hf_error('RevisionNotFoundError')
EntryNotFoundError = _hf_error('EntryNotFoundError')
LocalEntryNotFoundError = _hf_error('LocalEntryNotFoundError')
HfHubHTTPError = _hf_error('HfHubHTTPError')
OfflineModeIsEnabled = _hf_error('OfflineModeIsEnabled')
DisabledRepoError = _hf_error('DisabledRepoError')

DEFAULT_ENDPOINT = 'https://huggingface.co'
LIBRARY_NAME = 'sparkops.specdec'
LIBRARY_VERSION = '0.1.0'
STATE_DIR_NAME = '.sparkops-hf_download'
LOCAL_STATE_DIR_NAME = 'sparkops-hf_download'
MANIFEST_FORMAT = 1
REGEX_COMMIT = re.compile(r'^[0-9a-f]{40}$')
REGEX_SHA256 = re.compile(r'^[0-9a-f]{64}$')
# huggingface_hub's partial downloads: <etag>[.<8 hex>].incomplete (cache blobs/) and
# <hash>.<etag>[.<8 hex>].incomplete (local_dir .cache/huggingface/download/); group 1 is the etag.
REGEX_PARTIAL_CACHE = re.compile(r'^([^.]+)(?:\.[0-9a-f]{8})?\.incomplete$')
REGEX_PARTIAL_LOCAL = re.compile(r'^[^.]+\.([^.]+)(?:\.[0-9a-f]{8})?\.incomplete$')
SPACE_ERRNOS = (errno.ENOSPC, getattr(errno, 'EDQUOT', errno.ENOSPC))
WRITE_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)
CONNECTION_ERROR_NAMES = frozenset((
    'ConnectError', 'ConnectionError', 'NetworkError', 'ProxyError', 'ConnectTimeout', 'ReadTimeout',
    'WriteTimeout', 'PoolTimeout', 'TimeoutException', 'Timeout', 'ReadError', 'RemoteProtocolError',
    'gaierror', 'TooManyRedirects', 'SSLError', 'MaxRetryError', 'NewConnectionError',
))
INTERRUPTED_ERROR_NAMES = frozenset(('RemoteProtocolError', 'ReadError', 'ChunkedEncodingError', 'IncompleteRead',
                                     'ProtocolError'))
TIMEOUT_ERROR_NAMES = frozenset(('ConnectTimeout', 'ReadTimeout', 'WriteTimeout', 'PoolTimeout', 'TimeoutException',
                                 'Timeout', 'timeout', 'TimeoutError'))
PROGRESS_INTERVAL = 1.0  # seconds between two writes of progress_file while downloading
PROGRESS_RATE_WINDOW = 5.0  # seconds over which bytes_per_second is measured while downloading
DEFAULT_RATE_LIMIT_RETRIES = 5  # HTTP 429 answers retried per run (rate_limit_retries)
DEFAULT_RATE_LIMIT_MAX_WAIT = 600  # seconds the run may spend waiting on HTTP 429 (rate_limit_max_wait)
RATE_LIMIT_BACKOFF_CAP = 60  # seconds: longest wait after a 429 without Retry-After (exponential from 1 s)
# OpenSSL verify results that depend on this node's clock (X509_V_ERR_CERT_NOT_YET_VALID, _HAS_EXPIRED and
# the CRL pair), and the texts Python's ssl module gives them.
CLOCK_VERIFY_CODES = {9: 'not_yet_valid', 10: 'expired', 11: 'not_yet_valid', 12: 'expired'}
CLOCK_TEXTS = (('certificate is not yet valid', 'not_yet_valid'), ('crl is not yet valid', 'not_yet_valid'),
               ('certificate has expired', 'expired'), ('crl has expired', 'expired'))


class HfDownloadError(Exception):
    """A failure with a user-facing message that names the problem and the fix."""

    def __init__(self, msg, kind='error', details=None):
        super(HfDownloadError, self).__init__(msg)
        self.msg = msg
        self.kind = kind
        self.details = details or {}


class RemoteFile(object):
    """One file of a repo at a commit: path, size in bytes, etag (sha256 for LFS files, else git blob id)."""

    __slots__ = ('path', 'size', 'etag')

    def __init__(self, path, size, etag):
        self.path = path
        self.size = int(size or 0)
        self.etag = etag

    def to_json(self):
        return {'size': self.size, 'etag': self.etag}

    def __repr__(self):
        return 'RemoteFile(%r, %d, %r)' % (self.path, self.size, self.etag)


# --------------------------------------------------------------------------- helpers


def repo_folder_name(repo_id, repo_type):
    """huggingface_hub cache folder name, e.g. models--org--name."""
    return '--'.join(['%ss' % repo_type] + repo_id.split('/'))


def default_cache_dir():
    if HAS_HF:
        return hf_constants.HF_HUB_CACHE
    return os.path.join(os.environ.get('HF_HOME', os.path.expanduser('~/.cache/huggingface')), 'hub')


def _atomic_write(path, data, mode=None):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-', suffix='.part')
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, 'w') as f:
            f.write(data)
        os.replace(tmp, path)
    except Exception:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _read_text(path):
    try:
        with open(path, 'r') as f:
            return f.read()
    except (IOError, OSError):
        return None


def _existing_ancestor(path):
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _exception_chain(exc):
    seen = []
    todo = [exc]
    while todo and len(seen) < 20:
        cur = todo.pop(0)
        if cur is None or any(cur is s for s in seen):
            continue
        seen.append(cur)
        todo.extend([getattr(cur, '__cause__', None), getattr(cur, '__context__', None)])
    return seen


def _class_names(exc):
    return set(cls.__name__ for cls in type(exc).__mro__)


def _http_status(exc):
    response = getattr(exc, 'response', None)
    return getattr(response, 'status_code', None)


def _server_message(exc):
    msg = getattr(exc, 'server_message', None) or ''
    response = getattr(exc, 'response', None)
    headers = getattr(response, 'headers', None)
    if headers is not None:
        try:
            msg = msg + ' ' + (headers.get('X-Error-Message') or '')
        except Exception:  # pylint: disable=broad-except
            pass
    return msg


def _first_line(text, limit=300):
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            return line[:limit]
    return ''


# --------------------------------------------------------------------------- HTTP 429 (rate limits)


class RateLimited(Exception):
    """An HTTP 429 answer, raised by the client's response hook (see _install_client_hooks).

    Raised before huggingface_hub's own retry loop sees the answer: that loop honours only a
    Retry-After in seconds, and without any bound (a Retry-After of a day sleeps a day).
    """

    def __init__(self, retry_after=None):
        super(RateLimited, self).__init__('HTTP 429 Too Many Requests')
        self.retry_after = retry_after  # the Retry-After header as sent (or None)


def parse_retry_after(value, now=None):
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP-date (RFC 9110 10.2.3).

    A date in the past gives 0. None for a missing or unreadable header.
    """
    if value is None:
        return None
    value = str(value).strip()
    if not value:
        return None
    if value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT
        when = when.replace(tzinfo=datetime.timezone.utc)
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def rate_limit_of(exc):
    """(True, Retry-After header or None) when exc (or its chain) is an HTTP 429 answer, else (False, None)."""
    for e in _exception_chain(exc):
        if isinstance(e, RateLimited):
            return True, e.retry_after
        if _http_status(e) == 429:
            headers = getattr(getattr(e, 'response', None), 'headers', None)
            value = None
            if headers is not None:
                try:
                    value = headers.get('Retry-After')
                except Exception:  # pylint: disable=broad-except
                    value = None
            return True, value
    return False, None


class RateLimitPolicy(object):
    """Retries a step answered HTTP 429, waiting what Retry-After asks; bounded for the whole run.

    At most ``retries`` retries and ``max_wait`` seconds of waiting in total. Without Retry-After
    the waits are 1, 2, 4 ... seconds (at most RATE_LIMIT_BACKOFF_CAP). A wait that would pass
    ``max_wait`` is not started: the run fails at once with error_kind rate_limited.
    """

    def __init__(self, retries=DEFAULT_RATE_LIMIT_RETRIES, max_wait=DEFAULT_RATE_LIMIT_MAX_WAIT, endpoint='',
                 sleep=None, clock=None, on_wait=None):
        self.retries = max(0, int(retries))
        self.max_wait = max(0, int(max_wait))
        self.endpoint = endpoint
        self.sleep = sleep or time.sleep
        self.clock = clock or time.time
        self.on_wait = on_wait
        self.retried = 0
        self.waited = 0.0
        self.waits = []

    def call(self, step, *args, **kwargs):
        while True:
            try:
                return step(*args, **kwargs)
            except Exception as exc:  # pylint: disable=broad-except
                limited, header = rate_limit_of(exc)
                if not limited:
                    raise
                self._wait(header)

    def _wait(self, header):
        asked = parse_retry_after(header, self.clock())
        wait = asked if asked is not None else float(min(RATE_LIMIT_BACKOFF_CAP, 2 ** self.retried))
        said = ('it asks to wait %d s (Retry-After: %s)' % (int(round(wait)), header) if asked is not None
                else 'it sent no usable Retry-After')
        if self.retried >= self.retries:
            raise HfDownloadError(
                'rate limited by %s (HTTP 429) %d time(s); %s: gave up after rate_limit_retries=%d retries: wait and '
                're-run, raise rate_limit_retries, or use an HF token (authenticated requests get higher limits)'
                % (self.endpoint, self.retried + 1, said, self.retries), kind='rate_limited')
        if self.waited + wait > self.max_wait:
            raise HfDownloadError(
                'rate limited by %s (HTTP 429); %s, which would pass rate_limit_max_wait=%d s (%d s waited already): '
                'wait and re-run, raise rate_limit_max_wait, or use an HF token (authenticated requests get higher '
                'limits)' % (self.endpoint, said, self.max_wait, int(self.waited)), kind='rate_limited')
        self.retried += 1
        self.waited += wait
        self.waits.append(wait)
        if self.on_wait is not None:
            self.on_wait(wait)
        self.sleep(wait)


# --------------------------------------------------------------------------- TLS and the clock


def clock_problem(exc):
    """'not_yet_valid' or 'expired' when exc (or its chain) is a TLS verification failure that depends on
    this node's clock, else None. Reads the ssl error's verify_code, else the text ssl gives it (the HTTP
    library may only keep the text)."""
    for e in _exception_chain(exc):
        code = getattr(e, 'verify_code', None)
        if code in CLOCK_VERIFY_CODES:
            return CLOCK_VERIFY_CODES[code]
    for e in _exception_chain(exc):
        text = ('%s %s' % (getattr(e, 'verify_message', '') or '', e)).lower()
        for needle, problem in CLOCK_TEXTS:
            if needle in text:
                return problem
    return None


# --------------------------------------------------------------------------- targets (on-disk state)


class Target(object):
    """Where files land: the huggingface_hub cache (cache_dir) or a plain directory (local_dir)."""

    def __init__(self, repo_id, repo_type, cache_dir=None, local_dir=None):
        self.repo_id = repo_id
        self.repo_type = repo_type
        self.local_dir = os.path.abspath(os.path.expanduser(local_dir)) if local_dir else None
        self.cache_dir = None
        self.storage_folder = None
        if self.local_dir is None:
            self.cache_dir = os.path.abspath(os.path.expanduser(cache_dir or default_cache_dir()))
            self.storage_folder = os.path.join(self.cache_dir, repo_folder_name(repo_id, repo_type))
            self.state_dir = os.path.join(self.storage_folder, STATE_DIR_NAME)
        else:
            self.state_dir = os.path.join(self.local_dir, '.cache', 'huggingface', LOCAL_STATE_DIR_NAME)

    @property
    def mode(self):
        return 'local_dir' if self.local_dir else 'cache_dir'

    @property
    def write_root(self):
        return self.local_dir or self.cache_dir

    def path_for(self, commit):
        if self.local_dir:
            return self.local_dir
        return os.path.join(self.storage_folder, 'snapshots', commit)

    # refs ---------------------------------------------------------------
    def _ref_path(self, revision):
        if self.local_dir:
            return os.path.join(self.state_dir, 'refs', *revision.split('/'))
        return os.path.join(self.storage_folder, 'refs', *revision.split('/'))

    def read_ref(self, revision):
        if REGEX_COMMIT.match(revision):
            return revision
        value = _read_text(self._ref_path(revision))
        value = value.strip() if value else None
        return value if value and REGEX_COMMIT.match(value) else None

    def recorded_commit(self, revision):
        """Commit the target currently holds for revision (None if nothing recorded yet)."""
        if REGEX_COMMIT.match(revision):
            if self.local_dir is None:
                return revision if os.path.isdir(self.path_for(revision)) else None
            return revision if os.path.exists(self._manifest_path(revision)) else None
        return self.read_ref(revision)

    def write_ref(self, revision, commit):
        if REGEX_COMMIT.match(revision) or self.read_ref(revision) == commit:
            return False
        _atomic_write(self._ref_path(revision), commit)
        return True

    # listing manifests --------------------------------------------------
    def _manifest_path(self, commit):
        return os.path.join(self.state_dir, '%s.json' % commit)

    def read_listing(self, commit):
        """Repo file listing recorded for commit: ours first, then the huggingface_hub >= 2 tree cache."""
        raw = _read_text(self._manifest_path(commit))
        if raw:
            try:
                data = json.loads(raw)
                if data.get('format') == MANIFEST_FORMAT and data.get('commit') == commit:
                    return [RemoteFile(p, v['size'], v.get('etag')) for p, v in sorted(data['files'].items())]
            except (ValueError, KeyError, TypeError, AttributeError):
                pass
        if self.local_dir:
            tree_path = os.path.join(self.local_dir, '.cache', 'huggingface', 'trees', '%s.json' % commit)
        else:
            tree_path = os.path.join(self.storage_folder, 'trees', '%s.json' % commit)
        raw = _read_text(tree_path)
        if raw:
            try:
                data = json.loads(raw)
                if data.get('format_version') == 1:
                    files = []
                    for p, v in sorted(data['files'].items()):
                        size = v.get('lfs_size') if v.get('lfs_sha256') else v['size']
                        files.append(RemoteFile(p, size, v.get('lfs_sha256') or v.get('blob_id')))
                    return files
            except (ValueError, KeyError, TypeError, AttributeError):
                pass
        return None

    def write_listing(self, commit, files, endpoint, revision):
        path = self._manifest_path(commit)
        if os.path.exists(path):
            return
        data = {
            'format': MANIFEST_FORMAT,
            'tool': 'sparkops.specdec.hf_download',
            'repo_id': self.repo_id,
            'repo_type': self.repo_type,
            'commit': commit,
            'revision': revision,
            'endpoint': endpoint,
            'files': dict((f.path, f.to_json()) for f in files),
        }
        _atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + '\n')

    # file state ---------------------------------------------------------
    def file_state(self, commit, rfile):
        """'present', 'link' (blob already in the cache, only the snapshot entry is missing) or 'missing'.

        Never hashes file content: complete means "final name exists with the expected size" (and for
        local_dir, download metadata of this commit or etag, not older than the file).
        """
        parts = rfile.path.split('/')
        if self.local_dir:
            fpath = os.path.join(self.local_dir, *parts)
            try:
                st = os.stat(fpath)
            except OSError:
                return 'missing'
            if st.st_size != rfile.size:
                return 'missing'
            meta = _read_text(os.path.join(self.local_dir, '.cache', 'huggingface', 'download', *parts) + '.metadata')
            if not meta:
                return 'missing'
            lines = meta.splitlines()
            try:
                meta_commit, meta_etag, stamp = lines[0].strip(), lines[1].strip(), float(lines[2].strip())
            except (IndexError, ValueError):
                return 'missing'
            if meta_commit != commit and (not rfile.etag or meta_etag != rfile.etag):
                return 'missing'
            if st.st_mtime - 1 > stamp:  # modified after download (same rule as huggingface_hub)
                return 'missing'
            return 'present'
        pointer = os.path.join(self.storage_folder, 'snapshots', commit, *parts)
        try:
            if os.stat(pointer).st_size == rfile.size:
                return 'present'
        except OSError:
            pass
        if rfile.etag:
            try:
                if os.stat(os.path.join(self.storage_folder, 'blobs', rfile.etag)).st_size == rfile.size:
                    return 'link'
            except OSError:
                pass
        return 'missing'

    def discard_invalid(self, commit, rfiles):
        """Remove entries of these (not complete) files that huggingface_hub would otherwise trust as complete.

        huggingface_hub returns an existing snapshot entry (cache) or an entry with matching download metadata
        (local_dir) without checking its size, so a truncated/corrupted file would never be repaired.
        Files are complete only under their final name, so a wrong size means external damage.
        """
        removed = []
        for rfile in rfiles:
            parts = rfile.path.split('/')
            if self.local_dir:
                fpath = os.path.join(self.local_dir, *parts)
                try:
                    wrong = os.stat(fpath).st_size != rfile.size
                except OSError:
                    wrong = False
                if wrong:
                    _unlink(fpath)
                    _unlink(os.path.join(self.local_dir, '.cache', 'huggingface', 'download', *parts) + '.metadata')
                    removed.append(rfile.path)
                continue
            pointer = os.path.join(self.storage_folder, 'snapshots', commit, *parts)
            if os.path.lexists(pointer):
                _unlink(pointer)
                removed.append(rfile.path)
            if rfile.etag:
                blob = os.path.join(self.storage_folder, 'blobs', rfile.etag)
                try:
                    if os.stat(blob).st_size != rfile.size:
                        _unlink(blob)
                except OSError:
                    pass
        return removed

    # partial downloads ---------------------------------------------------
    def _partial_dir(self, rfile):
        if self.local_dir:
            parts = rfile.path.split('/')
            return os.path.join(self.local_dir, '.cache', 'huggingface', 'download', *parts[:-1])
        return os.path.join(self.storage_folder, 'blobs')

    def lock_path(self, rfile):
        """The lock huggingface_hub holds while it downloads this file (same path, so the two never race)."""
        if self.local_dir:
            return os.path.join(self.local_dir, '.cache', 'huggingface', 'download', *rfile.path.split('/')) + '.lock'
        return os.path.join(self.cache_dir, '.locks', os.path.basename(self.storage_folder), rfile.etag + '.lock')

    def partial_etag(self, name):
        """The etag in the name of a huggingface_hub partial download (see partials()), or None for other names."""
        match = (REGEX_PARTIAL_LOCAL if self.local_dir else REGEX_PARTIAL_CACHE).match(name)
        return match.group(1) if match else None

    def partials(self, rfile):
        """Partial downloads of rfile left by an interrupted earlier run: [(path, size in bytes)], largest first.

        Names written by huggingface_hub: cache mode ``blobs/<etag>.incomplete`` (< 2.0) or
        ``blobs/<etag>.<8 hex>.incomplete`` (>= 2.0, one per process); local_dir mode
        ``.cache/huggingface/download/<dir>/<hash>.<etag>[.<8 hex>].incomplete``. huggingface_hub >= 2.0 never
        resumes them itself (its temporary name is unique to the process that was killed).
        """
        if not rfile.etag:
            return []
        directory = self._partial_dir(rfile)
        try:
            names = os.listdir(directory)
        except OSError:
            return []
        found = []
        for name in names:
            if self.partial_etag(name) == rfile.etag:
                path = os.path.join(directory, name)
                try:
                    found.append((path, os.stat(path).st_size))
                except OSError:
                    continue
        found.sort(key=lambda item: (-item[1], item[0]))
        return found

    def reusable_bytes(self, rfiles):
        """Bytes of rfiles already on disk in partial downloads (what a resume does not fetch again)."""
        total = 0
        for rfile in rfiles:
            found = [size for _path, size in self.partials(rfile) if size <= rfile.size]
            total += max(found) if found else 0
        return total

    def finish(self, rfile, commit, partial):
        """Give a completed partial file its final name (the blob, or the local_dir file plus its metadata)."""
        _chmod_like_umask(partial)
        if self.local_dir:
            parts = rfile.path.split('/')
            final = os.path.join(self.local_dir, *parts)
            meta = os.path.join(self.local_dir, '.cache', 'huggingface', 'download', *parts) + '.metadata'
            if not os.path.isdir(os.path.dirname(final)):
                os.makedirs(os.path.dirname(final))
            os.replace(partial, final)
            # huggingface_hub's local_dir metadata format: commit, etag, unix time (see module docstring).
            _atomic_write(meta, '%s\n%s\n%s\n' % (commit, rfile.etag, time.time()))
        else:
            os.replace(partial, os.path.join(self.storage_folder, 'blobs', rfile.etag))


def _chmod_like_umask(path):
    """Permissions of a new file (0666 minus umask), as huggingface_hub sets them on the files it moves in place."""
    mask = os.umask(0o022)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def _sha256_of(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(8 * 1024 * 1024), b''):
            h.update(block)
    return h.hexdigest()


def resume_partials(target, commit, rfiles, endpoint, token, warnings):
    """Complete the partial downloads of rfiles that an interrupted earlier run left behind.

    huggingface_hub >= 2.0 downloads each file to a temporary name unique to its process and never reuses
    it, so after a kill (SIGKILL, OOM, node reboot) the bytes already on disk would be fetched again. For each
    file with such a partial file (the largest one), under huggingface_hub's own lock for that file: request
    the remaining bytes with an HTTP Range (``huggingface_hub.file_download.http_get(resume_size=...)``,
    which starts over if the server ignores the range), check the size and, for LFS files, the sha256 (the
    etag), and move it to its final name; snapshot_download then only links it. Other partial copies of
    the same file are removed. A partial file that is larger than the file, or whose completed content does
    not match the sha256, is removed and the file is downloaded afresh.

    Returns the number of bytes reused (not fetched again).
    """
    reused = 0
    headers = build_hf_headers(token=token if token else False, library_name=LIBRARY_NAME,
                               library_version=LIBRARY_VERSION)
    for rfile in rfiles:
        if not target.partials(rfile):
            continue
        lock = target.lock_path(rfile)
        if not os.path.isdir(os.path.dirname(lock)):
            os.makedirs(os.path.dirname(lock))
        with WeakFileLock(lock):
            found = target.partials(rfile)  # again, under the lock: a concurrent download may have finished
            keep = None
            for path, size in found:
                if keep is None and 0 < size <= rfile.size:
                    keep = (path, size)
                else:
                    _unlink(path)
            if keep is None:
                continue
            path, size = keep
            url = hf_hub_url(target.repo_id, rfile.path, repo_type=target.repo_type, revision=commit, endpoint=endpoint)
            with open(path, 'r+b') as f:
                f.seek(0, os.SEEK_END)
                http_get(url, f, resume_size=size, headers=dict(headers), expected_size=rfile.size,
                         displayed_filename=rfile.path)
                f.truncate()  # the server may have restarted the file from byte 0 (status 200)
            got = os.stat(path).st_size
            if got != rfile.size or (REGEX_SHA256.match(rfile.etag) and _sha256_of(path) != rfile.etag):
                _unlink(path)
                warnings.append('%s: the partial download left by an earlier run did not complete to the expected '
                                'content (%d bytes, sha256 %s): removed; the file is downloaded again'
                                % (rfile.path, got, rfile.etag))
                continue
            target.finish(rfile, commit, path)
            reused += size
    return reused


def _unlink(path):
    try:
        os.unlink(path)
    except OSError as e:
        if e.errno != errno.ENOENT:
            raise


class Plan(object):
    def __init__(self, target, commit, files, allow_patterns, ignore_patterns):
        self.commit = commit
        self.all_files = files
        by_path = dict((f.path, f) for f in files)
        selected = select_paths([f.path for f in files], allow_patterns, ignore_patterns)
        self.selection = [by_path[p] for p in selected]
        self.present, self.link, self.missing = [], [], []
        for f in self.selection:
            getattr(self, target.file_state(commit, f)).append(f)

    @property
    def to_fetch(self):
        """Files that will be placed in the target (downloaded, or linked from an existing cache blob)."""
        return sorted(self.missing + self.link, key=lambda f: f.path)

    @property
    def bytes_total(self):
        return sum(f.size for f in self.selection)

    @property
    def bytes_download(self):
        return sum(f.size for f in self.missing)


# --------------------------------------------------------------------------- progress file


class Progress(object):
    """The progress_file document, replaced atomically at each state change and every PROGRESS_INTERVAL seconds.

    Keys: repo_id, revision, commit (None until resolved), state (resolving, downloading, done, failed),
    files_total / bytes_total (the selected files; 0 while resolving), files_done / bytes_done (of those, what
    is on disk: complete files plus partial downloads; never decreases), bytes_per_second (over the last
    PROGRESS_RATE_WINDOW seconds while downloading; average of the whole download when done), started and
    updated (epoch seconds), pid; error_kind and msg when failed. Never the token.

    How bytes are counted, and why: a thread polls the disk rather than hooking huggingface_hub's progress
    bars. The ``tqdm_class`` argument is not a stable way to get byte progress: in 1.0 snapshot_download
    passes it to the "Fetching N files" bar only (one update per file, the per-file byte bars are
    huggingface_hub's own), while 1.3x/2.x feed per-file bytes to a private aggregating class and call
    extra methods (update_transfer, set_transfer_postfix_str) on the bars made from ``tqdm_class``. What
    every 1.x and 2.x release shares is where the bytes go: each file is downloaded into a temporary
    ``*.incomplete`` file renamed when complete: ``blobs/<etag>.incomplete`` (1.0) or
    ``blobs/<etag>.<8 hex>.incomplete`` (1.3x, 2.x) in the cache, and
    ``.cache/huggingface/download/<dir>/<hash>.<etag>[.<8 hex>].incomplete`` for local_dir (Xet downloads
    write the same file). So bytes_done = the selected files complete on disk + the size of the
    ``*.incomplete`` files, written since the download started, of the files still missing (the largest
    one per etag, at most the file size). Cost: a stat per missing file and one directory scan per second.
    """

    def __init__(self, path, repo_id, revision, secrets=None, interval=None):
        self.path = path
        self.interval = PROGRESS_INTERVAL if interval is None else interval
        self.secrets = [s for s in (secrets or []) if s]
        self.warnings = []
        now = time.time()
        self.doc = {
            'repo_id': repo_id, 'revision': revision, 'commit': None, 'state': 'resolving',
            'files_total': 0, 'files_done': 0, 'bytes_total': 0, 'bytes_done': 0, 'bytes_per_second': 0,
            'started': round(now, 3), 'updated': round(now, 3), 'pid': os.getpid(),
        }
        self._write_lock = threading.Lock()
        self._sample_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._samples = collections.deque()
        self._target = None
        self._pending = []
        self._bytes_on_disk = 0
        self._download_started = None
        self._bytes_at_download_start = 0

    # ---- states
    def start(self):
        """Write the 'resolving' document and start the thread that refreshes it (``updated`` moves every
        interval in every state: a reader tells a live run from a dead one by it); a progress_file that
        cannot be written fails the run early."""
        try:
            self._write()
            self._start_thread()
        except (IOError, OSError) as e:
            if e.errno in SPACE_ERRNOS:
                kind = 'disk_full'
            elif e.errno in WRITE_ERRNOS:
                kind = 'not_writable'
            else:
                kind = 'invalid_option'
            raise HfDownloadError('cannot write progress_file %s (%s): choose a path in a directory the user running '
                                  'the module can write to, or leave progress_file unset'
                                  % (self.path, e.strerror or type(e).__name__), kind=kind)

    def planned(self, plan):
        """Totals of the selected files, and what is already on disk."""
        on_disk = plan.present + plan.link
        self._pending = list(plan.missing)
        self._bytes_on_disk = sum(f.size for f in on_disk)
        self.doc.update(commit=plan.commit, files_total=len(plan.selection), bytes_total=plan.bytes_total,
                        files_done=len(on_disk), bytes_done=self._bytes_on_disk)

    def downloading(self, target):
        """Write the 'downloading' document and start the thread that refreshes it."""
        self._target = target
        self._download_started = time.time()
        self._bytes_at_download_start = self.doc['bytes_done']
        self.doc['state'] = 'downloading'
        self._sample()
        self._safe_write()
        self._start_thread()

    def _start_thread(self):
        if self._thread is not None or self._stop.is_set():
            return
        self._thread = threading.Thread(target=self._loop, name='hf_download-progress')
        self._thread.daemon = True
        self._thread.start()

    def done(self):
        self.halt()
        now = time.time()
        self.doc.update(state='done', files_done=self.doc['files_total'], bytes_done=self.doc['bytes_total'])
        if self._download_started is not None and now > self._download_started:
            self.doc['bytes_per_second'] = int(max(0, self.doc['bytes_total'] - self._bytes_at_download_start)
                                               / (now - self._download_started))
        self._safe_write()

    def failed(self, kind, msg):
        self.halt()
        if self._target is not None:
            try:
                self._sample()
            except Exception:  # pylint: disable=broad-except
                pass
        self.doc.update(state='failed', error_kind=kind, msg=scrub(msg, self.secrets))
        self._safe_write()

    def halt(self):
        """Stop the refresh thread (idempotent)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(10)

    # ---- measurement
    def _loop(self):
        while not self._stop.wait(self.interval):
            try:
                if self._target is not None:  # downloading: measure; before that only the heartbeat
                    self._sample()
                self._safe_write()
            except Exception as e:  # pylint: disable=broad-except  # progress must never break the download
                self._warn('progress_file %s: progress measurement failed (%s: %s)' % (self.path, type(e).__name__, e))

    def _is_complete(self, rfile):
        target = self._target
        if target.local_dir:
            # The final name with the expected size, written during this download (an older file of the right
            # size with other content may still be there until huggingface_hub replaces it).
            try:
                st = os.stat(os.path.join(target.local_dir, *rfile.path.split('/')))
            except OSError:
                return False
            return st.st_size == rfile.size and st.st_mtime >= self._download_started - 2
        return target.file_state(self.doc['commit'], rfile) != 'missing'

    def _partial_bytes(self, pending):
        target = self._target
        sizes = dict((f.etag, f.size) for f in pending if f.etag)
        if not sizes:
            return 0
        best = {}
        fresh = self._download_started - 2
        if target.local_dir:
            walk = os.walk(os.path.join(target.local_dir, '.cache', 'huggingface', 'download'))
        else:
            walk = [(os.path.join(target.storage_folder, 'blobs'), None, None)]
        for dirpath, _dirs, names in walk:
            if names is None:
                try:
                    names = os.listdir(dirpath)
                except OSError:
                    continue
            for name in names:
                etag = target.partial_etag(name)
                if etag not in sizes:
                    continue
                try:
                    st = os.stat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if st.st_mtime >= fresh:
                    best[etag] = max(best.get(etag, 0), min(st.st_size, sizes[etag]))
        return sum(best.values())

    def _sample(self):
        with self._sample_lock:  # the refresh thread and the state changes both measure
            self._sample_locked()

    def _sample_locked(self):
        still = []
        for rfile in self._pending:
            if self._is_complete(rfile):  # once complete, counted as complete (no re-check)
                self.doc['files_done'] += 1
                self._bytes_on_disk += rfile.size
            else:
                still.append(rfile)
        self._pending = still
        measured = self._bytes_on_disk + self._partial_bytes(still)
        bytes_done = min(self.doc['bytes_total'], max(self.doc['bytes_done'], measured))  # never decreases
        now = time.time()
        self._samples.append((now, bytes_done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= PROGRESS_RATE_WINDOW:
            self._samples.popleft()
        first_time, first_bytes = self._samples[0]
        if now - first_time >= 0.2:
            self.doc['bytes_per_second'] = int((bytes_done - first_bytes) / (now - first_time))
        self.doc['bytes_done'] = bytes_done

    # ---- output
    def _write(self):
        with self._write_lock:
            self.doc['updated'] = round(time.time(), 3)
            # 0644: the document holds no secret, and whoever polls it may not be the user running the module
            _atomic_write(self.path, json.dumps(self.doc, sort_keys=True) + '\n', mode=0o644)

    def _safe_write(self):
        try:
            self._write()
        except (IOError, OSError) as e:
            self._warn('could not update progress_file %s (%s)' % (self.path, e.strerror or type(e).__name__))

    def _warn(self, msg):
        if msg not in self.warnings:
            self.warnings.append(msg)


def select_paths(paths, allow_patterns, ignore_patterns):
    """Same pattern semantics as snapshot_download (fnmatch, '*' crosses '/')."""
    if HAS_HF:
        return list(filter_repo_objects(items=list(paths), allow_patterns=allow_patterns or None,
                                        ignore_patterns=ignore_patterns or None))
    import fnmatch  # pragma: no cover - only without huggingface_hub
    out = []
    for p in paths:
        if allow_patterns and not any(fnmatch.fnmatchcase(p, pat) for pat in allow_patterns):
            continue
        if ignore_patterns and any(fnmatch.fnmatchcase(p, pat) for pat in ignore_patterns):
            continue
        out.append(p)
    return out


# --------------------------------------------------------------------------- huggingface_hub glue


def configure_hf(timeout):
    """Quiet, deterministic huggingface_hub settings for a module run."""
    try:
        huggingface_hub.utils.disable_progress_bars()
    except Exception:  # pylint: disable=broad-except
        pass
    try:
        huggingface_hub.utils.logging.set_verbosity_error()
    except Exception:  # pylint: disable=broad-except
        pass
    # Telemetry would add requests to huggingface.co (2.x fetches an "agent harness" registry from the
    # *default* endpoint when building the user agent) even when endpoint points to a mirror.
    hf_constants.HF_HUB_DISABLE_TELEMETRY = True
    hf_constants.HF_HUB_ETAG_TIMEOUT = timeout
    hf_constants.HF_HUB_DOWNLOAD_TIMEOUT = timeout
    _install_client_hooks(timeout)


def _rate_limit_hook(response):
    """Response hook: an HTTP 429 answer raises RateLimited (RateLimitPolicy retries the step, bounded)."""
    if getattr(response, 'status_code', None) == 429:
        headers = getattr(response, 'headers', None)
        raise RateLimited(headers.get('Retry-After') if headers is not None else None)


def _install_client_hooks(timeout):
    """On huggingface_hub's httpx clients: a default timeout for requests sent without one (tree listing),
    and the HTTP 429 hook (_rate_limit_hook)."""
    try:
        from huggingface_hub.utils import _http as hf_http
        base_factory = hf_http.default_client_factory
        set_factory = huggingface_hub.set_client_factory
    except Exception:  # pylint: disable=broad-except  # huggingface_hub 0.x (requests backend)
        return

    def hook(request):
        current = request.extensions.get('timeout') or {}
        if all(v is None for v in current.values()):
            request.extensions['timeout'] = {'connect': timeout, 'read': timeout, 'write': timeout, 'pool': timeout}

    def factory():
        client = base_factory()
        try:
            client.event_hooks['request'].append(hook)
            client.event_hooks['response'].append(_rate_limit_hook)
        except Exception:  # pylint: disable=broad-except
            pass
        return client

    try:
        set_factory(factory)
    except Exception:  # pylint: disable=broad-except
        pass


def _remote_file(entry):
    lfs = getattr(entry, 'lfs', None)
    if lfs:
        sha = getattr(lfs, 'sha256', None) or (lfs.get('sha256') if hasattr(lfs, 'get') else None)
        size = getattr(lfs, 'size', None) or (lfs.get('size') if hasattr(lfs, 'get') else None)
        if sha:
            return RemoteFile(entry.path, size if size is not None else entry.size, sha)
    return RemoteFile(entry.path, entry.size, getattr(entry, 'blob_id', None))


def resolve_remote(api, repo_id, repo_type, revision, timeout):
    """Resolve revision to a commit and list the repo files at that commit."""
    info = api.repo_info(repo_id=repo_id, repo_type=repo_type, revision=revision, timeout=timeout)
    commit = getattr(info, 'sha', None)
    if not commit:
        raise HfDownloadError('the Hub did not return a commit SHA for %s@%s: check that endpoint points to a '
                              'Hugging Face Hub compatible server' % (repo_id, revision))
    files = []
    for entry in api.list_repo_tree(repo_id=repo_id, recursive=True, revision=commit, repo_type=repo_type):
        if hasattr(entry, 'blob_id') or hasattr(entry, 'lfs'):
            files.append(_remote_file(entry))
    files.sort(key=lambda f: f.path)
    return commit, files


def probe_access(repo_id, repo_type, commit, rfile, endpoint, token, timeout):
    """HEAD one file: surfaces gated/permission errors before anything is written (and in check mode)."""
    url = hf_hub_url(repo_id, rfile.path, repo_type=repo_type, revision=commit, endpoint=endpoint)
    get_hf_file_metadata(url=url, token=token, timeout=timeout)


def disk_space_check(target, needed_bytes):
    """Fail early (ENOSPC) rather than half-way through a multi-GB download."""
    if needed_bytes <= 0:
        return
    where = _existing_ancestor(target.write_root)
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return
    if free < needed_bytes:
        raise HfDownloadError(
            'not enough disk space (ENOSPC): %d bytes to download but only %d bytes free on the filesystem of %s: '
            'free at least %d bytes or point %s at a larger filesystem, then re-run'
            % (needed_bytes, free, where, needed_bytes - free, target.mode),
            kind='disk_full')


# --------------------------------------------------------------------------- error mapping


def describe_error(exc, ctx):
    """Map an exception to (kind, message naming the problem and the fix). Never includes the token.

    ctx keys: repo_id, repo_type, revision, endpoint, token_given (bool), timeout, target (Target or None),
    secrets (list: every form of each is scrubbed from the message, which may quote the exception).
    """
    kind, msg = _describe_error(exc, ctx)
    return kind, scrub(msg, ctx.get('secrets'))


def _describe_error(exc, ctx):
    if isinstance(exc, HfDownloadError):
        return exc.kind, exc.msg
    repo = ctx['repo_id']
    endpoint = ctx['endpoint']
    repo_url = '%s/%s%s' % (endpoint, '' if ctx['repo_type'] == 'model' else ctx['repo_type'] + 's/', repo)
    chain = _exception_chain(exc)
    target = ctx.get('target')
    where = target.write_root if target is not None else 'the target directory'

    for e in chain:
        if isinstance(e, (OSError, IOError)) and getattr(e, 'errno', None) in SPACE_ERRNOS:
            return 'disk_full', (
                'no space left on device (ENOSPC) while writing %s to %s: free disk space or point cache_dir/local_dir '
                'at a larger filesystem, then re-run (completed files are kept, partial ones are discarded)'
                % (repo, where))
    for e in chain:
        if isinstance(e, GatedRepoError):
            if not ctx.get('token_given'):
                return 'gated', (
                    '%s is a gated repository and no HF token was given: set the token of an account that has access in '
                    'HF_TOKEN / the token option (or token_file); if the account has no access yet, request access to %s '
                    'on the Hub (%s), then re-run' % (repo, repo, repo_url))
            return 'gated', (
                'access to gated repository %s was denied for the given HF token: request access to %s on the Hub (%s), '
                'then re-run (or use the token of an account that already has access)' % (repo, repo, repo_url))
    for e in chain:
        if isinstance(e, RevisionNotFoundError):
            return 'revision_not_found', (
                'revision %r not found in %s %s on %s: use an existing branch, tag or full 40-character commit SHA '
                '(see %s/tree/main)' % (ctx['revision'], ctx['repo_type'], repo, endpoint, repo_url))
    for e in chain:
        if isinstance(e, HfHubHTTPError) and _http_status(e) == 401 and (
                'invalid credentials' in _server_message(e).lower() or 'invalid credentials' in str(e).lower()
                or (ctx.get('token_given') and not isinstance(e, RepositoryNotFoundError))):
            return 'token_rejected', (
                'HF token rejected by %s: set a valid token in HF_TOKEN / the token option (or token_file); '
                'create or renew one at %s/settings/tokens' % (endpoint, endpoint))
    for e in chain:
        if isinstance(e, DisabledRepoError):
            return 'repo_disabled', ('repository %s is disabled on %s: pick another repository' % (repo, endpoint))
        if isinstance(e, RepositoryNotFoundError):
            hint = ('if it is private, set a token with read access in HF_TOKEN / the token option'
                    if not ctx.get('token_given') else 'if it is private, make sure the token can read it')
            return 'repo_not_found', (
                '%s repository %s not found on %s: check repo_id and repo_type (%s); %s'
                % (ctx['repo_type'], repo, endpoint, ctx['repo_type'], hint))
    for e in chain:
        if isinstance(e, EntryNotFoundError) and not isinstance(e, LocalEntryNotFoundError):
            return 'entry_not_found', (
                'a file listed in %s@%s could not be downloaded from %s (entry not found; the revision may have been '
                'rewritten): re-run; if it persists pin revision to a full commit SHA' % (repo, ctx['revision'], endpoint))
    for e in chain:
        if isinstance(e, OfflineModeIsEnabled):
            return 'offline_env', (
                'HF_HUB_OFFLINE is set in the environment of the target, so %s cannot be contacted: unset '
                'HF_HUB_OFFLINE, or set offline=true to use only files already on disk' % endpoint)
    clock = clock_problem(exc)
    if clock == 'not_yet_valid':
        return 'clock', (
            'the TLS certificate of %s is not yet valid by this node\'s clock: check this node\'s clock (date; '
            'timedatectl / chronyc tracking) and set it right (enable NTP), then re-run; the network is fine' % endpoint)
    if clock == 'expired':
        return 'clock', (
            'the TLS certificate of %s has expired by this node\'s clock: check this node\'s clock (date; a clock far '
            'ahead makes valid certificates look expired) and set it right (enable NTP); if the clock is right, the '
            'certificate of the endpoint (mirror) must be renewed' % endpoint)
    limited, header = rate_limit_of(exc)
    if limited:
        return 'rate_limited', ('rate limited by %s (HTTP 429, Retry-After: %s): wait and re-run, or use an HF '
                                'token (authenticated requests get higher limits)' % (endpoint, header))
    for e in chain:
        names = _class_names(e)
        if names & TIMEOUT_ERROR_NAMES and names & (CONNECTION_ERROR_NAMES | TIMEOUT_ERROR_NAMES):
            return 'unreachable', (
                'timed out after %s seconds talking to the Hub at %s: check network/proxy, raise timeout, or set '
                'offline=true to use only files already on disk' % (ctx.get('timeout'), endpoint))
        if names & INTERRUPTED_ERROR_NAMES:
            return 'interrupted', (
                'the connection to %s was interrupted during the download of %s (%s: %s): re-run to retry; files that '
                'completed are kept (and huggingface_hub resumes partial ones where it can)'
                % (endpoint, repo, type(e).__name__, _first_line(e, 160)))
        if names & CONNECTION_ERROR_NAMES:
            return 'unreachable', (
                'cannot reach the Hugging Face Hub at %s (%s: %s): check network, DNS, proxy (HTTPS_PROXY) and the '
                'endpoint option / HF_ENDPOINT, or set offline=true to use only files already on disk'
                % (endpoint, type(e).__name__, _first_line(e, 160)))
    for e in chain:
        status = _http_status(e)
        if isinstance(e, HfHubHTTPError) and status is not None:
            if status == 403:
                return 'forbidden', (
                    'access to %s forbidden by %s (HTTP 403): the token lacks read permission for this repository '
                    '(fine-grained token?): grant "read" access to it or use another token' % (repo, endpoint))
            if status == 429:
                return 'rate_limited', ('rate limited by %s (HTTP 429): wait and re-run, or use an HF token '
                                        '(authenticated requests get higher limits)' % endpoint)
            if status >= 500:
                return 'hub_error', ('the Hub at %s answered HTTP %d (%s): retry later'
                                     % (endpoint, status, _first_line(e, 160)))
            return 'http_error', ('the Hub at %s answered HTTP %d for %s (%s): check repo_id/revision/endpoint'
                                  % (endpoint, status, repo, _first_line(e, 160)))
    for e in chain:
        if isinstance(e, (OSError, IOError)) and getattr(e, 'errno', None) in WRITE_ERRNOS:
            return 'not_writable', (
                'cannot write to %s (%s): fix ownership/permissions (or run with become) or choose another '
                'cache_dir/local_dir' % (where, os.strerror(e.errno)))
    return 'error', ('downloading %s from %s failed: %s: %s' % (repo, endpoint, type(exc).__name__, _first_line(exc)))


# --------------------------------------------------------------------------- the whole operation


def run(params, check_mode=False):
    """Ensure repo files are present. Returns a result dict; raises HfDownloadError.

    params: repo_id, revision, repo_type, cache_dir, local_dir, allow_patterns, ignore_patterns, token
    (resolved string or None), endpoint, offline, max_workers, timeout, progress_file (path or None; not
    written in check mode).
    """
    started = time.time()
    repo_id = params['repo_id']
    repo_type = params.get('repo_type') or 'model'
    revision = params.get('revision') or 'main'
    endpoint = (params.get('endpoint') or DEFAULT_ENDPOINT).rstrip('/')
    token = params.get('token') or None
    timeout = params.get('timeout') or 60
    allow = params.get('allow_patterns') or None
    ignore = params.get('ignore_patterns') or None
    target = Target(repo_id, repo_type, params.get('cache_dir'), params.get('local_dir'))
    ctx = dict(repo_id=repo_id, repo_type=repo_type, revision=revision, endpoint=endpoint,
               token_given=bool(token), timeout=timeout, target=target, secrets=[token] if token else [])
    before_commit = target.recorded_commit(revision)
    warnings = []
    progress = None
    if params.get('progress_file') and not check_mode:
        progress = Progress(params['progress_file'], repo_id, revision, secrets=[token])
    limits = RateLimitPolicy(_int_param(params, 'rate_limit_retries', DEFAULT_RATE_LIMIT_RETRIES),
                             _int_param(params, 'rate_limit_max_wait', DEFAULT_RATE_LIMIT_MAX_WAIT), endpoint)
    reused_parts = []

    def fetch_step():
        """Complete partial files, then download the rest; retried as a whole after an HTTP 429."""
        reused_parts.append(resume_partials(target, commit, plan.missing, endpoint, token, warnings))
        _download(params, target, commit, allow, ignore, endpoint, token, timeout)

    try:
        if progress is not None:
            progress.start()
        if params.get('offline'):
            plan = _offline_plan(target, revision, allow, ignore, endpoint)
        else:
            configure_hf(timeout)
            api = HfApi(endpoint=endpoint, token=token if token else False,
                        library_name=LIBRARY_NAME, library_version=LIBRARY_VERSION)
            commit, files = limits.call(resolve_remote, api, repo_id, repo_type, revision, timeout)
            plan = Plan(target, commit, files, allow, ignore)
            if plan.missing:
                limits.call(probe_access, repo_id, repo_type, commit, plan.missing[0], endpoint,
                            token if token else False, timeout)
        commit = plan.commit
        if progress is not None:
            progress.planned(plan)
        if not plan.selection:
            warnings.append('no file of %s@%s matches allow_patterns=%r / ignore_patterns=%r'
                            % (repo_id, revision, allow, ignore))

        fetch = plan.to_fetch
        ref_moves = (target.local_dir is None and not REGEX_COMMIT.match(revision)
                     and before_commit != commit and bool(plan.selection))
        if fetch and params.get('offline'):
            sample = ', '.join(f.path for f in fetch[:5]) + (', ...' if len(fetch) > 5 else '')
            raise HfDownloadError(
                'offline: the local copy of %s@%s (commit %s) in %s is incomplete: %d of %d file(s) missing or partial '
                '(%s): re-run with offline=false and network access to %s to complete it'
                % (repo_id, revision, commit, target.path_for(commit), len(fetch), len(plan.selection), sample, endpoint),
                kind='offline_incomplete')

        reused = 0
        if not check_mode and not params.get('offline'):
            if fetch:
                disk_space_check(target, plan.bytes_download - target.reusable_bytes(plan.missing))
                target.discard_invalid(commit, plan.missing)
                if progress is not None:
                    progress.downloading(target)
                limits.call(fetch_step)
                reused = sum(reused_parts)
                after = Plan(target, commit, plan.all_files, allow, ignore)
                if after.to_fetch:
                    bad = after.to_fetch
                    raise HfDownloadError(
                        'download of %s@%s finished but %d file(s) are still missing or of the wrong size (%s): re-run; '
                        'if it persists remove %s and re-run'
                        % (repo_id, commit, len(bad), ', '.join(f.path for f in bad[:5]), target.path_for(commit)),
                        kind='incomplete')
            if plan.selection:
                target.write_ref(revision, commit)
                try:
                    target.write_listing(commit, plan.all_files, endpoint, revision)
                except (IOError, OSError) as e:  # bookkeeping only: the files themselves are complete
                    warnings.append('could not record the file listing of %s@%s in %s (%s): offline=true will not be '
                                    'able to verify this copy' % (repo_id, commit, target.state_dir, e))
        elif check_mode and fetch and not params.get('offline'):
            reused = target.reusable_bytes(plan.missing)
            try:
                disk_space_check(target, plan.bytes_download - reused)
            except HfDownloadError as e:
                warnings.append(e.msg)
    except HfDownloadError as e:
        if progress is not None:
            progress.failed(e.kind, e.msg)
        raise
    except Exception as exc:  # pylint: disable=broad-except
        kind, msg = describe_error(exc, ctx)
        if progress is not None:
            progress.failed(kind, msg)
        raise HfDownloadError(msg, kind=kind, details={'exception_type': type(exc).__name__})
    finally:
        if progress is not None:
            progress.halt()  # also on KeyboardInterrupt / SystemExit

    if progress is not None:
        progress.done()
        warnings.extend(progress.warnings)
    changed = bool(fetch) or ref_moves
    result = {
        'changed': changed,
        'path': target.path_for(commit),
        'commit': commit,
        'files': len(plan.selection),
        'fetched_files': [f.path for f in fetch],
        'bytes_fetched': plan.bytes_download - reused,
        'bytes_reused': reused,
        'bytes_total': plan.bytes_total,
        'seconds': round(time.time() - started, 3),
        'rate_limit_waits': [round(w, 3) for w in limits.waits],
        'diff': {
            'before': {'commit': before_commit, 'files_present': len(plan.present)},
            'after': {'commit': commit, 'files_present': len(plan.selection)},
            'before_header': '%s (%s)' % (repo_id, target.path_for(before_commit or commit)),
            'after_header': '%s (%s)' % (repo_id, target.path_for(commit)),
        },
        'warnings': warnings,
    }
    return result


def _int_param(params, name, default):
    value = params.get(name)
    return default if value is None else int(value)


def _offline_plan(target, revision, allow, ignore, endpoint):
    commit = target.read_ref(revision)
    if commit is None:
        raise HfDownloadError(
            'offline: no local record of revision %r of %s in %s: run once with offline=false (needs network access to '
            '%s), or pass the full 40-character commit SHA as revision' % (revision, target.repo_id, target.write_root, endpoint),
            kind='offline_incomplete')
    files = target.read_listing(commit)
    if files is None:
        raise HfDownloadError(
            'offline: cannot verify that %s@%s (commit %s) in %s is complete: no file listing was recorded for that '
            'commit: run once with offline=false (needs network access to %s)'
            % (target.repo_id, revision, commit, target.path_for(commit), endpoint),
            kind='offline_incomplete')
    return Plan(target, commit, files, allow, ignore)


def _download(params, target, commit, allow, ignore, endpoint, token, timeout):
    kwargs = dict(
        repo_id=params['repo_id'],
        repo_type=params.get('repo_type') or 'model',
        revision=commit,
        allow_patterns=allow,
        ignore_patterns=ignore,
        token=token if token else False,
        endpoint=endpoint,
        max_workers=max(1, int(params.get('max_workers') or 8)),
        etag_timeout=timeout,
    )
    if target.local_dir:
        kwargs['local_dir'] = target.local_dir
    else:
        kwargs['cache_dir'] = target.cache_dir
    return snapshot_download(**kwargs)
