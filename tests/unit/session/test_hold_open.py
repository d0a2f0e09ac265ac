"""A pause whose words end open ("how far from the") is held past the turn detection's silence
(``[vad] hold_open_ms``): the real session, endpointer and speculation around fake engines."""

from dataclasses import replace
from pathlib import Path

import pytest

from sub250.errors import ConfigError
from sub250.profiles import Profile
from sub250.protocol import parse_client_event
from sub250.session.tuning import PipelineTuning
from tests.unit.session.fakes import FakeASR, feed, make_session, silence, speech, wait_for, wait_until
from tests.unit.session.test_semantic_vad import SEMANTIC, FakeEndOfTurn

OPEN, CLOSED = "How far from the", "How far from the wall?"


def _session(texts, hold_open_ms=1500):
    session, t, stack = make_session(speculative=True)
    stack.asr = FakeASR(texts=texts)
    # no partials: every transcription is a held reply's, one per pause, in order
    session.tuning = replace(session.tuning, hold_open_ms=hold_open_ms, partials=False)
    return session, t, stack


async def _pause_heard(session):
    """Silence enough for the reply held at the pause to have its transcript (the fake ASR is instant)."""
    await feed(session, silence(0.2))
    await wait_until(lambda: session.recognition.speculation.held is not None and session.recognition.speculation.held.question is not None,
                     what="the held reply's transcript")


async def test_open_words_hold_the_pause_until_hold_open_ms():
    session, t, _ = _session([OPEN])
    await feed(session, speech(0.8))
    await _pause_heard(session)
    await feed(session, silence(0.6))  # 0.8 s: past server_vad's 500 ms
    assert "input_audio_buffer.committed" not in t.types()
    assert session.stats.pauses_held_open == 1 and session.recognition.detector.holding
    await feed(session, silence(0.8))  # 1.6 s in all
    await wait_for(t, "input_audio_buffer.committed")
    assert (await wait_for(t, "response.done"))[0]["response"]["status"] == "completed"
    assert session.stats.speculative_adopted == 1, "the reply held at the pause answers"
    assert session.stats.pauses_held_open == 1


@pytest.mark.parametrize(("text", "hold_open_ms"), [
    (CLOSED, 1500),  # words that may end a turn
    (OPEN, 0),       # the hold off (the default tuning): every pause ends at server_vad's silence
])
async def test_the_turn_commits_at_the_silence(text, hold_open_ms):
    session, t, _ = _session([text], hold_open_ms=hold_open_ms)
    await feed(session, speech(0.8))
    await _pause_heard(session)
    await feed(session, silence(0.4))
    await wait_for(t, "input_audio_buffer.committed")
    assert session.stats.pauses_held_open == 0


async def test_the_caller_goes_on_and_the_next_pause_ends_at_the_usual_silence():
    session, t, stack = _session([OPEN, CLOSED])
    await feed(session, speech(0.8))
    await _pause_heard(session)
    await feed(session, silence(0.6))
    assert session.recognition.detector.holding
    await feed(session, speech(0.6))  # "...wall?": the held reply is thrown away
    assert not session.recognition.detector.holding
    await _pause_heard(session)
    await feed(session, silence(0.4))
    await wait_for(t, "input_audio_buffer.committed")
    item = (await wait_for(t, "conversation.item.input_audio_transcription.completed"))[0]
    assert item["transcript"] == CLOSED
    assert session.stats.speculative_discarded == 1 and session.stats.pauses_held_open == 1


@pytest.mark.parametrize(("text", "held"), [(CLOSED, False), (OPEN, True)])
async def test_words_not_yet_transcribed_hold_the_pause_until_they_are_known(text, held):
    import threading

    gate = threading.Event()
    session, t, stack = _session([text])
    stack.asr.gate = gate  # a busy engine: the held reply's words come after server_vad's 500 ms
    await feed(session, speech(0.8) + silence(0.6))
    await wait_until(lambda: stack.asr.entered.is_set(), what="the held reply's transcription")
    assert "input_audio_buffer.committed" not in t.types() and session.recognition.detector.holding
    gate.set()
    if not held:  # words that may end a turn: committed as soon as they are known, no more silence needed
        await wait_for(t, "input_audio_buffer.committed")
        assert session.stats.pauses_held_open == 0
        return
    await wait_until(lambda: session.stats.pauses_held_open == 1, what="the open words' hold")
    assert "input_audio_buffer.committed" not in t.types()
    await feed(session, silence(1.0))  # 1.6 s in all: past the 1.5 s hold
    await wait_for(t, "input_audio_buffer.committed")


async def test_semantic_vad_open_words_veto_the_model_until_the_cap():
    session, t, stack = _session([OPEN])
    stack.end_of_turn = FakeEndOfTurn(0.95)
    await session.handle(parse_client_event(SEMANTIC % "high"), 0)  # asked at 160 ms, cap 1 s
    await feed(session, speech(0.8) + silence(0.5))
    await wait_until(lambda: session.stats.pauses_held_open == 1, what="the model's 'complete' vetoed")
    assert "input_audio_buffer.committed" not in t.types() and len(stack.end_of_turn.calls) == 1
    await feed(session, silence(0.6))
    await wait_for(t, "input_audio_buffer.committed")


async def test_semantic_vad_words_that_may_end_a_turn_let_the_model_end_it():
    session, t, stack = _session([CLOSED])
    stack.end_of_turn = FakeEndOfTurn(0.95)
    await session.handle(parse_client_event(SEMANTIC % "high"), 0)
    await feed(session, speech(0.8) + silence(0.3))
    await wait_for(t, "input_audio_buffer.committed")
    assert session.stats.pauses_held_open == 0


@pytest.mark.parametrize("value", [-1, 60_001, 1.5, "1500", True, None])
def test_hold_open_ms_must_be_a_whole_number_of_ms(value):
    profile = Profile(name="t", description="", path=Path("t.toml"), stages={"vad": {"hold_open_ms": value}})
    with pytest.raises(ConfigError, match="hold_open_ms"):
        PipelineTuning.from_profile(profile)


def test_hold_open_ms_is_read_from_the_profile():
    profile = Profile(name="t", description="", path=Path("t.toml"), stages={"vad": {"hold_open_ms": 1500}})
    assert PipelineTuning.from_profile(profile).hold_open_ms == 1500
    bare = Profile(name="t", description="", path=Path("t.toml"), stages={})
    assert PipelineTuning.from_profile(bare).hold_open_ms == 0
