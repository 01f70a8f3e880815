# -*- coding: utf-8 -*-
# Unit tests for the download poll's verdict (plugin_utils/_hf_watch.py, filter
# sparkops.specdec.hf_download_watch): running, done, failed, dead (no result / progress file that
# stopped changing) and past the deadline, from results shaped as async_status and slurp return them.

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.sparkops.specdec.plugins.filter.downloads import hf_download_watch
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _hf_watch

REPO = 'openai/gpt-oss-120b'
DRAFT = 'nvidia/gpt-oss-120b-Eagle3-long-context'


def status(jid, repo, **kwargs):
    """An async_status loop result: item = the start result, whose item is the planned model."""
    result = {'ansible_job_id': jid, 'started': True, 'finished': False,
              'item': {'ansible_job_id': jid, 'item': {'repo': repo, 'revision': 'main'}}}
    result.update(kwargs)
    return result


def slurped(st, doc):
    out = {'item': st, 'changed': False}
    if doc is not None:
        out['content'] = base64.b64encode(json.dumps(doc).encode()).decode()
    else:
        out.update(failed=True, msg='file not found')
    return out


def doc(updated, state='downloading', done=0, total=1048576 * 10):
    return {'state': state, 'updated': updated, 'bytes_done': done, 'bytes_total': total, 'files_done': 1,
            'files_total': 3, 'bytes_per_second': 1048576}


def rounds(steps, deadline=3600, stale_after=600):
    """Run the verdict over [(now, [(status, doc or None)])]; returns every round's verdict."""
    watch, out = {}, []
    for now, jobs in steps:
        statuses = [s for s, _d in jobs]
        progress = [slurped(s, d) for s, d in jobs if not s.get('finished')]
        watch = _hf_watch.watch(statuses, progress, watch, now=now, deadline=deadline, stale_after=stale_after,
                                host='spark-1')
        out.append(watch)
    return out


def test_running_then_done():
    running = status('1.1', REPO)
    v = rounds([(1000, [(running, doc(5000.0))]), (1030, [(running, doc(5030.0, done=5 * 1048576))]),
                (1060, [(status('1.1', REPO, finished=True, changed=True, commit='a' * 40), None)])])
    assert [r['running'] for r in v] == [[REPO], [REPO], []]
    assert v[0]['lines'] == ['%s: downloading, 0.0 of 10.0 MiB (1/3 files), 1.0 MiB/s, ETA 10s' % REPO]
    assert v[1]['lines'] == ['%s: downloading, 5.0 of 10.0 MiB (1/3 files), 1.0 MiB/s, ETA 5s' % REPO]
    assert v[-1]['done'] == [REPO] and v[-1]['errors'] == [] and v[-1]['finished'] is True


def test_module_failure_is_reported_with_its_message():
    failed = status('1.2', REPO, finished=True, failed=True, error_kind='gated', msg='gated repository: request access')
    v = rounds([(1000, [(failed, None)])])[0]
    assert v['errors'] == ['%s on spark-1: gated repository: request access' % REPO]
    assert v['running'] == []


def test_module_failure_under_failed_when_false_is_still_a_failure():
    # download_poll.yml registers async_status with failed_when: false, which sets the result's failed to false:
    # the module's error_kind is what says the download failed (a lab run reported such a job done).
    failed = status('1.3', DRAFT, finished=True, failed=False, failed_when_result=False, error_kind='not_writable',
                    msg='cannot write to /cache (Permission denied): fix ownership/permissions')
    v = rounds([(1000, [(failed, None)])])[0]
    assert v['errors'] == ['%s on spark-1: cannot write to /cache (Permission denied): fix ownership/permissions' % DRAFT]
    assert v['done'] == [] and v['running'] == []


@pytest.mark.parametrize('result, needle', [
    # The module process was killed: async_wrapper found no JSON on its stdout.
    ({'failed': True, 'msg': 'Expecting value: line 1 column 1 (char 0)', 'data': '', 'stderr': 'Killed'}, 'died'),
    # The job file vanished (reboot, tmp cleaned).
    ({'failed': True, 'msg': 'could not find job'}, 'job file is gone'),
    # The async wrapper's own time limit.
    ({'failed': True, 'msg': 'Timeout exceeded'}, 'specdec_server_download_async_timeout'),
    # Finished without failing, but no result of hf_download.
    ({}, 'died'),
])
def test_finished_without_a_result_is_dead(result, needle):
    dead = status('1.3', REPO, finished=True, **result)
    v = rounds([(1000, [(dead, None)])])[0]
    assert len(v['errors']) == 1 and 'ended without a result' in v['errors'][0] and needle in v['errors'][0]
    assert v['errors'][0].startswith(REPO + ' on spark-1: ')


def test_progress_file_that_stops_changing_is_dead():
    job = status('1.4', REPO)
    steps = [(1000 + 30 * i, [(job, doc(5000.0 + min(i, 3)))]) for i in range(26)]
    v = rounds(steps, stale_after=600)
    dead_rounds = [i for i, r in enumerate(v) if r['errors']]
    # Last change seen at round 3 (t=1090); dead once more than 600 s passed without a change (t=1720, round 24).
    assert dead_rounds[0] == 24
    assert 'no sign of life' in v[24]['errors'][0] and 'specdec_server_download_stale_timeout=600' in v[24]['errors'][0]
    assert v[23]['running'] == [REPO]


def test_missing_progress_file_is_dead_after_the_stale_timeout():
    job = status('1.5', REPO)
    v = rounds([(1000, [(job, None)]), (1400, [(job, None)]), (1601, [(job, None)])], stale_after=600)
    assert [bool(r['errors']) for r in v] == [False, False, True]


def test_old_progress_document_from_an_earlier_run_is_not_a_sign_of_life():
    job = status('1.6', REPO)
    old = doc(10.0, state='done')  # left by yesterday's run; the new module never started
    v = rounds([(1000, [(job, old)]), (1300, [(job, old)]), (1700, [(job, old)])], stale_after=600)
    assert [bool(r['errors']) for r in v] == [False, False, True]


def test_node_clock_does_not_matter():
    # The node's clock is a day behind: only changes of "updated" count, never its value.
    job = status('1.7', REPO)
    v = rounds([(1000 + 30 * i, [(job, doc(-86400.0 + i))]) for i in range(40)], stale_after=600)
    assert not any(r['errors'] for r in v)


def test_deadline_passes_while_still_alive():
    job = status('1.8', REPO)
    v = rounds([(1000 + 60 * i, [(job, doc(5000.0 + i))]) for i in range(10)], deadline=300)
    first = [i for i, r in enumerate(v) if r['errors']][0]
    assert first == 6  # 360 s > 300 s
    assert 'specdec_server_download_poll_deadline=300' in v[first]['errors'][0]
    assert v[first]['running'] == []


def test_two_jobs_one_dead_one_running():
    a, b = status('2.1', REPO), status('2.2', DRAFT, finished=True, failed=True, msg='could not find job')
    v = rounds([(1000, [(a, doc(1.0)), (b, None)])])[0]
    assert v['running'] == [REPO] and len(v['errors']) == 1 and v['errors'][0].startswith(DRAFT)


def test_filter_wraps_the_function():
    job = status('3.1', REPO)
    first = hf_download_watch([job], [slurped(job, doc(1.0))], None, 100, 600, 'spark-2', now=50)
    assert first['started'] == 50 and first['running'] == [REPO]
    later = hf_download_watch([job], [slurped(job, doc(2.0))], first, 100, 600, 'spark-2', now=200)
    assert later['started'] == 50 and 'spark-2' in later['errors'][0]


@pytest.mark.parametrize('remaining, rate, expected', [
    (0, 1, '0s'), (42, 1, '42s'), (185, 1, '3m05s'), (3720, 1, '1h02m'), (20 * 1024 ** 3, 50 * 1048576, '6m50s'),
    (10, 0, 'unknown'), (None, 5, 'unknown'), (-5, 1, '0s'),
])
def test_eta(remaining, rate, expected):
    assert _hf_watch.eta(remaining, rate) == expected


def test_progress_line_before_the_total_is_known():
    """Resolving: no total yet, so no ETA; a missing progress file is a starting line."""
    resolving = {'state': 'resolving', 'updated': 1.0, 'bytes_total': 0, 'bytes_done': 0, 'bytes_per_second': 0,
                 'files_total': 0}
    v = rounds([(1000, [(status('1.1', REPO), resolving)])])
    assert v[0]['lines'] == ['%s: resolving, 0.0 of 0.0 MiB (0/0 files), 0.0 MiB/s, ETA unknown' % REPO]
    v = rounds([(1000, [(status('1.1', REPO), None)])])
    assert v[0]['lines'] == ['%s: starting, 0.0 of 0.0 MiB (0/? files), 0.0 MiB/s, ETA unknown' % REPO]
