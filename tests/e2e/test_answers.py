"""How the real server answers (app/answer, the default profile's [answer]): an out-of-scope question gets the
fixed reply without an LLM call, an in-scope one is answered from the passage, and the turn report says
which path answered."""

import pytest

from sub250.rag.about import read_about
from sub250.rag.kb import SAMPLE_KB
from sub250.sdk import RealtimeClient

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"
#: The decline of the sample knowledge base: its about.toml's scope (stored at ingest), not a text in the code.
DECLINE_TEXT = read_about(SAMPLE_KB).decline_text


async def ask(ws_url, question, *, audio=False, timeout=60):
    """One typed question in a fresh session: the turn's result (text only unless ``audio``)."""
    async with RealtimeClient(ws_url, TEST_KEY) as client:
        if not audio:
            await client.update_session(output_modalities=["text"])
        await client.send_text(question)
        return await client.collect_turn(timeout=timeout)


async def test_an_out_of_scope_question_is_declined_without_the_llm(ws_url, stack):
    result = await ask(ws_url, "Who won the football world cup in 2018?", audio=True)
    assert result.status == "completed" and result.reply == DECLINE_TEXT
    assert result.audio_seconds > 1.0  # spoken, like any reply
    raw = result.latency.raw
    assert raw["answer"]["path"] == "declined"
    assert raw["answer"]["top_score"] < stack.profile.stage("answer")["min_score"]
    assert "llm_submit" not in raw["marks"] and raw["spans"]["prefill"] is None
    assert raw["spans"]["ttft"] is not None and raw["final"]


async def test_an_in_scope_question_is_answered_with_its_fact_and_the_path_is_reported(ws_url, stack):
    result = await ask(ws_url, "How much does the Halden Aero cost?")
    raw = result.latency.raw
    assert result.status == "completed" and result.reply != DECLINE_TEXT
    assert raw["answer"]["path"] in ("extractive", "choice", "generative")
    assert raw["answer"]["mode"] == stack.profile.stage("answer").get("mode", "generative")
    assert raw["answer"]["top_score"] >= stack.profile.stage("answer")["min_score"]
    assert result.sources and result.sources[0]["title"] == "Halden Aero at a Glance"


async def test_a_question_about_a_subject_the_kb_never_mentions_is_held_to_the_stricter_gate(ws_url, stack):
    answer = stack.profile.stage("answer")
    result = await ask(ws_url, "Does Halden offer a student discount?")
    raw = result.latency.raw
    assert result.status == "completed" and result.reply == DECLINE_TEXT
    assert raw["answer"]["path"] == "declined" and "student" in raw["answer"]["unknown_words"]
    # close enough for a familiar question, not for this one
    assert answer["min_score"] <= raw["answer"]["top_score"] < answer["min_score_unfamiliar"]


async def test_the_company_and_its_scope_come_from_the_knowledge_base_s_about(ws_url, stack):
    about = read_about(SAMPLE_KB)
    assert about.company == "Halden Labs" and "Aero" in about.scope
    assert stack.about == about  # read back from the database the ingest stored it in
    async with RealtimeClient(ws_url, TEST_KEY) as client:
        created = client.session
        assert created["instructions"].startswith("You are the voice support agent of Halden Labs.")
