"""The choice answer mode end to end (cpu-base-choice: a second server over the test server's engines, its
sessions tuned by that profile): the real LLM, under vLLM's choice grammar, answers with the best extract or the
decline - nothing else - and the turn's report has both paths beside the budget."""

from dataclasses import replace

import pytest
import pytest_asyncio

from sub250.rag.about import read_about
from sub250.rag.kb import SAMPLE_KB
from tests.conftest import TEST_KEY, TEST_ORIGIN
from tests.e2e.test_answers import ask

pytestmark = pytest.mark.engines


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def choice_url(server):
    from scripts.bench import lab
    from sub250.gateway import ApiKeys, GatewayLimits
    from sub250.profiles import load_profile
    from sub250.server import Server

    srv = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(origins=(TEST_ORIGIN,)))
    await srv.listen()
    srv.attach(replace(server.stack, profile=load_profile(lab.profile("cpu-base-choice"))))
    yield f"ws://127.0.0.1:{srv.port}/v1/realtime"
    await srv.close()


async def test_the_llm_chooses_the_answer_and_its_tokens_are_the_knowledge_base_s_words(choice_url, ws_url):
    extractive = await ask(ws_url, "How often should I replace the filter?", timeout=90)
    result = await ask(choice_url, "How often should I replace the filter?", audio=True, timeout=90)
    raw = result.latency.raw
    assert result.status == "completed" and raw["answer"]["path"] == "choice", raw["answer"]
    decline = read_about(SAMPLE_KB).decline_text
    assert result.reply in (extractive.reply, decline)  # one of the two candidates, whole
    assert raw["answer"]["chosen"] in (0, 1) and raw["answer"]["candidates"] == 2
    assert raw["answer"]["choice_tokens"] >= 1 and raw["tokens"] == raw["answer"]["choice_tokens"]
    assert "llm_submit" in raw["marks"] and raw["spans"]["prefill"] is not None  # ttft is an LLM token's
    assert raw["beside"]["extract"] is not None and raw["beside"]["llm_choice"] >= raw["spans"]["prefill"] * 0.5
    assert result.audio_seconds > 1.0
    print("choice:", raw["answer"], "prefill", raw["spans"]["prefill"], "llm_choice", raw["beside"]["llm_choice"])


async def test_the_gate_still_declines_without_the_llm(choice_url):
    result = await ask(choice_url, "Who won the football world cup in 2018?", timeout=90)
    raw = result.latency.raw
    assert raw["answer"]["path"] == "declined" and "llm_submit" not in raw["marks"]
