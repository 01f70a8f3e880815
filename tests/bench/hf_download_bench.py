# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Benchmark of sparkops.specdec.hf_download (a measurement that prints figures, not a test).

1. Download throughput of the module / throughput of the ``hf download`` CLI on the same repository
   (sparkops-lab/bench-large, 256 MiB), each into a fresh empty cache directory, a few repetitions;
   medians and their ratio (goal >= 0.95).
2. No-op time of the module on the complete 100-file repository sparkops-lab/bench-100 (goal <= 1 s),
   median of several runs.

Each run is a separate Python process (``python <this file> --child ...``) started like Ansible starts a
module on the target: the module runs through ansible-core's AnsiballZ loader
(``ansible.module_utils._internal._ansiballz._loader.run_module``, what the AnsiballZ wrapper calls once
unpacked; without it, ``runpy`` as ``python -m <module> args.json`` does), with its JSON arguments; the CLI
runs through ``huggingface_hub.cli.hf:main``, the entry point of the ``hf`` console script. The timed part is
that call only; the interpreter start-up and the imports are measured and printed separately. The module runs
as the role runs it: default max_workers (8, like the CLI) and a progress_file.

The endpoint is a hub_server.py started here on 127.0.0.1 (free port) and stopped at the end, or --endpoint
(e.g. the lab hub http://192.168.250.5:8080). Every child process refuses connections to any other host.

Usage: python tests/bench/hf_download_bench.py [--endpoint URL] [--reps 5] [--warmup 1] [--noop-runs 5] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODULE_FQN = 'ansible_collections.sparkops.specdec.plugins.modules.hf_download'
MODULE_UTILS_FQN = 'ansible_collections.sparkops.specdec.plugins.module_utils._hf'
LARGE_REPO = 'sparkops-lab/bench-large'
NOOP_REPO = 'sparkops-lab/bench-100'
THROUGHPUT_GOAL = 0.95
NOOP_GOAL = 1.0
MIB = 1024.0 * 1024.0
SCRUBBED_ENV = ('HF_TOKEN', 'HUGGING_FACE_HUB_TOKEN', 'HF_ENDPOINT', 'HF_HUB_OFFLINE', 'HF_HUB_CACHE', 'HF_HOME',
                'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy')


# --------------------------------------------------------------------------- child process (one timed run)


def _shared(name):
    """A helper module of tests/ shared with the unit tests (netguard, labhub)."""
    tests_dir = os.path.join(ROOT, 'tests')
    if tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)
    return __import__(name)


def _guard_network(allowed):
    """Refuse (and record) name resolution and connections to any host but the allowed ones."""
    return _shared('netguard').guard(lambda host: host in allowed, 'hf_download_bench')


def child(kind, spec_path, out_path):
    """Run the module or the CLI once; write the timestamps (epoch s) to out_path."""
    t_start = time.time()
    with open(spec_path) as f:
        spec = json.load(f)
    violations = _guard_network(set(spec['allowed_hosts']))
    record = {'t_start': t_start, 'exit': None, 'violations': violations}
    try:
        if kind == 'module':
            import importlib
            import runpy
            from ansible.module_utils import basic
            importlib.import_module(MODULE_UTILS_FQN)  # huggingface_hub and the module's helpers
            try:
                from ansible.module_utils._internal._ansiballz import _loader
            except ImportError:  # ansible-core < 2.19
                _loader = None
            json_params = json.dumps({'ANSIBLE_MODULE_ARGS': spec['module_args']}).encode('utf-8')
            record['t_imported'] = time.time()
            try:
                if _loader is not None:
                    _loader.run_module(json_params=json_params, profile='legacy', module_fqn=MODULE_FQN,
                                       modlib_path=spec['collections'], extensions={})
                else:
                    basic._ANSIBLE_ARGS = json_params
                    runpy.run_module(MODULE_FQN, run_name='__main__', alter_sys=True)
            except SystemExit as e:
                record['exit'] = e.code
        else:
            from huggingface_hub.cli.hf import main
            record['t_imported'] = time.time()
            sys.argv = ['hf'] + spec['argv']
            try:
                record['exit'] = main()
            except SystemExit as e:
                record['exit'] = e.code
        record['t_end'] = time.time()
    finally:
        sys.stdout.flush()
        with open(out_path, 'w') as f:
            json.dump(record, f)
    return 0


# --------------------------------------------------------------------------- parent helpers


def collections_dir(workdir):
    """A directory D with D/ansible_collections/sparkops/specdec = this collection."""
    root = os.path.realpath(ROOT)
    parts = root.split(os.sep)
    if parts[-3:] == ['ansible_collections', 'sparkops', 'specdec']:
        return os.sep.join(parts[:-3])
    candidates = [os.path.join(ROOT, '.build', 'collections')] + os.environ.get('PYTHONPATH', '').split(os.pathsep)
    for cand in candidates:
        if cand and os.path.realpath(os.path.join(cand, 'ansible_collections', 'sparkops', 'specdec')) == root:
            return os.path.abspath(cand)
    coll = os.path.join(workdir, 'collections')
    os.makedirs(os.path.join(coll, 'ansible_collections', 'sparkops'))
    os.symlink(root, os.path.join(coll, 'ansible_collections', 'sparkops', 'specdec'))
    return coll


def start_hub(workdir):
    return _shared('labhub').start(os.path.join(workdir, 'hub.log'))


def stop_hub(proc):
    _shared('labhub').stop(proc)


def repo_listing(endpoint, repo_id):
    """(number of files, total bytes) from the tree listing. Also makes the hub hash its streamed files now."""
    url = '%s/api/models/%s/tree/main?recursive=true' % (endpoint, repo_id)
    files, total = 0, 0
    while url:
        with urllib.request.urlopen(url, timeout=120) as resp:
            entries = json.loads(resp.read().decode('utf-8'))
            link = resp.headers.get('Link') or ''
        for entry in entries:
            if entry.get('type') == 'file':
                files += 1
                total += int((entry.get('lfs') or {}).get('size') or entry['size'])
        url = link[1:link.index('>')] if 'rel="next"' in link else None
    return files, total


def blobs_bytes(cache_dir, repo_id):
    """Bytes of the complete blobs of repo_id in cache_dir (no *.incomplete)."""
    blobs = os.path.join(cache_dir, 'models--' + repo_id.replace('/', '--'), 'blobs')
    total = 0
    for name in os.listdir(blobs):
        if not name.endswith('.incomplete'):
            total += os.path.getsize(os.path.join(blobs, name))
    return total


class Runner(object):
    def __init__(self, workdir, endpoint, collections):
        self.workdir = workdir
        self.endpoint = endpoint
        self.collections = collections
        self.count = 0
        host = urlsplit(endpoint).hostname
        allowed = {'127.0.0.1', '::1', 'localhost', host}
        try:
            allowed.update(info[4][0] for info in socket.getaddrinfo(host, None))
        except OSError:
            pass
        self.allowed = sorted(allowed)
        env = dict((k, v) for k, v in os.environ.items() if k not in SCRUBBED_ENV)
        env.update(
            HF_HOME=os.path.join(workdir, 'hf_home'),  # no user token, cache or agent registry
            HF_ENDPOINT=endpoint,
            HF_HUB_DISABLE_TELEMETRY='1',
            HF_HUB_DISABLE_UPDATE_CHECK='1',  # the CLI would ask pypi.org
            NO_COLOR='1',
            NO_PROXY=','.join(self.allowed),
            PYTHONPATH=os.pathsep.join([collections] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]),
        )
        self.env = env

    def run(self, kind, **spec):
        self.count += 1
        base = os.path.join(self.workdir, 'run%02d-%s' % (self.count, kind))
        spec.update(allowed_hosts=self.allowed, collections=self.collections)
        with open(base + '.spec.json', 'w') as f:
            json.dump(spec, f)
        started = time.time()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), '--child', kind, base + '.spec.json',
                               base + '.out.json'], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=3600, check=False)
        ended = time.time()
        with open(base + '.stderr', 'w') as f:
            f.write(proc.stderr)
        try:
            with open(base + '.out.json') as f:
                rec = json.load(f)
        except (IOError, OSError, ValueError):
            raise RuntimeError('%s run failed (exit %s): %s' % (kind, proc.returncode, proc.stderr[-2000:]))
        if rec['violations']:
            raise RuntimeError('%s run tried to reach other hosts: %s' % (kind, rec['violations']))
        if 't_end' not in rec or rec['exit'] not in (0, None):
            raise RuntimeError('%s run failed (exit %s): %s %s' % (kind, rec['exit'], proc.stdout[-2000:], proc.stderr[-2000:]))
        return {
            'startup': rec['t_start'] - started,
            'imports': rec['t_imported'] - rec['t_start'],
            'run': rec['t_end'] - rec['t_imported'],
            'wall': ended - started,
            'stdout': proc.stdout,
        }

    def module(self, args):
        args = dict(args, _ansible_module_name='sparkops.specdec.hf_download', _ansible_tmpdir=self.workdir)
        res = self.run('module', module_args=args)
        lines = [line for line in res['stdout'].splitlines() if line.startswith('{')]
        res['result'] = json.loads(lines[-1])
        if res['result'].get('failed'):
            raise RuntimeError('module failed: %s' % res['result'].get('msg'))
        return res

    def cli(self, argv):
        return self.run('cli', argv=argv)


def rate(nbytes, seconds):
    return nbytes / seconds if seconds > 0 else float('nan')


def fmt_rate(value):
    return '%14.0f bytes/s (%8.2f MiB/s)' % (value, value / MIB)


# --------------------------------------------------------------------------- the benchmark


def bench_throughput(runner, reps, warmup):
    files, total = repo_listing(runner.endpoint, LARGE_REPO)
    print('\n1. Download throughput: %s, %d files, %d bytes (%.1f MiB); fresh empty cache dir per run, max_workers 8'
          % (LARGE_REPO, files, total, total / MIB))
    print('   %d untimed warm-up run(s) of each tool, then %d timed runs each, alternating which tool goes first'
          % (warmup, reps))
    print('   %-4s %-7s %10s %40s %12s %12s' % ('run', 'tool', 'timed s', 'throughput', 'start-up s', 'imports s'))
    results = {'module': [], 'cli': []}
    for rep in range(-warmup, reps):
        order = ('module', 'cli') if rep % 2 == 0 else ('cli', 'module')
        for kind in order:
            cache = tempfile.mkdtemp(prefix='cache-%s-' % kind, dir=runner.workdir)
            if kind == 'module':
                res = runner.module(dict(repo_id=LARGE_REPO, cache_dir=cache, endpoint=runner.endpoint,
                                         progress_file=os.path.join(runner.workdir, 'progress.json')))
                if res['result']['bytes_fetched'] != total:
                    raise RuntimeError('module fetched %s bytes, expected %d' % (res['result']['bytes_fetched'], total))
            else:
                res = runner.cli(['download', LARGE_REPO, '--cache-dir', cache, '--max-workers', '8'])
            on_disk = blobs_bytes(cache, LARGE_REPO)
            if on_disk != total:
                raise RuntimeError('%s run left %d bytes in %s, expected %d' % (kind, on_disk, cache, total))
            shutil.rmtree(cache)
            res['rate'] = rate(total, res['run'])
            if rep < 0:
                continue
            results[kind].append(res)
            tool = 'module' if kind == 'module' else 'hf CLI'
            print('   %-4d %-7s %10.3f %40s %12.3f %12.3f'
                  % (rep + 1, tool, res['run'], fmt_rate(res['rate']), res['startup'], res['imports']))
    med = dict((k, statistics.median(r['rate'] for r in v)) for k, v in results.items())
    wall = dict((k, statistics.median(rate(total, r['wall']) for r in v)) for k, v in results.items())
    ratio = med['module'] / med['cli']
    print('   median module : %s' % fmt_rate(med['module']))
    print('   median hf CLI : %s' % fmt_rate(med['cli']))
    print('   ratio module / hf CLI (timed part): %.3f  (goal >= %.2f: %s)'
          % (ratio, THROUGHPUT_GOAL, 'met' if ratio >= THROUGHPUT_GOAL else 'NOT met'))
    print('   for reference, on whole-process wall time (with start-up and imports): module %s, hf CLI %s, ratio %.3f'
          % (fmt_rate(wall['module']).strip(), fmt_rate(wall['cli']).strip(), wall['module'] / wall['cli']))
    return ratio


def bench_noop(runner, runs):
    files, total = repo_listing(runner.endpoint, NOOP_REPO)
    cache = tempfile.mkdtemp(prefix='cache-noop-', dir=runner.workdir)
    args = dict(repo_id=NOOP_REPO, cache_dir=cache, endpoint=runner.endpoint,
                progress_file=os.path.join(runner.workdir, 'progress-noop.json'))
    first = runner.module(args)
    if not first['result']['changed'] or first['result']['files'] != files:
        raise RuntimeError('initial download of %s: unexpected result %s' % (NOOP_REPO, first['result']))
    print('\n2. No-op: %s complete in the cache (%d files, %d bytes), module run %d times (after one untimed download)'
          % (NOOP_REPO, files, total, runs))
    print('   %-4s %12s %12s %12s %12s' % ('run', 'timed s', 'start-up s', 'imports s', 'process s'))
    res = []
    for i in range(runs):
        r = runner.module(args)
        if r['result']['changed'] or r['result']['fetched_files']:
            raise RuntimeError('no-op run %d changed something: %s' % (i + 1, r['result']))
        res.append(r)
        print('   %-4d %12.3f %12.3f %12.3f %12.3f' % (i + 1, r['run'], r['startup'], r['imports'], r['wall']))
    med = statistics.median(r['run'] for r in res)
    print('   median no-op time of the module (timed part, no start-up/imports): %.3f s  (goal <= %.1f s: %s)'
          % (med, NOOP_GOAL, 'met' if med <= NOOP_GOAL else 'NOT met'))
    print('   median Python start-up %.3f s, imports (ansible.module_utils.basic, huggingface_hub, module_utils) %.3f s,'
          ' whole process %.3f s; module-reported seconds (run() only): %.3f s'
          % (statistics.median(r['startup'] for r in res), statistics.median(r['imports'] for r in res),
             statistics.median(r['wall'] for r in res), statistics.median(r['result']['seconds'] for r in res)))
    return med


def describe_machine(endpoint, started_hub):
    import huggingface_hub
    try:
        from ansible.release import __version__ as ansible_version
    except ImportError:
        ansible_version = 'not installed'
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count()
    print('sparkops.specdec hf_download benchmark (%s)' % time.strftime('%Y-%m-%d %H:%M:%S'))
    print('machine : nproc %s (os.cpu_count %s), %s %s, load average %s'
          % (cpus, os.cpu_count(), platform.system(), platform.machine(),
             ' '.join('%.2f' % x for x in os.getloadavg())))
    print('python  : %s (%s)' % (platform.python_version(), sys.executable))
    print('versions: huggingface_hub %s, ansible-core %s' % (huggingface_hub.__version__, ansible_version))
    print('endpoint: %s%s' % (endpoint, ' (hub_server.py started by this script on 127.0.0.1, stopped at the end)'
                              if started_hub else ' (given with --endpoint)'))
    print('method  : one Python process per run. module = ansible-core AnsiballZ loader run_module() on %s'
          % MODULE_FQN)
    print('          with JSON args (ANSIBLE_MODULE_ARGS); hf CLI = huggingface_hub.cli.hf:main() (the `hf` script)')
    print('          with argv `hf download ...`. "timed" = that call only; Python start-up (process start to')
    print('          first line of the child) and imports are measured and printed separately.')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--endpoint', help='Hub URL (default: start hub_server.py on 127.0.0.1)')
    parser.add_argument('--reps', type=int, default=5, help='timed downloads per tool (default 5)')
    parser.add_argument('--warmup', type=int, default=1, help='untimed downloads per tool first (default 1)')
    parser.add_argument('--noop-runs', type=int, default=5, help='no-op runs of the module (default 5)')
    parser.add_argument('--workdir', help='where caches and logs go (default: a new temporary directory)')
    parser.add_argument('--keep', action='store_true', help='keep the work directory')
    parser.add_argument('--child', nargs=3, metavar=('KIND', 'SPEC', 'OUT'), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(*args.child)

    workdir = os.path.abspath(args.workdir) if args.workdir else tempfile.mkdtemp(prefix='hf_download_bench-')
    os.makedirs(workdir, exist_ok=True)
    hub = None
    try:
        endpoint = (args.endpoint or '').rstrip('/')
        if not endpoint:
            hub, endpoint = start_hub(workdir)
        elif not endpoint.startswith(('http://', 'https://')):
            parser.error('--endpoint must be an http(s) URL')
        describe_machine(endpoint, hub is not None)
        runner = Runner(workdir, endpoint, collections_dir(workdir))
        bench_throughput(runner, max(1, args.reps), max(0, args.warmup))
        bench_noop(runner, max(1, args.noop_runs))
    except (RuntimeError, OSError, ValueError) as e:
        sys.stderr.write('hf_download_bench: %s (work directory: %s)\n' % (e, workdir))
        args.keep = True
        return 1
    finally:
        if hub is not None:
            stop_hub(hub)
        if args.keep:
            print('\nwork directory kept: %s' % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
