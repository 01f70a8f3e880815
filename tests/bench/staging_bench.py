# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Staging ratio of "fetch once per pair" (a measurement that prints figures, not a test).

Two simulated nodes (two empty cache directories on this machine) get the same model
(sparkops-lab/bench-large, 256 MiB, 10 files) from a hub_server.py on 127.0.0.1 behind ONE shared, throttled
uplink (a TCP proxy started here: every byte the hub sends, on every connection, passes one token bucket of
--uplink-mib-s MiB/s), the way the two Sparks of a pair share a site's internet link.

* both: the two nodes download concurrently through the uplink (hf_download's code, module_utils/_hf.run, one
  process per node) - what a pair did before.
* pair: the head downloads alone through the uplink, then the worker copies the model from the head with
  hf_peer_copy's code (module_utils/_peer_copy: sender_manifest + receive, each file hashed and verified) through
  SshTransport with a stand-in ``ssh`` that runs the remote ``cat`` locally: the "fabric" is this machine's disk and
  pipes, not a QSFP link (its measured rate is printed).

Prints the medians of --reps runs of each and ratio = pair / both (the issue's goal: <= 0.6). With an uplink of U
and a fabric copy of F bytes/s the model is ratio = (S/U + S/F) / (2 S/U) = 0.5 + U / (2 F): it nears 0.5 as the
fabric gets faster than the uplink, and reaches 1 when the fabric is no faster than the uplink.

Usage: python tests/bench/staging_bench.py [--uplink-mib-s 64] [--reps 3] [--repo sparkops-lab/bench-large]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_download_bench as hfb  # noqa: E402  (collections_dir, start_hub, stop_hub, repo_listing)

MIB = 1024.0 * 1024.0
CHUNK = 64 * 1024


class SharedUplink:
    """A TCP proxy on 127.0.0.1 to the hub; the hub-to-client bytes of all connections share one token bucket."""

    def __init__(self, target_host, target_port, bytes_per_second):
        self.target = (target_host, target_port)
        self.rate = float(bytes_per_second)
        self.lock = threading.Lock()
        self.next_free = 0.0
        self.sent = 0
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(('127.0.0.1', 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _wait_for_link(self, nbytes):
        """The link carries one chunk at a time, at the rate: reserve nbytes of link time, sleep until it is done."""
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_free)
            self.next_free = start + nbytes / self.rate
            done = self.next_free
            self.sent += nbytes
        delay = done - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def _accept(self):
        while not self.closed:
            try:
                client, _addr = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, src, dst, throttled):
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                if throttled:
                    self._wait_for_link(len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.closed = True
        self.server.close()


def child_download(args):
    """One node's download (module_utils/_hf.run, as hf_download runs it)."""
    violations = hfb._guard_network({'127.0.0.1', 'localhost'})  # pylint: disable=protected-access  # the bench's own guard
    from ansible_collections.sparkops.specdec.plugins.module_utils import _hf
    started = time.time()
    res = _hf.run({'repo_id': args.repo, 'revision': 'main', 'cache_dir': args.cache, 'endpoint': args.endpoint,
                   'max_workers': 8, 'timeout': 120})
    print(json.dumps({'seconds': time.time() - started, 'bytes_fetched': res['bytes_fetched'], 'commit': res['commit']}))
    return 1 if violations else 0


def child_copy(args):
    """The worker's copy from the head's cache (module_utils/_peer_copy, as hf_peer_copy runs it)."""
    from ansible_collections.sparkops.specdec.plugins.module_utils import _hf, _peer_copy
    head = _hf.Target(args.repo, 'model', cache_dir=args.source_cache)
    manifest = _peer_copy.sender_manifest(head, args.repo, args.commit)
    transport = _peer_copy.SshTransport('fabric-standin', ssh=args.ssh)
    worker = _hf.Target(args.repo, 'model', cache_dir=args.cache)
    started = time.time()
    res = _peer_copy.receive(worker, args.repo, 'main', manifest, transport, 'head', max_workers=8)
    print(json.dumps({'seconds': time.time() - started, 'bytes_copied': res['bytes_copied'], 'files': res['files']}))
    return 0


def _child(cmd, collections):
    env = dict(os.environ, PYTHONPATH=collections)
    for name in hfb.SCRUBBED_ENV:
        env.pop(name, None)
    return subprocess.Popen([sys.executable, os.path.abspath(__file__)] + cmd, env=env, stdout=subprocess.PIPE,
                            universal_newlines=True)


def _result(proc):
    out, _err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError('child failed (rc %d): %s' % (proc.returncode, out))
    return json.loads(out.strip().splitlines()[-1])


def one_round(workdir, endpoint, repo, collections, ssh):
    a, b = os.path.join(workdir, 'a'), os.path.join(workdir, 'b')
    for d in (a, b):
        shutil.rmtree(d, ignore_errors=True)
    started = time.monotonic()
    procs = [_child(['--child', 'download', '--repo', repo, '--cache', d, '--endpoint', endpoint], collections)
             for d in (a, b)]
    both = [_result(p) for p in procs]
    t_both = time.monotonic() - started
    for d in (a, b):
        shutil.rmtree(d, ignore_errors=True)
    started = time.monotonic()
    head = _result(_child(['--child', 'download', '--repo', repo, '--cache', a, '--endpoint', endpoint], collections))
    t_head = time.monotonic() - started
    copy = _result(_child(['--child', 'copy', '--repo', repo, '--cache', b, '--source-cache', a,
                           '--commit', head['commit'], '--ssh', ssh], collections))
    t_pair = time.monotonic() - started
    assert sum(x['bytes_fetched'] for x in both) > 0 and head['bytes_fetched'] > 0 and copy['bytes_copied'] > 0
    return {'both': t_both, 'head': t_head, 'copy': copy['seconds'], 'pair': t_pair,
            'bytes': head['bytes_fetched'], 'copied': copy['bytes_copied']}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--uplink-mib-s', type=float, default=64.0)
    parser.add_argument('--reps', type=int, default=3)
    parser.add_argument('--repo', default=hfb.LARGE_REPO)
    parser.add_argument('--child', choices=['download', 'copy'])
    parser.add_argument('--cache')
    parser.add_argument('--source-cache')
    parser.add_argument('--endpoint')
    parser.add_argument('--commit')
    parser.add_argument('--ssh')
    args = parser.parse_args(argv)
    if args.child == 'download':
        return child_download(args)
    if args.child == 'copy':
        return child_copy(args)
    workdir = tempfile.mkdtemp(prefix='staging-bench-')
    hub = None
    uplink = None
    try:
        collections = hfb.collections_dir(workdir)
        hub, hub_url = hfb.start_hub(workdir)
        port = int(hub_url.rsplit(':', 1)[1].split('/')[0])
        files, total = hfb.repo_listing(hub_url, args.repo)
        uplink = SharedUplink('127.0.0.1', port, args.uplink_mib_s * MIB)
        endpoint = 'http://127.0.0.1:%d' % uplink.port
        ssh = os.path.join(workdir, 'ssh')
        with open(ssh, 'w') as f:  # the stand-in: runs the remote command (its last argument) here
            f.write('#!/bin/sh\nfor last; do :; done\nexec sh -c "$last"\n')
        os.chmod(ssh, 0o755)
        rounds = [one_round(workdir, endpoint, args.repo, collections, ssh) for _round in range(args.reps)]
        med = dict((k, statistics.median(r[k] for r in rounds)) for k in ('both', 'head', 'copy', 'pair'))
        ratio = med['pair'] / med['both']
        fabric = total / med['copy'] / MIB
        print('repo %s: %d files, %.1f MiB; shared uplink %.1f MiB/s (token bucket over all connections); %d rounds'
              % (args.repo, files, total / MIB, args.uplink_mib_s, args.reps))
        for i, r in enumerate(rounds, 1):
            print('  round %d: both nodes concurrently %.2f s; pair: head %.2f s + copy %.2f s = %.2f s'
                  % (i, r['both'], r['head'], r['copy'], r['pair']))
        print('median: both %.2f s, pair %.2f s (head download %.2f s, copy to the worker %.2f s = %.0f MiB/s incl. '
              'sha256 on both ends)' % (med['both'], med['pair'], med['head'], med['copy'], fabric))
        print('staging ratio (pair / both) = %.3f (goal <= 0.6); model 0.5 + U/(2F) with the measured F: %.3f'
              % (ratio, 0.5 + args.uplink_mib_s / (2 * fabric)))
        return 0
    finally:
        if uplink:
            uplink.close()
        if hub:
            hfb.stop_hub(hub)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
