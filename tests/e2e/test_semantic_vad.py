"""semantic_vad end to end: the real smart-turn model ends a spoken question at its first pause, sooner than
the eagerness' cap, and the turn completes as any."""

import pytest
from prometheus_client import REGISTRY

from sub250.sdk import RealtimeClient
from sub250.session.turn_detection import EAGERNESS

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"


async def test_a_finished_question_ends_at_its_pause_under_semantic_vad(ws_url, speak):
    question = speak("How much is the yearly Care+ membership?")
    calls_before = REGISTRY.get_sample_value("sub250_end_of_turn_ms_count") or 0.0
    async with RealtimeClient(ws_url, TEST_KEY) as client:
        updated = await client.update_session(
            audio={"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "high"}}})
        assert updated.data["session"]["audio"]["input"]["turn_detection"]["type"] == "semantic_vad"
        await client.send_wav(str(question), realtime=True, silence_after_ms=1500)
        result = await client.collect_turn(timeout=90)
    assert result.status == "completed" and "care" in result.transcript.lower(), result.transcript
    assert (REGISTRY.get_sample_value("sub250_end_of_turn_ms_count") or 0.0) > calls_before, "the model was asked"
    delay = result.latency.beside["endpoint_delay"]
    cap = EAGERNESS["high"].cap_ms
    print(f"semantic_vad high: endpoint_delay {delay:.0f} ms (cap {cap} ms)")
    assert delay < cap, "the model called the question complete: the turn ended before the cap"
