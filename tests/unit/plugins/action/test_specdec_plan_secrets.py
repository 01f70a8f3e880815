# -*- coding: utf-8 -*-
"""specdec_plan's "cannot be evaluated (<exception>)" messages quote a Jinja or library exception, which may quote
the HF token (e.g. a templated specdec_server_hf_token that fails on the token's value): the quote is scrubbed of
the token in every form. The expressions are evaluated by ansible-core's own Templar, as hostvars would."""

from __future__ import annotations

import base64
import urllib.parse

import pytest

from ansible_collections.sparkops.specdec.tests.unit.plugins.action.specdec_plan_pair import action_for, published

CANARY = "hf_canaryPlanQuote0123456789abcdefXYZ"
FORMS = {
    "raw": CANARY,
    "url": urllib.parse.quote("x" + CANARY),
    "base64": base64.b64encode(("user:" + CANARY).encode()).decode(),
    "bearer": "Bearer " + CANARY,
    "escaped": repr(CANARY + "\n")[1:-1],
}


def run(hosts, play_vars=None, topology="single_spark"):
    """Each host resolves its settings (its variables and the play's, with ansible-core's Templar), then the plan."""
    action = action_for({"topology": topology})
    names = list(hosts)
    task_vars = {"inventory_hostname": names[0], "hostvars": published(hosts, play_vars), "ansible_play_hosts_all": names,
                 "groups": {"spark_head": names[:1], "spark_workers": names[1:]}}
    return action.run(task_vars=task_vars)


def assert_clean(msg):
    for form, text in FORMS.items():
        assert text not in msg, form
    assert "PlanQuote" not in msg and "0123456789abcdefXYZ" not in msg


@pytest.fixture(autouse=True)
def no_env_token(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)


def test_failing_token_expression_quotes_the_token_and_is_scrubbed():
    """The token built from a vaulted-style source fails on its value: Jinja's message names the value."""
    result = run({"spark-1": {"ansible_host": "10.0.0.1", "vault_hf_token": CANARY,
                              "specdec_server_hf_token": "{{ {}[vault_hf_token] }}"}})
    assert result["failed"]
    line = [x for x in result["msg"].splitlines() if x.startswith("- specdec_server_hf_token: cannot be")]
    assert len(line) == 1, result["msg"]
    # The exception is quoted (what failed), the token is not.
    assert "has no attribute '********'" in line[0] and line[0].endswith("; fix its value.")
    assert_clean(result["msg"])


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_of_the_token_in_a_quoted_exception_is_scrubbed(form):
    """Another setting's expression fails with a message quoting the (evaluable) token in each form."""
    hosts = {"spark-1": {"ansible_host": "10.0.0.1", "specdec_server_hf_token": CANARY, "leak": FORMS[form],
                         "specdec_server_port": "{{ {}[leak] }}"}}
    result = run(hosts)
    line = [x for x in result["msg"].splitlines() if x.startswith("- specdec_server_port: cannot be")]
    assert len(line) == 1 and "********" in line[0], result["msg"]
    assert_clean(result["msg"])


def test_token_is_scrubbed_before_the_quote_is_cut():
    """A long message puts the token across the 200-character cut: the cut must not leave half of it."""
    hosts = {"spark-1": {"ansible_host": "10.0.0.1", "my_hf_token": CANARY,
                         "specdec_server_hf_token": "{{ my_hf_token }}",
                         "specdec_server_port": "{{ {}['%s' ~ my_hf_token] }}" % ("p" * 150)}}
    result = run(hosts)
    assert result["failed"] and "specdec_server_port: cannot be evaluated" in result["msg"]
    assert "hf_canary" not in result["msg"] and "hf_can" not in result["msg"]


def test_controller_hf_token_and_play_vars_are_scrubbed(monkeypatch):
    """The setting's default is the controller's HF_TOKEN; a play var that fails quotes it."""
    monkeypatch.setenv("HF_TOKEN", CANARY)
    result = run({"spark-1": {"ansible_host": "10.0.0.1"}},
                 play_vars={"env_token": CANARY, "specdec_server_max_draft_len": "{{ {}[env_token] }}"})
    line = [x for x in result["msg"].splitlines() if x.startswith("- specdec_server_max_draft_len: cannot be")]
    assert len(line) == 1 and "'********'" in line[0], result["msg"]
    assert_clean(result["msg"])


def test_both_nodes_tokens_are_scrubbed():
    hosts = {"spark-1": {"ansible_host": "10.0.0.1", "specdec_server_hf_token": CANARY},
             "spark-2": {"ansible_host": "10.0.0.2", "specdec_server_hf_token": CANARY,
                         "specdec_server_port": "{{ {}[specdec_server_hf_token] }}"}}
    result = run(hosts, topology="two_sparks")
    # The problem of one member only names it.
    assert "specdec_server_port: cannot be evaluated" in result["msg"] and result["msg"].endswith("(on spark-2)")
    assert_clean(result["msg"])


def test_ordinary_words_are_not_masked():
    """A short secret-looking variable (a flag) is no secret to scrub: the quote stays readable."""
    hosts = {"spark-1": {"ansible_host": "10.0.0.1", "use_token": "yes",
                         "specdec_server_port": "{{ {}['yes_port'] }}"}}
    result = run(hosts)
    assert "no attribute 'yes_port'" in result["msg"]


# --- every option whose spec declares no_log, whatever its name (issue 25 item 5) ---------------------------------
QUIET = "specdec_server_smoke_prompt"  # a name that does not look secret (_settings.looks_secret is False)
QUIET_A = "plain-words-canary-alpha-0123"
QUIET_B = "plain-words-canary-bravo-4567"


@pytest.fixture
def quiet_no_log(monkeypatch):
    """QUIET's spec (roles/specdec_server/meta/argument_specs.yml, as _secret_options reads it) declares no_log."""
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _settings
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _action, _secret_options
    assert not _settings.looks_secret(QUIET) and QUIET not in _secret_options.no_log_options()
    real = _secret_options.spec_options

    def spec_options(root=None):
        return [(role, entry, name, dict(option, no_log=True) if name == QUIET else option)
                for role, entry, name, option in real(root)]
    monkeypatch.setattr(_secret_options, "spec_options", spec_options)
    monkeypatch.setattr(_action, "_NO_LOG", set(), raising=False)  # read afresh with the patched specs
    assert QUIET in _secret_options.no_log_options()


def test_a_no_log_option_that_differs_between_the_nodes_is_named_without_its_values(quiet_no_log):
    from ansible_collections.sparkops.specdec.tests.unit.plugins.action.specdec_plan_pair import run_pair
    result = run_pair({"spark-1": {QUIET: QUIET_A}, "spark-2": {QUIET: QUIET_B}})
    assert result["failed"]
    line = [x for x in result["msg"].splitlines() if x.startswith("- %s: differs between" % QUIET)]
    assert line == ["- %s: differs between spark-1, spark-2; a deployment has one value, set it once for the group "
                    "(e.g. in group_vars/spark_nodes.yml)." % QUIET], result["msg"]
    assert "canary" not in result["msg"]


def test_a_no_log_option_quoted_by_a_failing_expression_is_scrubbed(quiet_no_log):
    hosts = {"spark-1": {"ansible_host": "10.0.0.1", QUIET: QUIET_A, "specdec_server_port": "{{ {}[%s] }}" % QUIET}}
    result = run(hosts)
    line = [x for x in result["msg"].splitlines() if x.startswith("- specdec_server_port: cannot be")]
    assert len(line) == 1 and "'********'" in line[0], result["msg"]
    assert "canary" not in result["msg"]
