# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The option every report-writing action shares (the directory decision: plugin_utils/_reports.py).

- ``sparkops.specdec.reports`` (DOCUMENTATION): O(report_dir) of ``preflight_report``, ``specdec_status_report``,
  ``specdec_bench_report``, ``fleet_deploy`` and ``diagnose_bundle``.
"""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  report_dir:
    description:
      - The controller directory of the collection's reports (C(specdec_report_dir)); a relative path is relative to the
        current directory. Empty means the current directory of the C(ansible-playbook) process (never the
        collection's or the playbook's directory, read-only in an execution environment). Created (mode 0700) when
        missing.
    type: path
    default: ""
"""
