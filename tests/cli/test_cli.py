"""The command line, as a user runs it: clear errors, a working `serve`, and `doctor`."""

import ctypes.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _env(settings, **extra):
    env = dict(os.environ)
    env.update({
        "SUB250_HOME": str(settings.home),
        "SUB250_MODELS_HOME": str(settings.models_dir),
        "SUB250_LLM_ENFORCE_EAGER": "true",
        "PYTHONUNBUFFERED": "1",
    })
    env.pop("DATABASE_URL", None)
    env.pop("SUB250_DATABASE_URL", None)
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args, env, timeout=120):
    return subprocess.run([sys.executable, "-m", "sub250", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_models_list_names_every_profile(settings):
    r = run_cli("models", "list", env=_env(settings))
    assert r.returncode == 0
    for name in ("cpu-base", "cpu-gemma", "gpu-8b", "remote-vllm"):
        assert name in r.stdout


def test_occupied_port_is_one_clear_message(settings):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_cli("serve", "--port", str(port), env=_env(settings))
    assert r.returncode == 2
    assert f"port {port}" in r.stderr and "already in use" in r.stderr and "fix:" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_profile_is_one_clear_message(settings):
    r = run_cli("--profile", "nope", "models", "prepare", env=_env(settings))
    assert r.returncode == 2 and "unknown model profile" in r.stderr and "Traceback" not in r.stderr


def test_unreachable_database_url_is_one_clear_message(settings):
    r = run_cli("ingest", env=_env(settings, DATABASE_URL="postgresql://u:pw@127.0.0.1:1/db"))
    assert r.returncode == 2
    assert "cannot reach PostgreSQL" in r.stderr and "Traceback" not in r.stderr and ":pw@" not in r.stderr


def test_ingest_command_is_idempotent(settings, tmp_path):
    env = _env(settings, SUB250_HOME=str(tmp_path / "home"))
    first = run_cli("ingest", str(REPO / "kb"), env=env)
    assert first.returncode == 0, first.stderr
    assert "chunks in the store" in first.stdout
    again = run_cli("ingest", str(REPO / "kb"), env=env)
    assert again.returncode == 0 and "ingested 0 documents" in again.stdout and "6 unchanged" in again.stdout


def test_ingest_without_a_folder_loads_the_sample_into_an_empty_database_only(settings, tmp_path):
    """compose's `ingest --sample-if-empty` at every `up` (the bare `ingest` does the same)."""
    env = _env(settings, SUB250_HOME=str(tmp_path / "home"))
    first = run_cli("ingest", "--sample-if-empty", env=env)
    assert first.returncode == 0, first.stderr
    assert "sample data loaded into an empty database" in first.stdout and "10 support.orders rows" in first.stdout
    again = run_cli("ingest", env=env)
    assert again.returncode == 0, again.stderr
    assert "sample data skipped: the database holds 6 document(s)" in again.stdout and "ingested" not in again.stdout


def test_sample_if_empty_with_a_folder_is_one_clear_message(settings):
    r = run_cli("ingest", str(REPO / "kb"), "--sample-if-empty", env=_env(settings))
    assert r.returncode == 2 and "--sample-if-empty loads the sample knowledge base" in r.stderr
    assert "Traceback" not in r.stderr
    r = run_cli("ingest", "--prune", env=_env(settings))
    assert r.returncode == 2 and "--prune and --force need the folder" in r.stderr


@pytest.mark.engines
def test_serve_starts_ingests_reports_ready_and_stops(settings, tmp_path):
    port = _free_port()
    env = _env(settings, SUB250_HOME=str(tmp_path / "home"))
    proc = subprocess.Popen([sys.executable, "-m", "sub250", "serve", "--port", str(port)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out: list[str] = []
    loaded = threading.Event()
    probes: list[tuple[float, object]] = []  # (seconds, status or the error) of each /healthz while the LLM loads

    def probe_health() -> None:  # the event loop must answer while vLLM imports, starts its engine and warms up
        while not loaded.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as resp:
                    result: object = (resp.status, json.load(resp)["status"])
            except Exception as exc:  # noqa: BLE001 - recorded and asserted on below
                result = exc
            if not loaded.is_set():
                probes.append((time.monotonic() - t0, result))
            loaded.wait(0.5)

    prober = threading.Thread(target=probe_health, daemon=True)
    try:
        deadline = time.monotonic() + 300
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            out.append(line)
            if "loading llm" in line and not prober.is_alive():
                prober.start()
            if line.startswith("ready in"):
                loaded.set()
            if line.startswith("demo page"):
                ready = True
                break
        assert ready, "".join(out[-40:])
        prober.join(15)
        assert len(probes) >= 3, f"the LLM loaded too fast to probe: {probes}"
        assert all(result in ((200, "starting"), (200, "ready")) and seconds < 10 for seconds, result in probes), probes
        assert any("first run: ingesting the sample knowledge base" in l for l in out)
        # the loaded engines' objects frozen, the cyclic garbage collected on a timer (app/garbage.py)
        assert any("loaded objects frozen; cyclic garbage collected every 30 s" in l for l in out), "".join(out)
        assert any(f"http://127.0.0.1:{port}" in l for l in out)
        page_line = next(line for line in out if line.startswith("demo page"))
        assert f"http://127.0.0.1:{port}/#key=sk-sub250-" in page_line  # the URL a newcomer opens
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
            assert resp.headers["Content-Type"].startswith("text/html") and b"sub250" in resp.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            # serve restarted itself under jemalloc when the library is installed (same PID)
            allocator = "jemalloc" if ctypes.util.find_library("jemalloc") else "glibc"
            assert json.load(resp) == {"status": "ready", "replica": socket.gethostname(), "profile": "cpu-base",
                                       "allocator": allocator, "webrtc_calls": 0}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            assert resp.status == 200 and resp.headers["X-Sub250-Replica"] == socket.gethostname()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            assert resp.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=60)
            out.append(rest)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode == 0
    assert any("drained in" in line and "0 cut short" in line for line in out), "".join(out[-20:])


@pytest.mark.engines
def test_doctor_loads_and_times_every_engine(settings, tmp_path):
    r = run_cli("doctor", env=_env(settings, SUB250_HOME=str(tmp_path / "home")), timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for stage in ("db", "vad", "embedder", "tts", "asr", "llm"):
        line = next(l for l in r.stdout.splitlines() if l.startswith(stage + " "))
        assert "FAILED" not in line
    assert "PostgreSQL 18" in r.stdout and "pgvector" in r.stdout and "vllm 0.32" in r.stdout
    assert "doctor: every engine works" in r.stdout


def test_doctor_names_what_failed(settings, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('extends = "cpu-base"\n[asr]\nsource = "path:/nonexistent/whisper"\n'
                   '[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n')
    r = run_cli("--profile", str(bad), "doctor", env=_env(settings, SUB250_HOME=str(tmp_path / "home")))
    assert r.returncode == 1
    assert "FAILED: asr, llm" in r.stdout
    assert "/nonexistent/whisper" in r.stdout
