# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Controller-side checks of a playbook run before any host is contacted (issue 25 item 1).

* ``variable_problems``: the playbook variables (module_utils/_settings.PLAYBOOK_SETTINGS, declared there once with
  their types and choices) are checked like role options: a wrong type or an unknown choice is one line; a name with
  a known prefix that is no setting, or a name close to a playbook variable (``single_spark_hots``,
  ``fleet_deployment``, ``confrim``), is one line naming the known one. A user's own unrelated variables pass.
* ``selection_problem``: a run whose plays would match no host (a host selector that names no inventory host, a
  ``--limit`` that leaves out every host of the play, or the controller's ``localhost`` for fleet.yml) is one line
  naming why and what to pass, instead of a green run that did nothing.
"""

from __future__ import annotations

import difflib
import re

from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings

# Words the callers name the playbook's hosts by: the variable that chose them (or the group), and what to pass.
_HOW = {
    "single_spark_host": "pass -e single_spark_host=NAME naming one Spark of the inventory, or put one host in group "
                         "spark_head",
    "spark_nodes": "put the Sparks in group spark_nodes",
    "status_hosts": "pass -e status_hosts=PATTERN matching hosts of the inventory (default spark_nodes)",
    "diagnose_hosts": "pass -e diagnose_hosts=PATTERN matching hosts of the inventory (default spark_nodes)",
    "localhost": "drop --limit (fleet.yml runs on the controller, localhost) and pick deployments with "
                 "-e '{\"fleet_deployments\": [ID, ...]}'",
}
# Below this ratio (difflib) a name is not taken for a playbook variable misspelt.
_NEAR = 0.85
_NOT_NAMES = ("_", "ansible_")


def _names(hosts, most=6):
    hosts = list(hosts)
    shown = ", ".join(hosts[:most])
    return shown + (", ... (%d in all)" % len(hosts) if len(hosts) > most else "")


def candidate_names(names, specs):
    """Of a host's variable names, those ``variable_problems`` looks at: the playbook variables given, the names the
    settings check takes for a misspelt setting, and names close to a playbook variable. Only these are templated."""
    known, misnamed = _settings.select_names(names, specs)
    playbook = [n for n in known if n in _settings.PLAYBOOK_SETTINGS]
    near = [n for n in names if isinstance(n, str) and n not in known and n not in misnamed and _near(n)]
    return sorted(set(playbook + misnamed + near))


def _near(name):
    if name.startswith(_NOT_NAMES) or name in _settings.RESULTS or name in _settings.PLAYBOOK_SETTINGS:
        return None
    match = difflib.get_close_matches(name, sorted(_settings.PLAYBOOK_SETTINGS), n=1, cutoff=_NEAR)
    # A known name with more (or fewer) letters at the end is another word (confirmed, my_status_hosts), not a typo.
    if not match or name.startswith(match[0]) or match[0].startswith(name) or name.endswith(match[0]):
        return None
    return match[0]


def _about_playbook_variable(name, line):
    """Whether a misnamed variable's line is about a playbook variable: its name has a playbook prefix, or the name
    the line suggests is one."""
    playbook_prefixes = tuple(p for p in _settings._prefixes({}))
    guess = re.search(r"did you mean (\S+)\?", line)
    return name.startswith(playbook_prefixes) or bool(guess and guess.group(1) in _settings.PLAYBOOK_SETTINGS)


def variable_problems(values, specs, skip=()):
    """One line per problem of the playbook variables in ``values`` (name -> templated value), sorted.

    skip: variables whose values a later task of the playbook checks and records itself (fleet.yml's fleet_deploy
    reports fleet_* problems in its set_stats): their names are known, their values are not checked here."""
    known, misnamed = _settings.select_names(values.keys(), specs)
    problems = []
    given = {n: values[n] for n in known if n in _settings.PLAYBOOK_SETTINGS and n not in skip}
    problems += _settings.check_playbook_values(given)[1]
    options = _settings.known_options(specs)
    prefixes = _settings._prefixes(specs)
    for name in misnamed:
        line = _settings._check_name(name, options, prefixes)
        # A role option misspelt is the plan's (specdec_plan reports it with the deployment's other problems).
        if line and _about_playbook_variable(name, line):
            problems.append(line)
    for name in values:
        if name in known or name in misnamed:
            continue
        guess = _near(name)
        if guess:
            problems.append("%s: not a variable of %s (it would be ignored); did you mean %s?"
                            % (name, _settings.COLLECTION, guess))
    return sorted(set(problems))


def selection_problem(selector, pattern, matched, play_hosts, limit=None):
    """One line when the play that does the work would match no host in this run, else None.

    selector: the variable (or group) that names the play's hosts, e.g. single_spark_host; pattern: its value (the
    play's ``hosts:``); matched: the inventory's hosts of the pattern, without --limit
    (``query('ansible.builtin.inventory_hostnames', pattern)``); play_hosts: the hosts this run may use
    (``ansible_play_hosts_all`` of a play on ``all:localhost``, after --limit); limit: ``ansible_limit``.
    """
    matched = [str(h) for h in matched or []]
    allowed = {str(h) for h in play_hosts or []}
    if any(h in allowed for h in matched):
        return None
    how = _HOW.get(selector) or _HOW.get(pattern) or "pass a pattern that matches hosts of the inventory"
    named = "%s (%s)" % (selector, pattern) if selector != pattern else selector
    if not matched:
        return ("%s: matches no host of the inventory, so nothing would be deployed or read; %s."
                % (named, how))
    if pattern == "localhost":
        return ("--limit %s: leaves out localhost, where this playbook's play runs, so nothing would be done; %s."
                % (limit, how))
    return ("--limit %s: leaves out %s, the host(s) of %s, so nothing would be deployed or read; --limit to some of "
            "them, or drop --limit." % (limit, _names(matched), named))
