# -*- coding: utf-8 -*-
"""The deploy play shared by two_sparks.yml and spark_cluster.yml (issue 24 item 1, playbooks/plays/spark_deploy.yml):
both playbooks import it after their own preflight, and the files its rescue reads are found from where it lives."""

from __future__ import annotations

import pathlib
import re

import yaml

PLAYBOOKS = pathlib.Path(__file__).resolve().parents[2] / "playbooks"


def imports(name):
    return [(p.get("ansible.builtin.import_playbook"), (p.get("vars") or {}).get("preflight_topology"))
            for p in yaml.safe_load((PLAYBOOKS / name).read_text())]


def test_both_playbooks_import_the_same_deploy_play_after_their_preflight():
    assert imports("two_sparks.yml") == [("preflight_inventory.yml", "two_sparks"), ("plays/spark_deploy.yml", None)]
    assert imports("spark_cluster.yml") == [("preflight_inventory.yml", "spark_cluster"),
                                            ("plays/spark_deploy.yml", None)]


def test_the_rescue_and_its_template_are_found_from_the_shared_play():
    play = yaml.safe_load((PLAYBOOKS / "plays" / "spark_deploy.yml").read_text())[0]
    rescue = [t["ansible.builtin.include_tasks"] for b in play["tasks"] for t in b.get("rescue") or []]
    assert rescue and all((PLAYBOOKS / "plays" / r).resolve().is_file() for r in rescue)
    for included in rescue:
        path = (PLAYBOOKS / "plays" / included).resolve()
        # A template lookup in an included tasks file: relative to that file's directory (a bare name would be looked
        # up beside the play, in plays/, and not be found: the failure report of a failed deploy).
        names = re.findall(r"lookup\('ansible\.builtin\.template', '([^']+)'\)", path.read_text())
        assert names and all((path.parent / n).resolve().is_file() for n in names), names
