"""semantic_vad: the end-of-turn model is asked once a pause; "complete" ends the turn then, "not yet" waits
for the cap (a fake model around the real session, endpointer and timings)."""

from sub250.engine import ThreadedEngine
from sub250.protocol import parse_client_event
from sub250.session.turn_detection import EAGERNESS
from tests.unit.session.fakes import feed, make_session, silence, speech, wait_for


class FakeEndOfTurn(ThreadedEngine):
    def __init__(self, p):
        super().__init__()
        self.p, self.calls = p, []

    def probability(self, audio):
        self.calls.append(audio.size)
        return self.p


SEMANTIC = '{"type": "session.update", "session": {"audio": {"input": {"turn_detection": ' \
           '{"type": "semantic_vad", "eagerness": "%s"}}}}}'


async def _semantic_session(p, eagerness="high"):
    session, t, stack = make_session()
    stack.end_of_turn = FakeEndOfTurn(p)
    await session.handle(parse_client_event(SEMANTIC % eagerness), 0)
    assert t.types()[-1] == "session.updated", t.sent[-1]
    assert t.sent[-1]["session"]["audio"]["input"]["turn_detection"] == {
        "type": "semantic_vad", "eagerness": eagerness, "create_response": True, "interrupt_response": True}
    return session, t, stack


async def test_a_complete_turn_ends_at_the_first_pause_not_at_the_cap():
    session, t, stack = await _semantic_session(0.9)
    timing = EAGERNESS["high"]
    await feed(session, speech(0.8) + silence(timing.ask_after_ms / 1000 + 0.15))
    await wait_for(t, "input_audio_buffer.committed")
    assert len(stack.end_of_turn.calls) == 1 and stack.end_of_turn.calls[0] >= 0.8 * 16000
    assert session.stats.end_of_turn_calls == 1
    assert (await wait_for(t, "response.done"))[0]["response"]["status"] == "completed"


async def test_an_unfinished_turn_waits_for_the_cap():
    session, t, stack = await _semantic_session(0.1)
    timing = EAGERNESS["high"]
    await feed(session, speech(0.8) + silence(0.6))
    assert "input_audio_buffer.committed" not in t.types() and len(stack.end_of_turn.calls) == 1
    await feed(session, silence(timing.cap_ms / 1000 - 0.4))
    await wait_for(t, "input_audio_buffer.committed")
    assert len(stack.end_of_turn.calls) == 1, "once a pause"


async def test_the_threshold_follows_eagerness():
    session, t, stack = await _semantic_session(0.6, eagerness="low")  # below low's 0.7
    await feed(session, speech(0.8) + silence(0.6))
    assert "input_audio_buffer.committed" not in t.types()
    session, t, stack = await _semantic_session(0.6, eagerness="medium")  # above medium's 0.5
    await feed(session, speech(0.8) + silence(0.4))
    await wait_for(t, "input_audio_buffer.committed")


async def test_semantic_vad_is_refused_without_an_end_of_turn_model():
    session, t, stack = make_session()
    await session.handle(parse_client_event(SEMANTIC % "auto"), 0)
    err = t.sent[-1]
    assert err["type"] == "error" and err["error"]["param"] == "session.audio.input.turn_detection.type"
    assert session.config.turn_detection.type == "server_vad", "nothing changed"
