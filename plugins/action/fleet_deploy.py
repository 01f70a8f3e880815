# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of sparkops.specdec.fleet_deploy: controller-side; the deployments' own runs contact the hosts.

It cuts the inventory into deployments (plugin_utils/_fleet.py), runs each deployment's playbook
(two_sparks.yml for a pair, spark_cluster.yml for three or four Sparks, single_spark.yml for a single Spark) as its own ansible-playbook process,
several at once, and reports which deployments serve and which do not. The documentation is in
plugins/modules/fleet_deploy.py.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

from ansible import context
from ansible.errors import AnsibleError
from ansible.parsing.splitter import parse_kv
from ansible.plugins.action import ActionBase

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _fleet, _settings
from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _files, _inventory, _reports

_ARGS = frozenset(("hosts", "deployments", "parallel", "max_failures", "log_dir", "report_path", "ansible_playbook",
                   "report_dir"))
_PLAYBOOK_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "playbooks"))
# The deployments' runs print the json stdout callback (their outcome is read from it, not from their prose).
# ANSIBLE_SHOW_CUSTOM_STATS: the callback prints the runs' set_stats (specdec_deploy) only with it.
_CHILD_ENV = {"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_SHOW_CUSTOM_STATS": "1", "ANSIBLE_NOCOLOR": "1",
              "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_RETRY_FILES_ENABLED": "0"}


def _ansible_playbook(given):
    """The ansible-playbook to run: the option, else the one running this play, else the one on PATH."""
    if given:
        return given
    here = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0] or "")), "ansible-playbook")
    if os.path.basename(sys.argv[0] or "") == "ansible-playbook" and os.access(here, os.X_OK):
        return here
    return shutil.which("ansible-playbook") or "ansible-playbook"


def _vars_text(item):
    """The text of a vars file that holds what an inline --extra-vars value holds: YAML or JSON text as given (the
    child loads it as ansible-playbook loads that text), key=value pairs as JSON strings (what parse_kv makes of them)."""
    if item[:1] in ("{", "["):
        return item
    return json.dumps({str(k): str(v) for k, v in parse_kv(item).items()}, sort_keys=True) + "\n"


def _log_paths(dep, log_dir):
    """The run's JSON output and stderr files of ``dep`` in ``log_dir``; ValueError (one line) for a file that would
    be outside it (whatever the id holds, the files are named by it as a plain file name)."""
    name = _fleet.log_name(dep["id"])
    paths = (os.path.join(log_dir, "%s.json" % name), os.path.join(log_dir, "%s.stderr" % name))
    for path in paths:
        if os.path.dirname(os.path.realpath(path)) != os.path.realpath(log_dir):
            raise ValueError("fleet_log_dir: the log file of deployment %s would be outside %s; give the deployment a "
                             "plain file name as its specdec_deployment_id." % (dep["id"], log_dir))
    return paths


def _log_problems(dep, log_dir, report_path):
    """The problems of ``dep``'s log files, found before any run (one line each): outside the directory, the report
    itself, or a file there that cannot be replaced (a directory, a symbolic link, not writable)."""
    try:
        paths = _log_paths(dep, log_dir)
    except ValueError as exc:
        return [str(exc)]
    problems = []
    for path in paths:
        replaceable = os.path.isfile(path) and os.access(path, os.W_OK)
        if os.path.realpath(path) == os.path.realpath(report_path):
            problems.append("fleet_log_dir: the log file of deployment %s is %s, the report (fleet_report_path); set "
                            "another fleet_log_dir or fleet_report_path." % (dep["id"], path))
        elif os.path.islink(path) or (os.path.lexists(path) and not replaceable):
            what = ("a symbolic link" if os.path.islink(path) else "a directory" if os.path.isdir(path)
                    else "not a regular file" if not os.path.isfile(path) else "not writable")
            problems.append("fleet_log_dir: the log file of deployment %s, %s, is %s; remove it or set another "
                            "fleet_log_dir." % (dep["id"], path, what))
    return problems


def _write_vars(cli, vars_dir):
    """The private vars files of a run (``_fleet.vars_files``), each 0600 in ``vars_dir`` (a directory made 0700 for
    the run and removed when it ends)."""
    for path, item in _fleet.vars_files(cli, vars_dir):
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(_vars_text(item))


def _check(ansible_playbook, dep, cli):
    """Check one deployment before any run starts: the first tier of its playbook's preflight (the inventory and every
    setting, no host contacted), with the options of its run. Returns its problems, one line each ([]: it passed).

    Its output is not kept (the problems are in the report); inline extra vars reach it as they reach the run."""
    env = dict(os.environ, **_CHILD_ENV)
    vars_dir = tempfile.mkdtemp(prefix="specdec-fleet-vars.")
    try:
        _write_vars(cli, vars_dir)
        argv = _fleet.run_argv(ansible_playbook, _PLAYBOOK_DIR, dep, cli, vars_dir, check=True)
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                              check=False)
    finally:
        shutil.rmtree(vars_dir, ignore_errors=True)
    return _fleet.check_problems(done.returncode, _fleet.parse_output(done.stdout.decode("utf-8", "replace")),
                                 done.stderr[-2000:].decode("utf-8", "replace"))


def _check_all(deployments, workers, check_one):
    """``check_one(dep)`` for every deployment, ``workers`` at a time: id -> its problems (only those with one). An
    exception while checking one deployment is that deployment's problem, never the fleet's."""
    found = {}
    if not deployments:
        return found
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        futures = {pool.submit(check_one, dep): dep for dep in deployments}
        for future in concurrent.futures.as_completed(futures):
            dep = futures[future]
            try:
                problems = list(future.result())
            except Exception as exc:  # a check that could not run: this deployment is not started
                problems = ["fleet_deploy could not check deployment %s: %s" % (dep["id"], _fleet.error_line(exc))]
            if problems:
                found[dep["id"]] = problems
    return found


def _run(ansible_playbook, dep, cli, log_dir, check):
    """Run one deployment's playbook; its JSON output and stderr are kept in log_dir/<id>.json and .stderr.

    Inline extra vars reach the run in 0600 files of a private directory (mode 0700, made for this run and removed
    when it ends, whatever the outcome), never on its command line (public, ``ps``)."""
    # The files are named by the id as a plain file name (ids that are not are refused before any run; whatever the id
    # holds, the files stay in log_dir).
    out_path, err_path = _log_paths(dep, log_dir)
    env = dict(os.environ, **_CHILD_ENV)
    started = datetime.datetime.now(datetime.timezone.utc)
    # 0600: a run's results are censored where a task says no_log, but they are the deployment's own business.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    vars_dir = tempfile.mkdtemp(prefix="specdec-fleet-vars.")
    try:
        _write_vars(cli, vars_dir)
        argv = _fleet.run_argv(ansible_playbook, _PLAYBOOK_DIR, dep, cli, vars_dir)
        with os.fdopen(os.open(out_path, flags, 0o600), "wb") as out, \
                os.fdopen(os.open(err_path, flags, 0o600), "wb") as err:
            rc = subprocess.call(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    finally:
        shutil.rmtree(vars_dir, ignore_errors=True)
    ended = datetime.datetime.now(datetime.timezone.utc)
    seconds = (ended - started).total_seconds()
    with open(out_path, "rb") as f:
        raw = f.read().decode("utf-8", "replace")
    document = _fleet.parse_output(raw)
    with open(err_path, "rb") as f:
        tail = f.read()[-2000:].decode("utf-8", "replace")
    outcome = _fleet.summarize(dep, rc, document, tail, check=check)
    outcome["seconds"] = round(seconds, 1)
    outcome["started_at"] = started.isoformat(timespec="milliseconds")
    outcome["ended_at"] = ended.isoformat(timespec="milliseconds")
    outcome["log"] = out_path
    return outcome


def _run_all(deployments, workers, max_failures, run_one, refused=None, on_change=None):
    """Run ``run_one(dep)`` for the deployments, ``workers`` at a time, in order, and return their outcomes in the
    deployments' order.

    ``refused``: id -> outcome of the deployments that failed the checks made before any run: never started, and
    each counts as a failure. Once more than ``max_failures`` (None: no limit) have failed, start no more: those are
    returned as not run (untouched). An exception in ``run_one`` is that deployment's failure (``_fleet.crashed``),
    never the fleet's. ``on_change(outcomes, running)`` is called at the start and as each deployment ends, with the
    outcomes so far (id -> outcome) and the ids running (the report is written as each ends)."""
    outcomes = dict(refused or {})
    failures = len(outcomes)
    pending = [d for d in deployments if d["id"] not in outcomes]
    notify = on_change or (lambda done, running: None)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        running = {}
        while pending or running:
            starting = []
            while pending and len(running) + len(starting) < workers and (max_failures is None or
                                                                          failures <= max_failures):
                starting.append(pending.pop(0))
            # Written before the new runs start: the report never lags behind what runs.
            notify(outcomes, {d["id"] for d in list(running.values()) + starting})
            for dep in starting:
                running[pool.submit(run_one, dep)] = dep
            if not running:
                break
            done = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED).done
            for future in done:
                dep = running.pop(future)
                try:
                    outcomes[dep["id"]] = future.result()
                except Exception as exc:  # a crash while running one deployment: its failure, not the fleet's
                    outcomes[dep["id"]] = _fleet.crashed(dep, exc)
                failures += outcomes[dep["id"]]["status"] == "failed"
    for dep in pending:
        outcomes[dep["id"]] = _fleet.not_run(dep, max_failures)
    return [outcomes[d["id"]] for d in deployments]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = _action.task_args(self, _ARGS)
        # Types and ranges: _settings' rules for fleet.yml's settings (the same lines as for an inventory value).
        given = {"fleet_%s" % name: args[name] for name in ("hosts", "deployments", "parallel", "log_dir", "report_path")
                 if args.get(name) is not None}
        given["fleet_max_failures"] = args.get("max_failures")
        settings, problems = _settings.check_playbook_values(given)
        if problems:
            result.update(changed=False, deployments=[], failed=True,
                          msg="Fleet: %d problem(s), no deployment was run:\n- %s" % (len(problems), "\n- ".join(problems)))
            return result
        hosts_group = settings.get("fleet_hosts") or "spark_nodes"
        wanted = settings.get("fleet_deployments") or []
        parallel = settings.get("fleet_parallel") or 0
        max_failures = settings.get("fleet_max_failures")
        # Relative paths are in the report directory (specdec_report_dir, default the current directory).
        log_dir = _reports.report_path(settings.get("fleet_log_dir"), "specdec-fleet-logs", args.get("report_dir"))
        report_path = _reports.report_path(settings.get("fleet_report_path"), "specdec-fleet.json", args.get("report_dir"))

        groups = task_vars.get("groups") or {}
        if hosts_group not in groups:
            raise AnsibleError("fleet_hosts: the inventory has no group %s; point it at the group of the Sparks "
                               "(spark_nodes)." % hosts_group)
        members = list(groups.get(hosts_group) or [])
        fleet = _inventory.fleet(groups, members, task_vars["hostvars"], getattr(self, "_loader", None))
        deployments, errors = _fleet.select(fleet, wanted, members)
        check = bool(self._task.check_mode or self._play_context.check_mode)
        cli = dict(context.CLIARGS)
        cli["check"] = check
        cli["diff"] = bool(self._task.diff if self._task.diff is not None else cli.get("diff"))
        if not errors:
            try:
                _fleet.check_prompts(cli)
            except ValueError as exc:
                errors.append(str(exc))
        result["changed"] = False
        result["deployments"] = []
        if errors:
            result["failed"] = True
            result["msg"] = "Fleet: %d problem(s), no deployment was run:\n- %s" % (len(errors), "\n- ".join(errors))
            return result

        # Checked for every deployment before any run starts (its inventory above; its log files and its settings
        # below): one that fails is reported with its problems, not started, and counts against the failure budget;
        # the others run.
        refused = {dep["id"]: list(dep["problems"]) for dep in deployments if dep["problems"]}
        workers = min(parallel or len(deployments), len(deployments))
        ansible_playbook = _ansible_playbook(args.get("ansible_playbook"))

        def report_of(outcomes, running=(), complete=False):
            listed = [outcomes.get(d["id"]) or _fleet.waiting(d, d["id"] in running) for d in deployments]
            summary = _fleet.verdict(listed)
            return summary, {"deployments": listed, "serving": summary["serving"],
                             "not_serving": summary["not_serving"], "invalid": summary["invalid"],
                             "not_run": summary["not_run"], "max_failures": max_failures, "check_mode": check,
                             "parallel": workers, "log_dir": log_dir, "complete": complete}

        def write(report):
            _files.write_private(report_path, json.dumps(report, indent=2, sort_keys=True) + "\n", ".specdec-fleet.")

        # The fleet's own files: the log directory and the report are written before any check or run (the report
        # lists every deployment as pending); a fleet that cannot keep its outcomes runs nothing.
        try:
            os.makedirs(log_dir, exist_ok=True)
            if not os.access(log_dir, os.W_OK | os.X_OK):
                raise PermissionError("not writable")
        except OSError as exc:
            errors.append("fleet_log_dir: cannot write %s (%s); set a directory you can write, e.g. "
                          "specdec-fleet-logs." % (log_dir, _fleet.error_line(exc)))
        if not errors:
            try:
                os.makedirs(os.path.dirname(report_path), exist_ok=True)
                write(report_of({})[1])
            except OSError as exc:
                errors.append("fleet_report_path: cannot write %s (%s); set a file in a directory you can write, e.g. "
                              "specdec-fleet.json." % (report_path, _fleet.error_line(exc)))
        if errors:
            result["failed"] = True
            result["msg"] = "Fleet: %d problem(s), no deployment was run:\n- %s" % (len(errors), "\n- ".join(errors))
            return result
        for dep in deployments:
            if dep["id"] not in refused:
                problems = _log_problems(dep, log_dir, report_path)
                if problems:
                    refused[dep["id"]] = problems
        checked = _check_all([d for d in deployments if d["id"] not in refused], workers,
                             lambda dep: _check(ansible_playbook, dep, cli))
        refused.update(checked)
        refused = {dep["id"]: _fleet.invalid(dep, refused[dep["id"]]) for dep in deployments if dep["id"] in refused}

        report_errors = []

        def progress(outcomes, running):
            # Each outcome is written as it ends; a report that cannot be written now is written at the end. Whatever
            # goes wrong here, the runs go on (their outcomes are kept in memory).
            try:
                write(report_of(outcomes, running)[1])
            except Exception as exc:  # the runs matter more than this copy of their outcomes
                report_errors.append(_fleet.error_line(exc))

        outcomes = _run_all(deployments, workers, max_failures,
                            lambda dep: _run(ansible_playbook, dep, cli, log_dir, check), refused, progress)
        summary, report = report_of({o["id"]: o for o in outcomes}, complete=True)
        result.update(report)
        result["report"] = report_path
        result["changed"] = any(o["changed"] for o in outcomes)
        result["msg"] = summary["msg"]
        if summary["not_serving"] or summary["invalid"]:
            result["failed"] = True
        try:
            write(report)
        except Exception as exc:  # the outcomes are still this result (and specdec_fleet's stats)
            result["failed"] = True
            result["report_error"] = ("fleet_report_path: cannot write %s (%s); the outcomes are in this run's result "
                                      "and its specdec_fleet stats only." % (report_path, _fleet.error_line(exc)))
            result["msg"] += "\n- " + result["report_error"]
        return result
