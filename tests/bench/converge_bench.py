# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Warm no-op converge time of playbooks/two_sparks.yml on the lab (a measurement that prints figures, not a test).

On a lab that two_sparks.yml has already converged (``make demo``), runs
``ansible-playbook -i inventories/lab/hosts.yml playbooks/two_sparks.yml`` once as an uncounted warm-up, then
--runs times (default 5, at least 3), each with the ansible.posix.json stdout callback, and prints:

- the wall-clock seconds of each counted run, their median and their min-max spread;
- per host, from the JSON: executed task results (results that are not skipped) and skipped task results;
- per host, the changed count of each counted run (from the JSON stats). A warm run must change nothing: a
  non-zero count is printed with a WARNING and the script exits 1 (after printing every figure).

Then (unless --sparse-gb 0) the models' no-op on a Spark-sized model: sparse_repo.py lays a generated repo of
sparse files (--sparse-gb GB, no data block written) out in both nodes' huggingface_hub cache, registered as complete
the way hf_download registers a download (blobs, snapshot links, the ref and hf_download's own listing manifest), and
sparse_noop.yml runs the calls the pair's warm run makes for a model (the head's look and list, the worker's look
against that list) --runs times on it and on the lab's target model, interleaved. It prints the seconds of those
calls (the three tasks' wall time, from the JSON callback) for both, and the files whose access time moved (read)
with their bytes: a no-op that read the weights would move theirs; the 4 KiB config.json is not an LFS file, so the
head hashes it for its list (the Hub records no sha256 for it). A control file shows the file system keeps access
times.

No figure is compared with a threshold. The playbook runs the way the Makefile runs it: the checkout's
.venv/bin/ansible-playbook, ANSIBLE_CONFIG=<repo>/ansible.cfg, PYTHONPATH=<repo>/.build/collections (where
``make link`` links the checkout as sparkops.specdec), <repo>/.venv/bin first on PATH, cwd <repo>.

The lab is shared: callers that coordinate through a lock hold it around the whole script
(e.g. ``flock /tmp/sparkops-lab.lock python tests/bench/converge_bench.py``).

Usage: python tests/bench/converge_bench.py [--runs 5] [--repo CHECKOUT] [--json-out FILE] [--sparse-gb 100]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import hashlib
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INVENTORY = 'inventories/lab/hosts.yml'
PLAYBOOK = 'playbooks/two_sparks.yml'
MIN_RUNS = 3
SPARSE_PLAYBOOK = os.path.join(HERE, 'sparse_noop.yml')
SPARSE_REPO = 'sparkops-lab/sparse-spark-model'
SPARSE_SHARDS = 20
# The lab's target model (the default preset of two_sparks.yml), the small repo the sparse one is compared with.
LAB_TARGET = 'nvidia/Qwen3-235B-A22B-FP4'


def repo_env(repo):
    """The environment the Makefile gives ansible-playbook, for the checkout at repo."""
    env = dict(os.environ)
    env['ANSIBLE_CONFIG'] = os.path.join(repo, 'ansible.cfg')
    env['PYTHONPATH'] = os.path.join(repo, '.build', 'collections')
    env['PATH'] = os.path.join(repo, '.venv', 'bin') + os.pathsep + env.get('PATH', '')
    env['ANSIBLE_STDOUT_CALLBACK'] = 'ansible.posix.json'
    env['ANSIBLE_NOCOLOR'] = '1'
    env.pop('ANSIBLE_CALLBACKS_ENABLED', None)  # no other callback writing to stdout
    env.pop('ANSIBLE_CALLBACK_WHITELIST', None)
    return env


def check_repo(repo):
    """Explain what is missing instead of failing inside ansible-playbook."""
    problems = []
    binary = os.path.join(repo, '.venv', 'bin', 'ansible-playbook')
    if not os.access(binary, os.X_OK):
        problems.append('%s is missing (make venv)' % binary)
    link = os.path.join(repo, '.build', 'collections', 'ansible_collections', 'sparkops', 'specdec')
    if not os.path.isdir(link) or os.path.realpath(link) != os.path.realpath(repo):
        problems.append('%s does not link to %s (make link)' % (link, repo))
    for rel in (INVENTORY, PLAYBOOK, 'ansible.cfg'):
        if not os.path.isfile(os.path.join(repo, rel)):
            problems.append('%s is missing' % os.path.join(repo, rel))
    if not os.path.isdir(os.path.join(repo, '.lab')):
        problems.append('%s is missing: no converged lab (make lab-up, then make demo)' % os.path.join(repo, '.lab'))
    return problems


def parse_json_output(stdout):
    """The ansible.posix.json document (anything printed before its first '{' is ignored)."""
    start = stdout.find('{')
    if start < 0:
        raise ValueError('no JSON document in the output of ansible-playbook')
    return json.JSONDecoder().raw_decode(stdout[start:])[0]


def count_results(doc):
    """Per host: executed (not skipped), skipped and failed task results, and the recap stats."""
    executed = collections.Counter()
    skipped = collections.Counter()
    failed = collections.Counter()
    changed_tasks = collections.defaultdict(list)
    for play in doc.get('plays', []):
        for task in play.get('tasks', []):
            name = task.get('task', {}).get('name', '?')
            for host, result in task.get('hosts', {}).items():
                if result.get('skipped'):
                    skipped[host] += 1
                    continue
                executed[host] += 1
                if result.get('failed') or result.get('unreachable'):
                    failed[host] += 1
                if result.get('changed'):
                    changed_tasks[host].append(name)
    stats = doc.get('stats', {})
    hosts = sorted(set(executed) | set(skipped) | set(stats))
    return {
        host: {
            'executed': executed[host],
            'skipped': skipped[host],
            'failed': failed[host],
            'changed': int(stats.get(host, {}).get('changed', 0)),
            'changed_tasks': changed_tasks[host],
            'stats': stats.get(host, {}),
        }
        for host in hosts
    }


def run_once(repo, env, label, log_dir):
    """One ansible-playbook run; returns (seconds, per-host counts). Exits on a failed run."""
    cmd = [os.path.join(repo, '.venv', 'bin', 'ansible-playbook'), '-i', INVENTORY, PLAYBOOK]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - t0
    if log_dir:
        with open(os.path.join(log_dir, 'converge_bench_%s.json' % label), 'w') as f:
            f.write(proc.stdout)
        with open(os.path.join(log_dir, 'converge_bench_%s.stderr' % label), 'w') as f:
            f.write(proc.stderr)
    try:
        per_host = count_results(parse_json_output(proc.stdout))
    except ValueError as exc:
        sys.stderr.write(proc.stderr[-4000:] + '\n' + proc.stdout[-4000:] + '\n')
        sys.exit('run %s: %s (rc=%d)' % (label, exc, proc.returncode))
    if proc.returncode != 0:
        for host, c in per_host.items():
            if c['failed'] or c['stats'].get('unreachable'):
                sys.stderr.write('%s: %s\n' % (host, c['stats']))
        sys.stderr.write(proc.stderr[-4000:] + '\n')
        sys.exit('run %s: ansible-playbook exited %d: the lab is not in a state two_sparks.yml converges '
                 '(figures of a failed run would mean nothing)' % (label, proc.returncode))
    return seconds, per_host


def sparse_layout(repo, gigabytes):
    """The argument of sparse_repo.py: SPARSE_SHARDS LFS shards of gigabytes GB in all (sha256 etags, as the Hub
    gives LFS files) and a small config.json (a git blob id), with the listing manifest hf_download's own
    write_listing makes (the collection's module_utils/_hf.py of the checkout at repo)."""
    sys.path.insert(0, os.path.join(repo, '.build', 'collections'))
    try:
        hf = importlib.import_module('ansible_collections.sparkops.specdec.plugins.module_utils._hf')
    finally:
        sys.path.pop(0)
    total = int(gigabytes * 10 ** 9)
    size = total // SPARSE_SHARDS
    files = []
    for i in range(SPARSE_SHARDS):
        name = 'model-%05d-of-%05d.safetensors' % (i + 1, SPARSE_SHARDS)
        last = total - size * (SPARSE_SHARDS - 1)
        files.append(hf.RemoteFile(name, last if i == SPARSE_SHARDS - 1 else size,
                                   hashlib.sha256(('%s/%s' % (SPARSE_REPO, name)).encode()).hexdigest()))
    config_size = 4096  # zeros, as the sparse file holds them: its git blob id
    files.append(hf.RemoteFile('config.json', config_size,
                               hashlib.sha1(b'blob %d\0' % config_size + b'\0' * config_size).hexdigest()))
    commit = hashlib.sha1(('%s %d' % (SPARSE_REPO, total)).encode()).hexdigest()
    with tempfile.TemporaryDirectory() as tmp:
        target = hf.Target(SPARSE_REPO, 'model', cache_dir=tmp)
        target.write_listing(commit, files, 'generated by tests/bench/sparse_repo.py', 'main')
        manifest_path = os.path.relpath(target._manifest_path(commit), target.storage_folder)  # pylint: disable=protected-access
        with open(target._manifest_path(commit)) as f:  # pylint: disable=protected-access
            manifest = f.read()
        storage = os.path.join('~/.cache/huggingface/hub', os.path.relpath(target.storage_folder, tmp))
    return {
        'storage': storage, 'commit': commit, 'revision': 'main', 'ref_path': 'refs/main',
        'manifest_path': manifest_path, 'manifest': manifest,
        'files': [{'path': f.path, 'size': f.size, 'etag': f.etag} for f in files],
        'control': '.sparkops-bench-atime-control',
    }


def run_sparse(repo, env, repo_id, layout, extra, label, log_dir):
    """One run of sparse_noop.yml; returns (seconds of the three no-op tasks, the JSON document)."""
    cmd = [os.path.join(repo, '.venv', 'bin', 'ansible-playbook'), '-i', INVENTORY, SPARSE_PLAYBOOK,
           '-e', json.dumps(dict({'sparse_repo_id': repo_id, 'sparse_revision': 'main',
                                  'sparse_layout': json.dumps(layout)}, **extra))]
    proc = subprocess.run(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if log_dir:
        with open(os.path.join(log_dir, 'sparse_noop_%s.json' % label), 'w') as f:
            f.write(proc.stdout)
    try:
        doc = parse_json_output(proc.stdout)
    except ValueError as exc:
        sys.stderr.write(proc.stderr[-4000:] + '\n' + proc.stdout[-4000:] + '\n')
        sys.exit('sparse run %s: %s (rc=%d)' % (label, exc, proc.returncode))
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-6000:] + '\n' + proc.stderr[-2000:] + '\n')
        sys.exit('sparse run %s: ansible-playbook exited %d' % (label, proc.returncode))
    seconds = 0.0
    for task in doc['plays'][1]['tasks'][:3]:
        d = task['task']['duration']
        seconds += iso_seconds(d['end']) - iso_seconds(d['start'])
    return seconds, doc


def host_json(play):
    """host -> the JSON line sparse_repo.py printed in that play's task."""
    return {h: json.loads(r['stdout']) for t in play['tasks'] for h, r in t['hosts'].items()
            if str(r.get('stdout', '')).strip()}


def iso_seconds(stamp):
    """Seconds of the JSON callback's ISO time stamp (…Z)."""
    return datetime.datetime.strptime(stamp.rstrip('Z'), '%Y-%m-%dT%H:%M:%S.%f').timestamp()


def sparse_case(repo, env, gigabytes, runs, log_dir):
    """The models' no-op on a generated gigabytes-GB sparse repo and on the lab's target model, interleaved."""
    layout = sparse_layout(repo, gigabytes)
    print()
    print('models\' no-op (sparse_noop.yml: head look + list, worker look) on %s, %d GB in %d sparse files, and on %s'
          % (SPARSE_REPO, gigabytes, len(layout['files']), LAB_TARGET))
    doc = run_sparse(repo, env, SPARSE_REPO, layout, {'sparse_setup': True}, 'setup', log_dir)[1]
    laid = host_json(doc['plays'][0])
    print('  laid out on %d node(s): %s bytes each, %s data blocks' % (
        len(laid), sorted({x['bytes'] for x in laid.values()}), sorted({x['blocks'] for x in laid.values()})))
    small, big = [], []
    for i in range(1, runs + 1):
        small.append(run_sparse(repo, env, LAB_TARGET, layout, {}, 'small%d' % i, log_dir)[0])
        big.append(run_sparse(repo, env, SPARSE_REPO, layout, {}, 'sparse%d' % i, log_dir)[0])
        print('  run %d: %s %.2f s   %s %.2f s' % (i, LAB_TARGET, small[-1], SPARSE_REPO, big[-1]))
    doc = run_sparse(repo, env, SPARSE_REPO, layout, {'sparse_atimes': True}, 'atimes', log_dir)[1]
    after = host_json(doc['plays'][2])
    by_etag = {f['etag']: f for f in layout['files']}
    moved = {h: sorted(by_etag[e]['path'] for e, t in a['atimes'].items()
                       if laid.get(h, {}).get('atimes', {}).get(e) != t)
             for h, a in after.items()}
    bytes_read = {h: sum(f['size'] for f in layout['files'] if f['path'] in v) for h, v in moved.items()}
    tracked = {h: a['control_read_moves_atime'] for h, a in after.items()}
    print('  median: %s %.2f s (%.2f-%.2f), %s %.2f s (%.2f-%.2f)' % (
        LAB_TARGET, statistics.median(small), min(small), max(small),
        SPARSE_REPO, statistics.median(big), min(big), max(big)))
    print('  files whose access time moved during the runs (read): %s, at most %s bytes a node (the file system keeps '
          'access times: %s)' % (moved, bytes_read, tracked))
    return {
        'sparse_repo': SPARSE_REPO, 'gigabytes': gigabytes, 'files': len(layout['files']),
        'data_blocks': sorted({x['blocks'] for x in laid.values()}),
        'small_repo': LAB_TARGET, 'small_seconds': [round(x, 3) for x in small],
        'sparse_seconds': [round(x, 3) for x in big],
        'small_median': round(statistics.median(small), 3), 'sparse_median': round(statistics.median(big), 3),
        'files_read': moved, 'bytes_read_at_most': bytes_read, 'atime_tracked': tracked,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--runs', type=int, default=5, help='counted runs (>= %d; default 5), after 1 warm-up' % MIN_RUNS)
    parser.add_argument('--repo', default=ROOT, help='checkout to run from (default: the one holding this script, %(default)s)')
    parser.add_argument('--json-out', metavar='FILE', help='also write the figures as JSON to FILE')
    parser.add_argument('--log-dir', metavar='DIR', help='keep each run\'s JSON output and stderr in DIR')
    parser.add_argument('--sparse-gb', type=float, default=100,
                        help='size of the generated sparse model of the models\' no-op case (default 100; 0: skip it)')
    args = parser.parse_args(argv)
    if args.runs < MIN_RUNS:
        parser.error('--runs must be at least %d' % MIN_RUNS)
    repo = os.path.abspath(args.repo)
    problems = check_repo(repo)
    if problems:
        sys.exit('cannot run from %s:\n  %s' % (repo, '\n  '.join(problems)))
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    env = repo_env(repo)

    print('converge_bench: %s -i %s %s, from %s' % ('ansible-playbook', INVENTORY, PLAYBOOK, repo))
    print('  host: %s, %d CPUs, Python %s' % (platform.node(), os.cpu_count() or 0, platform.python_version()))
    warm_s, warm = run_once(repo, env, 'warmup', args.log_dir)
    warm_changed = {h: c['changed'] for h, c in warm.items()}
    print('warm-up (not counted): %.2f s, changed %s' % (warm_s, warm_changed))
    if any(warm_changed.values()):
        print('  note: the warm-up changed something: the lab was not converged before this script started')

    seconds = []
    runs = []
    for i in range(1, args.runs + 1):
        s, per_host = run_once(repo, env, 'run%d' % i, args.log_dir)
        seconds.append(s)
        runs.append(per_host)
        changed = {h: c['changed'] for h, c in per_host.items()}
        print('run %d: %.2f s  changed %s' % (i, s, changed))

    median = statistics.median(seconds)
    print()
    print('wall-clock s per run: %s' % ', '.join('%.2f' % s for s in seconds))
    print('median: %.2f s   spread (min-max): %.2f-%.2f s (%.2f s)' % (median, min(seconds), max(seconds), max(seconds) - min(seconds)))

    hosts = sorted(set().union(*runs))
    per_host = {}
    print()
    print('%-12s %10s %9s %s' % ('host', 'executed', 'skipped', 'changed per run'))
    for host in hosts:
        executed = sorted({r.get(host, {}).get('executed', 0) for r in runs})
        skipped = sorted({r.get(host, {}).get('skipped', 0) for r in runs})
        changed = [r.get(host, {}).get('changed', 0) for r in runs]
        per_host[host] = {
            'executed': executed[0] if len(executed) == 1 else executed,
            'skipped': skipped[0] if len(skipped) == 1 else skipped,
            'changed_per_run': changed,
        }
        print('%-12s %10s %9s %s' % (host, '/'.join(map(str, executed)), '/'.join(map(str, skipped)), changed))
    print('(executed = task results of the host that were not skipped; a/b = differed between runs)')

    not_idempotent = {h: v['changed_per_run'] for h, v in per_host.items() if any(v['changed_per_run'])}
    if not_idempotent:
        print()
        print('WARNING: a warm run changed something (must be 0 on a converged lab): %s' % not_idempotent)
        for i, r in enumerate(runs, 1):
            for host in hosts:
                for name in r.get(host, {}).get('changed_tasks', []):
                    print('WARNING:   run %d %s changed: %s' % (i, host, name))

    figures = {
        'repo': repo,
        'command': ['ansible-playbook', '-i', INVENTORY, PLAYBOOK],
        'runs': args.runs,
        'warmup_seconds': round(warm_s, 3),
        'seconds': [round(s, 3) for s in seconds],
        'median_seconds': round(median, 3),
        'min_seconds': round(min(seconds), 3),
        'max_seconds': round(max(seconds), 3),
        'hosts': per_host,
        'idempotent': not not_idempotent,
    }
    if args.sparse_gb > 0:
        figures['sparse'] = sparse_case(repo, env, args.sparse_gb, args.runs, args.log_dir)
    if args.json_out:
        with open(args.json_out, 'w') as f:
            json.dump(figures, f, indent=2)
            f.write('\n')
        print('figures written to %s' % args.json_out)
    return 1 if not_idempotent else 0


if __name__ == '__main__':
    sys.exit(main())
