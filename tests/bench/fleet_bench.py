# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Fleet wall time ÷ one-pair wall time on the lab (a measurement that prints figures, not a test).

On the five-node lab (``make lab-fleet-up``: inventories/lab/fleet.yml, two pairs and a single Spark), each round
measures, in alternating order (interleaved, so that drift of this noisy machine falls on both):

- one pair: ``playbooks/two_sparks.yml --limit pair_a`` (what an operator runs today, pair by pair);
- the fleet: ``playbooks/fleet.yml`` (pair-a, pair-b and spark-5 at once, each in its own run).

A first fleet run (not counted) fills every node's caches: a fresh ``make lab-fleet-up`` leaves spark-3..5 without
models and images. Each measured run starts from a torn-down fleet (``playbooks/teardown.yml -e confirm=yes``, which keeps the models
and the images, so these are deploys with warm caches: container creation, sshd, fabric checks, server start and
health gate, not downloads); the teardown is not timed. It prints each run's wall-clock seconds, the medians, their
min-max spread, each round's ratio and the ratio of the medians. No figure is compared with a threshold: on this
machine's 2 cores the fleet's three runs share the CPU, so the ratio says how much of a deploy is waiting (which runs
in parallel) rather than how a fleet of Sparks, each with its own CPU, would scale.

A run that fails exits with its stderr tail: figures of failed runs mean nothing. The lab is shared: hold the lab lock
around the whole script (``flock /tmp/sparkops-lab.lock python tests/bench/fleet_bench.py``).

Usage: python tests/bench/fleet_bench.py [--runs 3] [--repo CHECKOUT] [--json-out FILE] [--log-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from converge_bench import ROOT, parse_json_output, repo_env  # noqa: E402  pylint: disable=wrong-import-position

INVENTORY = 'inventories/lab/fleet.yml'
KINDS = {
    'pair': ['playbooks/two_sparks.yml', '--limit', 'pair_a'],
    'fleet': ['playbooks/fleet.yml'],
}
TEARDOWN = ['playbooks/teardown.yml', '-e', 'confirm=yes']
MIN_RUNS = 1


def playbook(repo, env, args, label, log_dir):
    """Run ansible-playbook -i INVENTORY ARGS; returns (seconds, JSON document). Exits on a failed run."""
    cmd = [os.path.join(repo, '.venv', 'bin', 'ansible-playbook'), '-i', INVENTORY] + list(args)
    if args[0] == 'playbooks/fleet.yml' and log_dir:
        cmd += ['-e', 'fleet_log_dir=%s' % os.path.join(log_dir, label + '-runs'),
                '-e', 'fleet_report_path=%s' % os.path.join(log_dir, label + '-fleet.json')]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - t0
    if log_dir:
        with open(os.path.join(log_dir, label + '.json'), 'w', encoding='utf-8') as f:
            f.write(proc.stdout)
        with open(os.path.join(log_dir, label + '.stderr'), 'w', encoding='utf-8') as f:
            f.write(proc.stderr)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:] + '\n' + proc.stdout[-2000:] + '\n')
        sys.exit('%s: ansible-playbook %s exited %d (figures of a failed run would mean nothing)'
                 % (label, ' '.join(args), proc.returncode))
    return seconds, parse_json_output(proc.stdout)


def order(round_no):
    """Alternate which kind runs first in a round (interleaving)."""
    return ['pair', 'fleet'] if round_no % 2 else ['fleet', 'pair']


def summary(seconds):
    """{'pair': [...], 'fleet': [...]} -> medians, spreads and the ratio of the medians."""
    out = {}
    for kind, values in seconds.items():
        out[kind] = {'seconds': [round(v, 1) for v in values], 'median': round(statistics.median(values), 1),
                     'min': round(min(values), 1), 'max': round(max(values), 1)}
    out['ratio_of_medians'] = round(out['fleet']['median'] / out['pair']['median'], 2)
    out['ratio_per_round'] = [round(f / p, 2) for f, p in zip(seconds['fleet'], seconds['pair'])]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--runs', type=int, default=3, help='rounds, each one pair run and one fleet run (default 3)')
    parser.add_argument('--repo', default=ROOT, help='checkout to run from (default: %(default)s)')
    parser.add_argument('--json-out', metavar='FILE', help='also write the figures as JSON to FILE')
    parser.add_argument('--log-dir', metavar='DIR', help="keep each run's JSON output and stderr in DIR")
    args = parser.parse_args(argv)
    if args.runs < MIN_RUNS:
        parser.error('--runs must be at least %d' % MIN_RUNS)
    repo = os.path.abspath(args.repo)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    env = repo_env(repo)
    print('fleet_bench: -i %s: %s vs %s, %d round(s), from %s'
          % (INVENTORY, ' '.join(KINDS['pair']), ' '.join(KINDS['fleet']), args.runs, repo))
    print('  host: %s, %d CPUs, Python %s' % (platform.node(), os.cpu_count() or 0, platform.python_version()))
    warm_s, _doc = playbook(repo, env, KINDS['fleet'], 'warmup-fleet', args.log_dir)
    print('warm-up fleet run (not counted, fills the caches): %.1f s' % warm_s)
    seconds = {'pair': [], 'fleet': []}
    for i in range(1, args.runs + 1):
        for kind in order(i):
            playbook(repo, env, TEARDOWN, 'round%d-%s-teardown' % (i, kind), args.log_dir)
            s, doc = playbook(repo, env, KINDS[kind], 'round%d-%s' % (i, kind), args.log_dir)
            seconds[kind].append(s)
            changed = {h: v.get('changed', 0) for h, v in doc.get('stats', {}).items()}
            print('round %d %-5s %7.1f s  changed %s' % (i, kind, s, changed))
    figures = summary(seconds)
    print()
    for kind in ('pair', 'fleet'):
        f = figures[kind]
        print('%-5s median %.1f s  spread (min-max) %.1f-%.1f s  runs %s' % (kind, f['median'], f['min'], f['max'], f['seconds']))
    print('fleet / one pair: %.2f (ratio of medians); per round %s' % (figures['ratio_of_medians'], figures['ratio_per_round']))
    if args.runs < 3:
        print('note: fewer than 3 rounds: the spread says little')
    if args.json_out:
        with open(args.json_out, 'w', encoding='utf-8') as f:
            json.dump(dict(figures, repo=repo, rounds=args.runs), f, indent=2)
            f.write('\n')
        print('figures written to %s' % args.json_out)
    return 0


if __name__ == '__main__':
    sys.exit(main())
