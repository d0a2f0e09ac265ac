"""Shared fixtures. Engines are slow to load, so each is loaded once per test run (session scope):

* ``stack``: PostgreSQL (embedded, in a temporary data dir) + VAD + ASR + embedder + TTS, with the
  sample data loaded (the knowledge base, the support tools' orders: app/rag/sample.py);
* ``llm``: the in-process vLLM engine (``enforce_eager``: ~30 s start instead of 80-130 s).

Model files come from the user's normal models folder (prepared once, reused across runs).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import pytest_asyncio

from sub250.config import Settings
from sub250.stack import Stack

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def real_audio() -> Path:
    """Real recordings of English speech with reference transcripts (``transcripts.json``), in the
    repository: sources and licences in ``tests/data/audio/README.md``."""
    return REPO / "tests" / "data" / "audio"


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    home = tmp_path_factory.mktemp("sub250-home")
    user = Settings.from_env()
    return Settings.from_env(home=home, models_home=str(user.models_dir), database_url="",
                             llm_enforce_eager="true", profile="cpu-base")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def stack(settings: Settings):
    from sub250.rag.sample import load_sample_if_empty

    st = Stack.from_settings(settings)
    await st.start(("db", "vad", "asr", "embedder", "tts", "turn"))
    # as a first `serve` does: the sample knowledge base and the support tools' sample orders
    await load_sample_if_empty(st.store, st.embedder, model_id=st.embedding_model_id)
    await st.warm_answers()  # as `serve` does: the answers' sentences, the reranker's titles, the KB's words
    yield st
    await st.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def llm(settings: Settings):
    st = Stack.from_settings(settings)
    await st.start(("llm",))
    yield st.llm
    await st.close()


TEST_KEY = "sk-sub250-test-0123456789"
TEST_ORIGIN = "http://127.0.0.1:9999"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def server(stack, llm):
    """One real server for the whole run: every engine, a real PostgreSQL, API keys and limits on."""
    from sub250.gateway import ApiKeys, GatewayLimits
    from sub250.server import Server

    stack.llm = llm
    srv = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]),
                 limits=GatewayLimits(max_sessions_per_key=4, max_event_bytes=256 * 1024, origins=(TEST_ORIGIN,)))
    await srv.listen()
    srv.attach(stack)
    yield srv
    await srv.close()


@pytest.fixture(scope="session")
def ws_url(server) -> str:
    return f"ws://127.0.0.1:{server.port}/v1/realtime"


@pytest.fixture(scope="session")
def small_corpus(speak, real_audio, tmp_path_factory) -> Path:
    """A replay manifest of three questions (two synthesized, one real recording), for the load scripts' tests."""
    import json

    manifest = [
        {"id": "filter", "path": str(speak("How often do I need to buy a new filter?")),
         "reference": "How often do I need to buy a new filter?", "kind": "synthetic"},
        {"id": "motor", "path": str(speak("How many years is the motor guaranteed for?")),
         "reference": "How many years is the motor guaranteed for?", "kind": "synthetic"},
        {"id": "goforward", "path": str(real_audio / "goforward.wav"), "reference": "go forward ten meters",
         "kind": "real"},
    ]
    path = tmp_path_factory.mktemp("corpus") / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


@pytest.fixture(scope="session")
def speak(stack, tmp_path_factory):
    """Text -> a WAV of it spoken by the Piper voice (22.05 kHz), with 300 ms of silence before: rendered with
    no noise (``PiperTTS.render``), so a test hears the same audio on every run. The replay corpus's writer
    (scripts/bench/corpus.py), which keeps one file per text."""
    from scripts.bench.corpus import synthesize_texts

    folder = tmp_path_factory.mktemp("speech")

    def make(text: str) -> Path:
        return synthesize_texts([("q", text)], folder, stack.tts)[0].path

    return make


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def vllm_server(settings, tmp_path_factory):
    """One vLLM OpenAI-compatible server (a subprocess) for the run, with the default model and the engine
    settings of the in-process one (app/fleet/vllm_server.py): the remote backend's tests and the fleet's share
    it. Yields its base URL (``http://127.0.0.1:PORT``)."""
    from sub250.fleet import vllm_server

    child, url = await vllm_server.start("cpu-base", settings.models_dir, cache_dir=settings.vllm_cache_dir,
                                         log_path=tmp_path_factory.mktemp("vllm-server") / "vllm.log")
    try:
        yield url
    finally:
        await child.stop()
