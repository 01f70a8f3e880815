# -*- coding: utf-8 -*-
"""sparkops.specdec.server_lifecycle: the server's state machine on the head, with a fake docker CLI (server.sh's
verbs on a fake process table) and a real HTTP health server on 127.0.0.1.

server.sh is the same bytes the role's former template rendered (fixtures rendered by ansible's template module from
server.sh.j2 at the last commit before the module): a deployment made before is unchanged and its record still
matches."""

from __future__ import annotations

import http.server
import json
import os
import pathlib
import shutil
import threading

import pytest

from ansible_collections.sparkops.specdec.plugins.module_utils import _server
from ansible_collections.sparkops.specdec.plugins.modules import server_lifecycle as mod

FIXTURES = pathlib.Path(__file__).parent / "server_sh"
TOKEN = "hf_secretTOKENvalue123"


class Failed(Exception):
    def __init__(self, kwargs):
        super().__init__(kwargs.get("msg"))
        self.result = kwargs


class FakeModule(object):
    def __init__(self, params, check=False):
        defaults = dict(state="started", container="trtllm-multinode", state_dir=None, state_file=None, action=None,
                        launch=None, local_url=None, health_timeout=4, health_interval=1, hf_token="", api_key="",
                        api_key_file=None, autostart=None, autostart_record=None, docker="docker")
        defaults.update(params)
        self.params = defaults
        self.check_mode = check

    def fail_json(self, **kwargs):
        raise Failed(kwargs)

    def warn(self, text):
        self.warnings = getattr(self, "warnings", []) + [text]

    def atomic_move(self, src, dst):
        os.rename(src, dst)


class FakeDocker(object):
    """docker exec CONTAINER bash server.sh start|stop|status, and the status probe (sh -c ...)."""

    def __init__(self, state_dir, health):
        self.state_dir = pathlib.Path(state_dir)
        self.health = health
        self.calls = []
        self.envs = []
        self.pid = None
        self.next_pid = 100
        self.start_behaviour = ["ok"]  # per start: ok (serves), exit (process dies), hang (never healthy)

    def __call__(self, argv, env=None):
        self.calls.append(list(argv))
        self.envs.append(dict(env or {}))
        assert argv[:2] == ["docker", "exec"]
        rest = argv[2:]
        while rest[0] == "-e":
            rest = rest[2:]
        rest = rest[1:]  # the container
        if rest[0] == "sh" and rest[2] == _server.NCCL_PROBE:
            self.nccl_probes = getattr(self, "nccl_probes", []) + [rest[3]]
            return 0, getattr(self, "nccl_maps", ""), ""
        if rest[0] == "sh":
            state_file = rest[3]
            text = pathlib.Path(state_file).read_text() if os.path.exists(state_file) else "null\n"
            return 0, text + ("running\n" if self.pid else "stopped\n"), ""
        verb = rest[2]
        if verb == "status":
            return (0, "running (pid %d)\n" % self.pid, "") if self.pid else (3, "stopped\n", "")
        if verb == "stop":
            (self.state_dir / "autostart.json").unlink(missing_ok=True)
            if self.pid:
                pid, self.pid = self.pid, None
                self.health.ok = False
                return 0, "stopped (pid %d)\n" % pid, ""
            return 0, "", ""
        if verb == "start":
            self.next_pid += 1
            self.pid = self.next_pid
            how = self.start_behaviour.pop(0) if self.start_behaviour else "ok"
            self.health.ok = how == "ok"
            if how == "exit":
                self.pid = None
            return 0, "started (pid %d)\n" % self.next_pid, ""
        raise AssertionError(argv)


class Health(object):
    ok = False


@pytest.fixture
def health():
    state = Health()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code = 200 if (self.path == "/health" and state.ok) else 503
            self.send_response(code)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = "http://127.0.0.1:%d" % httpd.server_address[1]
    yield state
    httpd.shutdown()


def launch(port=8355, members=("spark-1", "spark-2"), env=None):
    return {"argv": ["trtllm-serve", "serve", "m", "--port", port], "env": env if env is not None else {"A": "1"},
            "members": list(members), "port": port}


@pytest.fixture
def node(tmp_path, health):
    (tmp_path / "deployments").mkdir()
    docker = FakeDocker(tmp_path, health)
    return tmp_path, docker


def run(node, health, check=False, **params):
    tmp, docker = node
    base = dict(state_dir=str(tmp), state_file=str(tmp / "deployments" / "spark-1.json"), local_url=health.url)
    base.update(params)
    module = FakeModule(base, check=check)
    return getattr(mod.Lifecycle(module, docker, sleep=lambda s: None), module.params["state"])()


RECORD = {"deployment": "spark-1", "fingerprint": "f1", "config_file": "", "health_url": "x/health", "hang_timeout": 600}


# ------------------------------------------------------------------------------------------- server.sh
@pytest.mark.parametrize("name", ["pair", "single"])
def test_server_sh_is_byte_identical_to_the_former_template(name):
    case = [c for c in json.loads((FIXTURES / "specs.json").read_text())["specs"] if c["name"] == name][0]
    got = _server.render_script(case["spec"], case["state_dir"], case["container"], case["state_file"])
    assert got == (FIXTURES / ("%s.sh" % name)).read_text()


# ------------------------------------------------------------------------------------------- the state machine
def test_start_writes_the_script_starts_waits_and_arms(node, health):
    tmp, docker = node
    res = run(node, health, action="start", launch=launch(), hf_token=TOKEN, autostart=True, autostart_record=RECORD)
    assert res["changed"] and res["started"] and res["health"] == "healthy" and res["pid"] == 101
    assert res["operation"] == "start" and res["autostart"] == "armed" and res["script_changed"]
    script = (tmp / "server.sh").read_text()
    assert script == _server.render_script(launch(), str(tmp), "trtllm-multinode", str(tmp / "deployments/spark-1.json"))
    assert oct(os.stat(tmp / "server.sh").st_mode & 0o777) == "0o755"
    rec = json.loads((tmp / "autostart.json").read_text())
    assert rec == {"schema_version": 1, "deployment": "spark-1", "state_file": str(tmp / "deployments/spark-1.json"),
                   "fingerprint": "f1", "server_sh_sha1": _server.sha1_text(script), "config_file": "",
                   "needs_hf_token": True, "health_url": "x/health", "hang_timeout": 600}
    # HF_TOKEN: in the exec environment of the start only, never in argv or the result.
    start = [i for i, c in enumerate(docker.calls) if c[-1] == "start"]
    assert len(start) == 1 and docker.envs[start[0]] == {"HF_TOKEN": TOKEN}
    assert docker.calls[start[0]][:5] == ["docker", "exec", "-e", "HF_TOKEN", "trtllm-multinode"]
    assert TOKEN not in json.dumps(docker.calls) and TOKEN not in json.dumps(res)
    assert all(e == {} for i, e in enumerate(docker.envs) if i != start[0])


def test_offline_launch_gets_no_token_and_the_record_says_so(node, health):
    tmp, docker = node
    res = run(node, health, action="start", launch=launch(env={"HF_HUB_OFFLINE": "1"}), hf_token=TOKEN, autostart=True,
              autostart_record=RECORD)
    assert res["health"] == "healthy" and all(e == {} for e in docker.envs)
    assert json.loads((tmp / "autostart.json").read_text())["needs_hf_token"] is False


def test_none_is_idempotent_and_checks_health(node, health):
    tmp, docker = node
    run(node, health, action="start", launch=launch(), autostart=True, autostart_record=RECORD)
    calls = len(docker.calls)
    res = run(node, health, action="none", launch=launch(), autostart=True, autostart_record=RECORD)
    assert res["changed"] is False and res["health"] == "healthy" and res["autostart"] == "unchanged"
    assert res["started"] is False and len(docker.calls) == calls  # no exec at all
    # The same in check mode.
    res = run(node, health, check=True, action="none", launch=launch(), autostart=True, autostart_record=RECORD)
    assert res["changed"] is False


def test_none_fails_when_the_running_server_is_unhealthy(node, health):
    run(node, health, action="start", launch=launch())
    health.ok = False
    with pytest.raises(Failed) as err:
        run(node, health, action="none", launch=launch())
    assert err.value.result["msg"].startswith("The running server does not answer 200 at %s/health" % health.url)


def test_restart_stops_then_starts(node, health):
    tmp, docker = node
    run(node, health, action="start", launch=launch(), autostart=True, autostart_record=RECORD)
    res = run(node, health, action="restart", launch=launch(port=8356))
    assert res["operation"] == "restart" and res["stop"]["rc"] == 0 and res["pid"] == 102 and res["health"] == "healthy"
    verbs = [c[-1] for c in docker.calls if c[-2].endswith("server.sh")]
    assert verbs[verbs.index("stop"):][:2] == ["stop", "start"]
    # server.sh stop removed the record; this call was not asked to arm (the role arms after the smoke test).
    assert not (tmp / "autostart.json").exists() and res["autostart"] == "unchanged"
    assert "--port 8356" in (tmp / "server.sh").read_text()


@pytest.mark.parametrize("how, outcome, msg", [
    ("exit", "exited", "The server process exited before /health answered (it rejected its settings or crashed; "
                       "see the log)."),
    ("hang", "timeout", "/health did not answer 200 within specdec_server_health_timeout (4 s)."),
])
def test_a_failed_start_fails_with_the_roles_message_and_leaves_the_rollback_to_the_caller(node, health, how, outcome,
                                                                                           msg):
    tmp, docker = node
    docker.start_behaviour = [how]
    with pytest.raises(Failed) as err:
        run(node, health, action="start", launch=launch(), autostart=True, autostart_record=RECORD)
    res = err.value.result
    assert res["msg"] == msg and res["health"] == outcome and res["started"] is True and res["pid"] == 101
    assert not (tmp / "autostart.json").exists()  # never armed for a server that does not serve
    if how == "hang":
        assert res["looks"] == 5  # ceil(4 / 1) + 1 looks, as wait.yml's until/retries did


def test_failed_restart_then_rollback_to_the_previous_launch(node, health):
    """The role's rollback: stop the failed server, start the previous launch (its server.sh back), arm it again."""
    tmp, docker = node
    old = launch(port=8355)
    run(node, health, action="start", launch=old, autostart=True, autostart_record=RECORD)
    old_script = (tmp / "server.sh").read_text()
    docker.start_behaviour = ["exit"]
    with pytest.raises(Failed) as err:
        run(node, health, action="restart", launch=launch(port=8356))
    assert err.value.result["health"] == "exited" and err.value.result["stop"]["rc"] == 0
    stopped = run(node, health, state="stopped")
    assert stopped["operation"] == "stop" and stopped["stop"]["rc"] == 0
    back = run(node, health, action="start", launch=old)
    assert back["health"] == "healthy" and (tmp / "server.sh").read_text() == old_script
    armed = run(node, health, action="none", launch=old, autostart=True, autostart_record=RECORD)
    assert armed["autostart"] == "armed"
    assert json.loads((tmp / "autostart.json").read_text())["server_sh_sha1"] == _server.sha1_text(old_script)


def test_stop_removes_the_record_and_reports_the_pid(node, health):
    tmp, docker = node
    run(node, health, action="start", launch=launch(), autostart=True, autostart_record=RECORD)
    res = run(node, health, state="stopped")
    assert res["changed"] and res["pid"] == 101 and not (tmp / "autostart.json").exists()
    again = run(node, health, state="stopped")
    assert again["changed"] is False


def test_stop_without_a_script_does_nothing(node, health):
    tmp, docker = node
    res = run(node, health, state="stopped")
    assert res["changed"] is False and docker.calls == []


def test_check_mode_reports_and_changes_nothing(node, health):
    tmp, docker = node
    res = run(node, health, check=True, action="start", launch=launch(), hf_token=TOKEN, api_key="k",
              api_key_file=str(tmp / "api-key"), autostart=True, autostart_record=RECORD)
    assert res["changed"] and res["operation"] == "start" and res["health"] == "unchecked" and res["started"] is False
    assert sorted(p.name for p in tmp.iterdir()) == ["deployments"] and docker.calls == []
    # Stopping in check mode: only server.sh status runs.
    run(node, health, action="start", launch=launch())
    n = len(docker.calls)
    res = run(node, health, check=True, state="stopped")
    assert res["changed"] and [c[-1] for c in docker.calls[n:]] == ["status"] and docker.pid


def test_diff_shows_the_script_and_the_record(node, health):
    tmp, docker = node
    life = mod.Lifecycle(FakeModule(dict(state_dir=str(tmp), state_file=str(tmp / "deployments/spark-1.json"),
                                         local_url=health.url, action="start", launch=launch(), autostart=True,
                                         autostart_record=RECORD), check=True), docker)
    life.started()
    assert [d["after_header"] for d in life.diff] == [str(tmp / "server.sh"), str(tmp / "autostart.json")]
    assert life.diff[0]["before"] == "" and life.diff[0]["after"].startswith("# Managed by sparkops.specdec")


def test_existing_deployment_from_the_former_role_is_unchanged(node, health):
    """A deployment made by the template-based role (its server.sh and its record) converges with changed=0."""
    tmp, docker = node
    case = [c for c in json.loads((FIXTURES / "specs.json").read_text())["specs"] if c["name"] == "pair"][0]
    spec = case["spec"]
    shutil.copy(FIXTURES / "pair.sh", tmp / "server.sh")
    os.chmod(tmp / "server.sh", 0o755)
    state_file = case["state_file"]
    # The record as arm.yml wrote it (to_nice_json(indent=2)), for that server.sh.
    old = {"schema_version": 1, "deployment": "spark-1", "state_file": state_file, "fingerprint": "f1",
           "server_sh_sha1": _server.sha1_text((tmp / "server.sh").read_text()), "config_file": "",
           "needs_hf_token": False, "health_url": "x/health", "hang_timeout": 600}
    (tmp / "autostart.json").write_text(json.dumps(old, indent=2, sort_keys=True) + "\n")
    docker.pid = 7
    health.ok = True
    module = FakeModule(dict(state_dir=case["state_dir"], state_file=state_file, local_url=health.url, action="none",
                             launch=spec, container=case["container"], autostart=True, autostart_record=RECORD))
    # The fixture names /var/lib/sparkops/specdec: the same script text, read from this directory.
    module.params["state_dir"] = case["state_dir"]
    life = mod.Lifecycle(module, docker)
    life.server.script = str(tmp / "server.sh")
    life.path = lambda name: str(tmp / name)
    res = life.started()
    assert (res["changed"], res["script_changed"], res["autostart"]) == (False, False, "unchanged"), life.diff


def test_status_reads_the_state_file_and_whether_it_runs(node, health):
    tmp, docker = node
    res = run(node, health, state="status")
    assert res["state"] == {} and res["running"] is False and res["changed"] is False
    (tmp / "deployments" / "spark-1.json").write_text(json.dumps({"schema_version": 1, "running": {"x": 1}}) + "\n")
    docker.pid = 9
    res = run(node, health, state="status")
    assert res["state"]["running"] == {"x": 1} and res["running"] is True
    (tmp / "deployments" / "spark-1.json").write_text(json.dumps({"schema_version": 99}) + "\n")
    assert run(node, health, state="status")["state"] == {}


def test_api_key_file_written_0600_and_removed_when_the_launch_reads_none(node, health):
    tmp, docker = node
    key = str(tmp / "api-key")
    res = run(node, health, action="start", launch=launch(members=["spark-1"]), api_key="sekrit", api_key_file=key)
    assert (tmp / "api-key").read_text() == "sekrit\n" and oct(os.stat(key).st_mode & 0o777) == "0o600"
    assert "sekrit" not in json.dumps(res)
    res = run(node, health, action="none", launch=launch(members=["spark-1"]), api_key="", api_key_file="")
    assert res["changed"] and not (tmp / "api-key").exists()


def test_a_start_reports_its_start_to_health_seconds_for_the_state_file(node, health, monkeypatch):
    # The benchmark's time estimate reads them from the state file (running.ready_seconds; issue 25 item 6).
    ticks = iter([1000.0, 1137.46])
    monkeypatch.setattr(mod.time, "monotonic", lambda: next(ticks))
    res = run(node, health, action="start", launch=launch(), hf_token="", autostart=None)
    assert res["health"] == "healthy" and res["ready_seconds"] == 137.5
    tmp, docker = node
    docker.start_behaviour = ["exit"]
    ticks = iter([0.0, 5.0])
    with pytest.raises(Failed) as failed:
        run(node, health, action="restart", launch=launch(port=8356), hf_token="", autostart=None)
    assert failed.value.result["health"] == "exited" and "ready_seconds" not in failed.value.result


def test_the_record_carries_the_bounded_recovery_settings(node, health):
    tmp, docker = node
    fields = dict(RECORD, max_failed_starts="3", backoff_initial=2, backoff_max=60, health_timeout=1800,
                  min_available_memory=4294967296, drop_caches="False", completion_probe_interval=120,
                  model="openai/gpt-oss-120b", api_key_file="")
    res = run(node, health, action="start", launch=launch(env={"HF_HUB_OFFLINE": "1"}), autostart=True,
              autostart_record=fields)
    assert res["autostart"] == "armed"
    rec = json.loads((tmp / "autostart.json").read_text())
    assert {k: rec[k] for k in ("max_failed_starts", "backoff_initial", "backoff_max", "health_timeout",
                                "min_available_memory", "drop_caches", "completion_probe_interval", "model",
                                "api_key_file")} == {
        "max_failed_starts": 3, "backoff_initial": 2, "backoff_max": 60, "health_timeout": 1800,
        "min_available_memory": 4294967296, "drop_caches": False, "completion_probe_interval": 120,
        "model": "openai/gpt-oss-120b", "api_key_file": ""}
    # Without them (a caller of an earlier version) the record has none: the supervisor's defaults apply.
    assert "max_failed_starts" not in _server.autostart_record(RECORD | {"state_file": "s"}, "sha", False)
    assert _server.autostart_record(dict(RECORD, state_file="s", drop_caches=True), "sha", False)["drop_caches"] is True


def test_an_earlier_versions_record_of_the_same_launch_is_kept_until_the_next_start(node, health):
    # A record written before bounded recovery (none of its fields) for the launch that runs: converging the upgraded
    # deployment changes nothing (molecule/server_faults' upgrade step); a start writes the full record.
    tmp, docker = node
    fields = dict(RECORD, max_failed_starts=5, backoff_initial=5, backoff_max=300, health_timeout=120,
                  min_available_memory=8589934592, drop_caches=False, completion_probe_interval=300,
                  model="m", api_key_file="")
    first = run(node, health, action="start", launch=launch(env={"HF_HUB_OFFLINE": "1"}), autostart=True,
                autostart_record=fields)
    assert first["autostart"] == "armed"
    full = json.loads((tmp / "autostart.json").read_text())
    earlier = dict((k, v) for k, v in full.items() if k not in _server.RECOVERY_FIELDS)
    (tmp / "autostart.json").write_text(_server.nice_json(earlier))
    again = run(node, health, action="none", launch=launch(env={"HF_HUB_OFFLINE": "1"}), autostart=True,
                autostart_record=fields)
    assert again["changed"] is False and again["autostart"] == "unchanged"
    assert json.loads((tmp / "autostart.json").read_text()) == earlier
    # Another launch (here: the fingerprint) is a new record, full.
    other = run(node, health, action="none", launch=launch(env={"HF_HUB_OFFLINE": "1"}), autostart=True,
                autostart_record=dict(fields, fingerprint="f" * 64))
    assert other["autostart"] == "armed"
    assert json.loads((tmp / "autostart.json").read_text())["max_failed_starts"] == 5


def test_a_record_before_the_liveness_probe_stands_while_the_wanted_values_are_the_defaults(node, health):
    # A record of 0.3.0+ (bounded recovery, no liveness fields) of the launch that runs: kept while the role asks for
    # the supervisor's defaults of the new fields (the same behaviour); another value is written at once.
    tmp, docker = node
    fields = dict(RECORD, max_failed_starts=5, backoff_initial=5, backoff_max=300, health_timeout=120,
                  min_available_memory=8589934592, drop_caches=False, completion_probe_interval=300,
                  model="m", api_key_file="", **_server.LIVENESS_DEFAULTS)
    run(node, health, action="start", launch=launch(env={"HF_HUB_OFFLINE": "1"}), autostart=True,
        autostart_record=fields)
    full = json.loads((tmp / "autostart.json").read_text())
    assert {k: full[k] for k in _server.LIVENESS_FIELDS} == _server.LIVENESS_DEFAULTS
    earlier = dict((k, v) for k, v in full.items() if k not in _server.LIVENESS_FIELDS)
    (tmp / "autostart.json").write_text(_server.nice_json(earlier))
    again = run(node, health, action="none", launch=launch(env={"HF_HUB_OFFLINE": "1"}), autostart=True,
                autostart_record=fields)
    assert again["changed"] is False and json.loads((tmp / "autostart.json").read_text()) == earlier
    other = run(node, health, action="none", launch=launch(env={"HF_HUB_OFFLINE": "1"}), autostart=True,
                autostart_record=dict(fields, liveness_interval=60))
    assert other["autostart"] == "armed"
    assert json.loads((tmp / "autostart.json").read_text())["liveness_interval"] == 60


def _module_of(node, health, **params):
    tmp, docker = node
    base = dict(state_dir=str(tmp), state_file=str(tmp / "deployments" / "spark-1.json"), local_url=health.url)
    base.update(params)
    module = FakeModule(base)
    return module, getattr(mod.Lifecycle(module, docker, sleep=lambda s: None), "started")()


def test_a_start_prints_the_supervisors_give_up_and_starts_the_boot_loop_count_again(node, health):
    tmp, docker = node
    entry = {"kind": "boot_loop", "key": "k", "at": "2026-12-07T21:00:00Z", "unstable_boots": ["a", "b", "c"],
             "reason": "the last 3 boots each started the server and it did not serve 600 s"}
    (tmp / "deployments" / "spark-1.json").write_text(json.dumps({"schema_version": 1, "supervisor_gave_up": entry}))
    (tmp / _server.GUARD_NAME).write_text(json.dumps({"schema_version": 1, "key": "k", "unstable_boots": ["a", "b"]}))
    module, res = _module_of(node, health, action="start", launch=launch(), autostart=True, autostart_record=RECORD)
    assert res["started"] and res["supervisor_gave_up"] == entry
    assert module.warnings == ["the supervisor gave up at 2026-12-07T21:00:00Z (boot_loop): the last 3 boots each "
                               "started the server and it did not serve 600 s; this start arms it again"]
    assert json.loads((tmp / _server.GUARD_NAME).read_text())["unstable_boots"] == []
    # A running server (action none) keeps its give-up; the deploy says so.
    (tmp / _server.GUARD_NAME).write_text(json.dumps({"schema_version": 1, "key": "k", "unstable_boots": ["a"]}))
    module, res = _module_of(node, health, action="none", launch=launch(), autostart=True, autostart_record=RECORD)
    assert res["supervisor_gave_up"] == entry and "left as it is" in module.warnings[0]
    assert json.loads((tmp / _server.GUARD_NAME).read_text())["unstable_boots"] == ["a"]
    # None recorded: no warning.
    (tmp / "deployments" / "spark-1.json").write_text(json.dumps({"schema_version": 1}))
    module, res = _module_of(node, health, action="none", launch=launch(), autostart=True, autostart_record=RECORD)
    assert res["supervisor_gave_up"] is None and not getattr(module, "warnings", [])


def test_liveness_defaults_are_the_supervisors():
    import importlib.util
    path = pathlib.Path(__file__).resolve().parents[4] / "roles/trtllm_container/files/specdec_supervisor.py"
    spec = importlib.util.spec_from_file_location("specdec_supervisor", str(path))
    sup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sup)
    assert {k: sup.RECORD_DEFAULTS[k] for k in _server.LIVENESS_FIELDS} == _server.LIVENESS_DEFAULTS


@pytest.mark.parametrize("ending", ["\n", ""])
def test_status_reads_a_state_file_with_or_without_a_final_newline(tmp_path, ending):
    """Server.status runs its real sh look; a state file written without a final newline is still read."""
    import subprocess
    docker = tmp_path / "docker"  # `docker exec CONTAINER ARGV...` -> ARGV here
    docker.write_text('#!/bin/sh\nshift 2\nexec "$@"\n')
    docker.chmod(0o755)
    (tmp_path / _server.SCRIPT_NAME).write_text('[ "$1" = status ] && exit 0\nexit 1\n')
    state = {"schema_version": _server.STATE_SCHEMA, "deployment_id": "pair-a"}
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(state) + ending)

    def run(argv, env=None):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr

    got, running, rc, _err = _server.Server(run, "c", str(tmp_path), docker=str(docker)).status(str(state_file))
    assert (got, running, rc) == (state, True, 0)


# ------------------------------------------------------------------------------------------- vLLM headless worker
def worker_launch():
    return {"argv": ["vllm", "serve", "m", "--nnodes", "2", "--node-rank", "1", "--master-addr", "192.168.100.10",
                     "--master-port", "29501", "--headless"], "env": {"HF_HUB_OFFLINE": "1"},
            "members": ["spark-1", "spark-2"], "port": 8000, "engine": "vllm", "node_rank": 1,
            "rendezvous": "tcp://192.168.100.10:29501"}


def test_worker_start_checks_its_process_not_http_and_arms_with_the_rendezvous(node, health):
    # A headless worker serves no /health (health.ok stays False): started, running one interval later, armed.
    tmp, docker = node
    rec = dict(RECORD, health_url="tcp://192.168.100.10:29501")
    docker.start_behaviour = ["hang"]
    res = run(node, health, action="restart", launch=worker_launch(), autostart=True, autostart_record=rec)
    assert res["started"] and res["health"] == "running" and res["running"] and res["autostart"] == "armed"
    script = (tmp / "server.sh").read_text()
    assert "nohup setsid vllm serve m --nnodes 2 --node-rank 1" in script and "--headless" in script
    assert json.loads((tmp / "autostart.json").read_text())["health_url"] == "tcp://192.168.100.10:29501"
    # action none: checks that it runs (server.sh status), no HTTP.
    res = run(node, health, action="none", launch=worker_launch(), autostart=True, autostart_record=rec)
    assert res["health"] == "running" and res["changed"] is False


def test_worker_that_exits_or_is_gone_fails_in_one_line(node, health):
    tmp, docker = node
    docker.start_behaviour = ["exit"]
    with pytest.raises(Failed) as err:
        run(node, health, action="start", launch=worker_launch())
    assert err.value.result["msg"].startswith("The headless vLLM worker exited right after its start")
    with pytest.raises(Failed) as err:
        run(node, health, action="none", launch=worker_launch())
    assert err.value.result["msg"].startswith("The headless vLLM worker does not run in trtllm-multinode")


PIP_NCCL = "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"


@pytest.mark.parametrize("maps, members, source, warned", [
    (PIP_NCCL + "\n", ["spark-1", "spark-2"], "pip", True),
    (PIP_NCCL + "\n", ["spark-1"], "pip", False),
    ("/usr/lib/aarch64-linux-gnu/libnccl.so.2.28.3\n", ["spark-1", "spark-2"], "system", False),
    ("", ["spark-1", "spark-2"], "none", False)])
def test_vllm_head_records_which_nccl_its_processes_loaded(node, health, maps, members, source, warned):
    tmp, docker = node
    docker.nccl_maps = maps
    spec = dict(launch(members=members), engine="vllm")
    module = FakeModule(dict(state_dir=str(tmp), state_file=str(tmp / "deployments" / "spark-1.json"),
                             local_url=health.url, action="start", launch=spec))
    res = mod.Lifecycle(module, docker, sleep=lambda s: None).started()
    assert res["health"] == "healthy" and res["nccl_library"]["source"] == source
    assert docker.nccl_probes == [str(tmp / "server.pid")]
    assert bool(getattr(module, "warnings", [])) is warned
    if warned:
        assert "vllm-project/vllm#41725, #42354" in module.warnings[0] and PIP_NCCL in module.warnings[0]


def test_trtllm_start_has_no_nccl_probe(node, health):
    tmp, docker = node
    res = run(node, health, action="start", launch=launch())
    assert "nccl_library" not in res and not hasattr(docker, "nccl_probes")


def test_nccl_probe_reads_the_maps_of_the_servers_process_group(tmp_path):
    # NCCL_PROBE in a real shell against a real process group: a grandchild (same group as the setsid leader) maps a file
    # named libnccl.so.2 (mmap puts its path in /proc/<pid>/maps); a process outside the group maps another.
    import subprocess
    import sys
    import time
    lib = tmp_path / "site-packages" / "nvidia" / "nccl" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2").write_bytes(b"x" * 4096)
    other = tmp_path / "libnccl-other.so"
    other.write_bytes(b"y" * 4096)
    holder = ("import mmap,sys,time; f=open(sys.argv[1],'rb'); m=mmap.mmap(f.fileno(),0,access=mmap.ACCESS_READ); "
              "open(sys.argv[2],'w').write('x'); time.sleep(60)")
    child = ("import subprocess,sys; subprocess.run([sys.executable,'-c',sys.argv[1],sys.argv[2],sys.argv[3]])")
    ready1, ready2 = tmp_path / "r1", tmp_path / "r2"
    # Leader -> child -> holder: the holder's parent is not the leader (the group, not the parent, counts).
    mid = ("import subprocess,sys; subprocess.run([sys.executable,'-c',sys.argv[1],sys.argv[2],sys.argv[3],"
           "sys.argv[4]])")
    group = subprocess.Popen([sys.executable, "-c", mid, child, holder, str(lib / "libnccl.so.2"), str(ready1)],
                             start_new_session=True)
    outside = subprocess.Popen([sys.executable, "-c", holder, str(other), str(ready2)], start_new_session=True)
    try:
        for _attempt in range(100):
            if ready1.exists() and ready2.exists():
                break
            time.sleep(0.05)
        (tmp_path / "server.pid").write_text("%d\n" % group.pid)
        out = subprocess.run(["sh", "-c", _server.NCCL_PROBE, str(tmp_path / "server.pid")], capture_output=True,
                             text=True, check=True).stdout
        assert out.splitlines() == [str(lib / "libnccl.so.2")]
        assert _server.nccl_library(out, ["a", "b"])["source"] == "pip"
        # No pid file: nothing, rc 0.
        assert subprocess.run(["sh", "-c", _server.NCCL_PROBE, str(tmp_path / "none.pid")], capture_output=True,
                              text=True, check=True).stdout == ""
    finally:
        for proc in (group, outside):
            os.killpg(proc.pid, 9)
            proc.wait()
