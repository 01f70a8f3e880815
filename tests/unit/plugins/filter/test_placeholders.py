# -*- coding: utf-8 -*-
"""hostvars | sparkops.specdec.placeholders(host): values left as the example inventory's SET-... placeholders."""

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
    hostvars = {"spark-1": Lazy({
        "ansible_user": "SET-login-user-of-every-spark",
        "ansible_host": "SET-management-address-of-spark-1",
        "specdec_server_models": [{"repo": "org/ok"}, {"repo": "SET-a-repo"}],
        "nested": {"token": "SET-token"},
        "fine": "SETTINGS-are-not-placeholders", "lower": "set-x", "inside": "x-SET-y", "number": 3, "none": None,
        "broken": "never read",
    })}
    assert ph.placeholders(hostvars, "spark-1") == [
        line("ansible_host", "spark-1", "SET-management-address-of-spark-1"),
        line("ansible_user", "spark-1", "SET-login-user-of-every-spark"),
        line("nested.token", "spark-1", "SET-token"),
        line("specdec_server_models[1].repo", "spark-1", "SET-a-repo"),
    ]


def test_a_host_with_real_values_has_none():
    assert ph.placeholders({"spark-1": {"ansible_host": "10.0.0.21", "ansible_user": "nvidia"}}, "spark-1") == []


@pytest.mark.parametrize("hostvars,host,text", [(["x"], "spark-1", "expected hostvars"),
                                                ({"spark-2": {}}, "spark-1", "spark-1 is not in hostvars")])
def test_bad_input(hostvars, host, text):
    with pytest.raises(AnsibleFilterError, match=text):
        ph.placeholders(hostvars, host)
