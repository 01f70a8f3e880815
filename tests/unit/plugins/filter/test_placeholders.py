# -*- coding: utf-8 -*-
"""hostvars[host] | sparkops.specdec.placeholders(host): values left as the example inventory's SET-... placeholders,
read from the host's own variables (never hostvars: no other host's)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkops.specdec.plugins.filter import placeholders as ph


class Lazy(dict):
    """A host's vars where one value cannot be templated (raises on access, like an undefined variable)."""

    def __getitem__(self, key):
        if key == "broken":
            raise RuntimeError("undefined variable")
        return super().__getitem__(key)


def line(where, host, value):
    return ("%s on %s: %s is the example inventory's placeholder; set the real value in your inventory (host or group "
            "vars) or with -e." % (where, host, value))


def test_every_placeholder_is_one_line_naming_the_variable_and_the_host():
    variables = Lazy({
        "inventory_hostname": "spark-1",
        "ansible_user": "SET-login-user-of-every-spark",
        "ansible_host": "SET-management-address-of-spark-1",
        "specdec_server_models": [{"repo": "org/ok"}, {"repo": "SET-a-repo"}],
        "nested": {"token": "SET-token"},
        "fine": "SETTINGS-are-not-placeholders", "lower": "set-x", "inside": "x-SET-y", "number": 3, "none": None,
        "broken": "never read",
    })
    assert ph.placeholders(variables, "spark-1") == [
        line("ansible_host", "spark-1", "SET-management-address-of-spark-1"),
        line("ansible_user", "spark-1", "SET-login-user-of-every-spark"),
        line("nested.token", "spark-1", "SET-token"),
        line("specdec_server_models[1].repo", "spark-1", "SET-a-repo"),
    ]


def test_a_host_with_real_values_has_none():
    variables = {"inventory_hostname": "spark-1", "ansible_host": "10.0.0.21", "ansible_user": "nvidia"}
    assert ph.placeholders(variables, "spark-1") == []


def test_hostvars_is_refused_the_host_own_variables_are_read():
    # hostvars (every host's variables, by host) is not the input: it would read the other hosts.
    hostvars = {"spark-1": {"inventory_hostname": "spark-1", "ansible_host": "SET-management-address-of-spark-1"},
                "spark-2": {"inventory_hostname": "spark-2", "ansible_host": "SET-management-address-of-spark-2"}}
    with pytest.raises(AnsibleFilterError) as err:
        ph.placeholders(hostvars, "spark-1")
    assert "\n" not in str(err.value) and "pass hostvars[inventory_hostname]" in str(err.value)
    # the host's own variables: its own placeholder only
    assert ph.placeholders(hostvars["spark-1"], "spark-1") == [
        line("ansible_host", "spark-1", "SET-management-address-of-spark-1")]


@pytest.mark.parametrize("variables,host,text", [
    (["x"], "spark-1", "^placeholders: expected the variables of spark-1, got list: pass hostvars"),
    ({"spark-1": {}}, "spark-1", "^placeholders: expected the variables of spark-1, got a mapping without "
                                 "inventory_hostname"),
    ({"inventory_hostname": "spark-2"}, "spark-1", "^placeholders: expected the variables of spark-1, got those of "
                                                   "spark-2: pass hostvars"),
])
def test_bad_input(variables, host, text):
    with pytest.raises(AnsibleFilterError, match=text):
        ph.placeholders(variables, host)
