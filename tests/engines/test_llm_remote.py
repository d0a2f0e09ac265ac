"""The remote backend: a real vLLM OpenAI-compatible server (subprocess, the run's shared ``vllm_server``), streamed
through the same interface."""

import asyncio
import uuid

import pytest

from sub250.errors import EngineError
from sub250.llm import LLMRequest
from sub250.llm.openai_remote import OpenAIRemoteEngine

pytestmark = pytest.mark.engines


async def test_remote_vllm_streams_through_the_engine_interface(vllm_server, settings):
    eng = OpenAIRemoteEngine({"backend": "openai", "base_url": f"{vllm_server}/v1",
                              "served_name": "smollm2-135m-instruct"}, settings)
    await eng.start()
    msgs = [{"role": "user", "content": "Say hello in five words."}]
    deltas = [d async for d in eng.stream(LLMRequest(f"r-{uuid.uuid4().hex}", msgs, max_tokens=16))]
    text = "".join(d.text for d in deltas)
    assert text.strip() and len(deltas) >= 3
    final = deltas[-1]
    assert final.finished and final.prompt_tokens and final.num_tokens > 0  # usage arrives at the end
    await eng.close()


async def test_remote_vllm_honours_the_choice_grammar(vllm_server, settings):
    """The ``choice`` answer mode through a vLLM server: the grammar goes as vLLM's ``structured_outputs``."""
    from tests.engines.test_llm import CHOICE_PROMPT, CHOICES, COPY_PROMPT

    eng = OpenAIRemoteEngine({"base_url": f"{vllm_server}/v1", "served_name": "smollm2-135m-instruct"}, settings)
    await eng.start()
    try:
        for msgs in (CHOICE_PROMPT, COPY_PROMPT):
            text = "".join([d.text async for d in eng.stream(LLMRequest(f"rc-{uuid.uuid4().hex}", msgs, max_tokens=40,
                                                                        choice=CHOICES))])
            assert text in CHOICES, text
    finally:
        await eng.close()


async def test_remote_abort_closes_the_stream(vllm_server, settings):
    eng = OpenAIRemoteEngine({"base_url": f"{vllm_server}/v1", "served_name": "smollm2-135m-instruct"}, settings)
    await eng.start()
    agen = eng.stream(LLMRequest("abort-1", [{"role": "user", "content": "Count to one hundred."}], max_tokens=300))
    await agen.__anext__()
    await agen.aclose()
    assert "abort-1" not in eng._streams
    await eng.close()


async def test_remote_errors_name_the_problem(vllm_server, settings):
    wrong = OpenAIRemoteEngine({"base_url": f"{vllm_server}/v1", "served_name": "no-such-model"}, settings)
    with pytest.raises(EngineError) as err:
        await wrong.start()
    assert "smollm2-135m-instruct" in str(err.value)
    dead = OpenAIRemoteEngine({"base_url": "http://127.0.0.1:1/v1", "served_name": "x"}, settings)
    with pytest.raises(EngineError) as err:
        await asyncio.wait_for(dead.start(), 30)
    assert "does not answer" in str(err.value)
