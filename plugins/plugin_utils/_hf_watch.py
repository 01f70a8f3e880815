# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: the verdict of the specdec_server role's download
# poll (roles/specdec_models/tasks/download_poll.yml, through the filter sparkops.specdec.hf_download_watch). Not a
# public API; names and messages may change in any release without notice. Pure: no I/O.
"""Is each background hf_download job running, done, failed, dead, or past the poll's deadline?

The poll calls ``watch()`` once per round with what it read on the node: the ``async_status``
result of every job and the slurped ``progress_file`` of the jobs not finished, plus the
previous round's verdict. Per job:

* done: ``async_status`` finished with the module's result (it has ``commit``);
* failed: finished with the module's own failure (it has ``error_kind``; its message names the fix);
* dead: finished without a result of the module (the module process was killed: no
  ``error_kind``, no ``commit``; or ``could not find job``: the job file is gone), or not finished
  but its progress file has not changed for ``stale_after`` seconds (hf_download rewrites it about
  every second while it lives, so the module, or the async wrapper with it, is gone);
* deadline: still running ``deadline`` seconds after the first round;
* running: anything else.

Staleness is measured on the controller's clock between rounds (the ``updated`` value of the
progress file is only compared with itself), so a node clock that is off changes nothing.
"""

from __future__ import annotations

import base64
import json

MIB = 1048576.0


def _repo(result):
    """The planned model's repo id, following the loop's item chain (async_status -> start -> model)."""
    item = result
    for _depth in range(6):
        if not isinstance(item, dict):
            return '?'
        if 'repo' in item and isinstance(item['repo'], str):
            return item['repo']
        item = item.get('item')
    return '?'


def _jid(result):
    jid = result.get('ansible_job_id')
    item = result.get('item')
    if not jid and isinstance(item, dict):
        jid = item.get('ansible_job_id')
    return str(jid) if jid else None


def _doc(slurped):
    """The progress document of a slurp result (None when absent or not JSON)."""
    if not isinstance(slurped, dict) or not slurped.get('content'):
        return None
    try:
        doc = json.loads(base64.b64decode(slurped['content']).decode('utf-8'))
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def eta(remaining, rate):
    """Time left for ``remaining`` bytes at ``rate`` bytes/s: ``42s``, ``3m05s``, ``1h02m``; ``unknown`` when the
    rate is 0 or the total is not known yet."""
    if remaining is None or rate <= 0:
        return 'unknown'
    seconds = int(max(remaining, 0) / rate + 0.5)
    if seconds < 60:
        return '%ds' % seconds
    if seconds < 3600:
        return '%dm%02ds' % divmod(seconds, 60)
    hours, rest = divmod(seconds, 3600)
    return '%dh%02dm' % (hours, rest // 60)


def _progress_line(repo, doc):
    """``<repo>: <state>, <done> of <total> MiB (<n>/<m> files), <rate> MiB/s, ETA <eta>``, from the progress file
    hf_download writes (bytes_done, bytes_total, bytes_per_second over its last 5 s); ETA at that rate."""
    doc = doc or {}

    def num(key):
        value = doc.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    total, done, rate = num('bytes_total'), num('bytes_done'), num('bytes_per_second')
    return '%s: %s, %.1f of %.1f MiB (%s/%s files), %.1f MiB/s, ETA %s' % (
        repo, doc.get('state') or 'starting', done / MIB, total / MIB,
        num('files_done'), doc.get('files_total', '?'), rate / MIB, eta(total - done if total else None, rate))


def _dead_result(result):
    """Why a finished job has no result of the module, or None when it has one."""
    if result.get('commit') or result.get('error_kind'):
        return None
    msg = str(result.get('msg') or '')
    if 'could not find job' in msg:
        return 'its async job file is gone (the node rebooted, or ~/.ansible_async was cleared)'
    if 'timeout' in msg.lower() or 'time limit' in msg.lower():
        return ('the async wrapper ended it at specdec_server_download_async_timeout; raise that setting (seconds) '
                'for a slow link')
    return ('the hf_download process died without a result (killed by the OOM killer, a reboot or kill -9?)')


def watch(statuses, progress=None, previous=None, now=None, deadline=86400, stale_after=600, host=''):
    """One round of the download poll; see the module docstring.

    statuses: the async_status results (loop results whose item chain leads to the planned model).
    progress: the slurp results of the progress files (loop over statuses: item is the status).
    previous: the previous round's return value ({} or None on the first round).
    now: controller time in seconds (time.time()). deadline, stale_after: seconds.
    Returns {'started', 'now', 'jobs': {jid: {'repo', 'updated', 'seen'}}, 'running': [repo],
    'done': [repo], 'lines': [progress line], 'errors': [one-line message], 'finished': bool}.
    """
    previous = previous if isinstance(previous, dict) else {}
    now = float(now)
    started = float(previous.get('started') or now)
    before = previous.get('jobs') if isinstance(previous.get('jobs'), dict) else {}
    where = ' on %s' % host if host else ''
    docs = {}
    for slurped in progress or []:
        if isinstance(slurped, dict) and isinstance(slurped.get('item'), dict):
            jid = _jid(slurped['item'])
            if jid:
                docs[jid] = _doc(slurped)

    jobs, running, done, lines, errors = {}, [], [], [], []
    for result in statuses or []:
        if not isinstance(result, dict):
            continue
        jid = _jid(result) or '?'
        repo = _repo(result)
        if result.get('finished'):
            dead = _dead_result(result)
            if dead:
                errors.append('%s%s: the background download (async job %s) ended without a result: %s; re-run the '
                              'playbook (files already downloaded are kept, partial ones resume).'
                              % (repo, where, jid, dead))
            # download_poll.yml registers async_status with failed_when: false, which sets failed to false: the
            # module's error_kind (every hf_download failure sets one) says it failed as well.
            elif result.get('failed') or result.get('error_kind'):
                errors.append('%s%s: %s' % (repo, where, str(result.get('msg') or 'download failed').strip()))
            else:
                done.append(repo)
            continue
        doc = docs.get(jid)
        updated = doc.get('updated') if doc else None
        last = before.get(jid) if isinstance(before.get(jid), dict) else {}
        seen = float(last['seen']) if last.get('seen') is not None and updated == last.get('updated') else now
        jobs[jid] = {'repo': repo, 'updated': updated, 'seen': seen}
        quiet = now - seen
        if quiet > stale_after:
            errors.append('%s%s: the background download (async job %s) shows no sign of life: its progress file has '
                          'not changed for %d s (specdec_server_download_stale_timeout=%d), so hf_download or its async '
                          'wrapper is gone (OOM killer, reboot, kill?); re-run the playbook (files already downloaded are '
                          'kept, partial ones resume), or raise specdec_server_download_stale_timeout (seconds) if the '
                          'node is only slow.' % (repo, where, jid, quiet, stale_after))
        elif now - started > deadline:
            errors.append('%s%s: still downloading after %d s, past specdec_server_download_poll_deadline=%d (%s); '
                          'raise specdec_server_download_poll_deadline (seconds) for a slow link, or check the node\'s '
                          'bandwidth to the Hub; the job goes on in the background until '
                          'specdec_server_download_async_timeout, and a re-run resumes it.'
                          % (repo, where, now - started, deadline, _progress_line(repo, doc).split(': ', 1)[1]))
        else:
            running.append(repo)
        lines.append(_progress_line(repo, doc))
    return {
        'started': started, 'now': now, 'jobs': jobs, 'running': running, 'done': done, 'lines': lines,
        'errors': errors, 'finished': not running,
    }
