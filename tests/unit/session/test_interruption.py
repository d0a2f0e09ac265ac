"""False interruptions: the sans-I/O check (what a transcript means, when to check), and the session's paths
with fakes: a cough pauses and resumes the reply, unseen by the client; words cancel it as a barge-in."""

import asyncio

import pytest

from sub250.asr.base import Need, Transcript
from sub250.audio.endpointing import WINDOW_MS
from sub250.errors import ConfigError
from sub250.protocol import parse_client_event
from sub250.session.caller import CallerState
from sub250.session.interruption import (Heard, InterruptionCheck, InterruptionOptions, Verdict, hear, takes_the_turn,
                                      words)
from tests.unit.session.fakes import FakeLLM, feed, make_session, silence, speech, wait_for, wait_until


def tr(text, no_speech=None, logprob=None):
    return Transcript(text=text, audio_seconds=0.5, compute_seconds=0.01, no_speech_prob=no_speech,
                      avg_logprob=logprob)


@pytest.mark.parametrize("text, expected", [
    ("Mm-hmm.", []), ("Uh-huh.", []), ("Yeah. Okay.", []), ("(coughs)", []), ("[MUSIC] ♪", []), ("", []),
    # how Whisper base spells hums and backchannels it cannot place (measured)
    ("M.", []), ("MMA", []), ("Ememam.", []), ("Inemam.", []), ("Ow.", []), ("Um...", []), ("Hmmm", []),
    ("Me too.", ["me", "too"]), ("He said no.", ["he", "said", "no"]), ("Ma'am, wait", ["ma'am", "wait"]),
    ("Wait, stop.", ["wait", "stop"]), ("Stop!", ["stop"]), ("No.", ["no"]),
    ("Okay, but I have another question.", ["but", "have", "another", "question"]),
])
def test_words_leave_out_fillers_backchannels_and_annotations(text, expected):
    assert words(text) == expected


def test_a_transcript_takes_the_turn_with_words_said_as_speech():
    opts = InterruptionOptions(max_no_speech_prob=0.6)
    assert takes_the_turn(tr("Wait, stop.", 0.2), opts)
    assert takes_the_turn(tr("Stop."), opts)  # an engine without a no-speech probability: the words decide
    assert not takes_the_turn(tr("I'm not a fan of the game", 0.73), opts)  # Whisper's words on noise
    assert not takes_the_turn(tr("Mm-hmm.", 0.1), opts)


def test_words_heard_without_confidence_do_not_take_the_turn_unless_they_are_turn_words():
    opts = InterruptionOptions(min_confidence=-1.3)
    # a hummed "mm-hmm" as Whisper base renders it: words, a speech-like no-speech probability, guessed tokens
    assert not takes_the_turn(tr("in a month.", 0.29, -1.2), opts)  # -1.2 - 0.29 = -1.49
    assert takes_the_turn(tr("in a month.", 0.29, -1.0), opts)  # -1.29: confident enough
    assert takes_the_turn(tr("Stop.", 0.3, -2.5), opts)  # a turn word, however unsure
    assert takes_the_turn(tr("Hold on, no.", 0.1, -3.0), opts)
    assert takes_the_turn(tr("in a month.", None, -1.2), opts)  # no no-speech probability: -1.2 alone
    assert takes_the_turn(tr("in a month.", 0.29), opts)  # no log-probability: the test is skipped
    assert takes_the_turn(tr("in a month.", 0.29, -1.2), InterruptionOptions(min_confidence=None))


def test_the_check_is_due_after_check_after_ms_then_every_recheck_ms_and_at_a_pause():
    opts = InterruptionOptions(check_after_ms=224, recheck_ms=192, resume_after_ms=1500)
    c = InterruptionCheck(opts, first_window=0, onset_window=10)
    first = 10 + round(224 / WINDOW_MS)
    assert not c.due(first - 1) and c.due(first)
    assert c.due(12, paused=True)  # a pause deserves a check at once
    c.started(first)
    assert not c.due(first + 1)
    assert c.result(tr(""), first) is Verdict.CHECKING and c.checked_to == first
    assert c.due(first + round(192 / WINDOW_MS))
    assert not c.timed_out(10 + round(1500 / WINDOW_MS) - 1)
    assert c.timed_out(10 + round(1500 / WINDOW_MS)) and c.verdict is Verdict.WATCHING
    assert not c.timed_out(200)  # once
    assert c.ended(first + 3) is None  # its end was not checked yet
    assert c.ended(first) is True and c.verdict is Verdict.DISMISSED and not c.open


def test_what_a_check_heard_nothing_unsure_or_words():
    opts = InterruptionOptions(min_confidence=-1.3)
    assert hear(tr("", 0.1, -0.5), opts) is Heard.NOTHING
    assert hear(tr("Uh-huh.", 0.1, -0.5), opts) is Heard.NOTHING  # a backchannel, however sure
    assert hear(tr("in a month.", 0.6, -0.5), opts) is Heard.NOTHING  # words on what Whisper calls no speech
    assert hear(tr("Wei", 0.3, -1.2), opts) is Heard.UNSURE  # -1.5: a clipped first rendering
    assert hear(tr("Wait", 0.3, -1.2), opts) is Heard.WORDS  # a turn word, however unsure
    assert hear(tr("And so", 0.1, -0.9), opts) is Heard.WORDS
    assert hear(tr("Wei", 0.3, -1.2), InterruptionOptions(min_confidence=None)) is Heard.WORDS  # no test


def test_words_heard_unsure_bring_the_next_check_sooner():
    opts = InterruptionOptions(check_after_ms=224, recheck_ms=192, recheck_unsure_ms=96, min_confidence=-1.3)
    c = InterruptionCheck(opts, first_window=0, onset_window=0)
    first = round(224 / WINDOW_MS)
    c.started(first)
    assert c.result(tr("Wei", 0.3, -1.2), first) is Verdict.CHECKING
    sooner = first + round(96 / WINDOW_MS)
    assert not c.due(sooner - 1) and c.due(sooner)
    c.started(sooner)  # unsure again: the sooner recheck was given once, back to recheck_ms
    assert c.result(tr("In a map.", 0.03, -1.4), sooner) is Verdict.CHECKING
    assert not c.due(sooner + round(192 / WINDOW_MS) - 1) and c.due(sooner + round(192 / WINDOW_MS))
    # nothing heard at the first check: the next after recheck_ms, as before
    c2 = InterruptionCheck(opts, first_window=0, onset_window=0)
    c2.started(first)
    assert c2.result(tr("", 0.2, -0.4), first) is Verdict.CHECKING
    assert not c2.due(first + round(192 / WINDOW_MS) - 1)
    # a profile that rechecks evenly (cpu-base-recheck-even)
    c3 = InterruptionCheck(InterruptionOptions(recheck_unsure_ms=192), first_window=0, onset_window=0)
    c3.started(first)
    c3.result(tr("Wei", 0.3, -1.2), first)
    assert not c3.due(first + round(192 / WINDOW_MS) - 1) and c3.due(first + round(192 / WINDOW_MS))


def test_words_confirm_even_after_the_timeout():
    c = InterruptionCheck(InterruptionOptions(resume_after_ms=64), first_window=0, onset_window=0)
    assert c.timed_out(5)
    assert c.result(tr("Actually, wait."), 6) is Verdict.CONFIRMED
    assert c.ended(6) is False  # already decided


def test_profile_section_overrides_defaults():
    o = InterruptionOptions.from_stage({"enabled": False, "check_after_ms": 300, "max_no_speech_prob": 0.5})
    assert (o.enabled, o.check_after_ms, o.recheck_ms, o.max_no_speech_prob) == (False, 300, 192, 0.5)
    assert o.min_confidence == -1.3 and o.recheck_unsure_ms == 96
    assert InterruptionOptions.from_stage({"recheck_unsure_ms": 64}).recheck_unsure_ms == 64
    assert InterruptionOptions.from_stage({"min_confidence": "off"}).min_confidence is None
    assert InterruptionOptions.from_stage({"min_confidence": -2}).min_confidence == -2
    assert o.hold_speech and not InterruptionOptions.from_stage({"hold_speech": False}).hold_speech


@pytest.mark.parametrize("stage", [{"check_after_ms": 0}, {"recheck_ms": "192"}, {"resume_after_ms": 1.5e3},
                                   {"recheck_unsure_ms": 0}, {"recheck_unsure_ms": 96.0},
                                   {"check_after_ms": True}, {"max_no_speech_prob": 0}, {"max_no_speech_prob": 2},
                                   {"max_no_speech_prob": "0.5"}, {"min_confidence": 1}, {"min_confidence": -1e9},
                                   {"min_confidence": "low"}, {"min_confidence": True}, {"enabled": "no"},
                                   {"enabled": 1}, {"hold_speech": "yes"}])
def test_profile_values_out_of_range_or_of_the_wrong_type_are_refused(stage):
    with pytest.raises(ConfigError, match=r"\[interruption\] " + next(iter(stage))):
        InterruptionOptions.from_stage(stage)


# --- the session ---------------------------------------------------------------------------------------

async def _reply_in_progress(texts_after, **options):
    """A session whose reply is speaking (the fake LLM says 120 words, 10 ms each); from then on the ASR
    gives ``texts_after``. ``options``: InterruptionOptions' fields for the session."""
    from dataclasses import replace

    llm = FakeLLM(words=[f"word{i}" for i in range(120)], delay=0.01)
    session, t, stack = make_session(llm=llm)
    if options:
        session.tuning = replace(session.tuning, interruption=InterruptionOptions(**options))
    await feed(session, speech(0.8) + silence(0.8))
    await wait_for(t, "response.output_audio_transcript.delta", 5)
    stack.asr.calls.clear()
    stack.asr.texts = list(texts_after)
    return session, t, stack, llm


async def test_a_cough_over_the_reply_pauses_it_then_the_reply_plays_on_unseen_by_the_client():
    session, t, stack, llm = await _reply_in_progress([tr("", 0.8)])
    await feed(session, speech(0.3))  # the cough: the VAD calls it speech
    assert session.recognition.arbiter.active, "the sound was heard as speech over the reply"
    assert session.caller.state is CallerState.SUSPECTED
    rid = session.reply.id
    assert t.pauses == [(rid, True)]
    await feed(session, silence(0.8))
    done = (await wait_for(t, "response.done"))[0]
    assert session.caller.state is CallerState.LISTENING and session.caller.turn is None
    assert done["response"]["status"] == "completed"
    assert t.pauses == [(rid, True), (rid, False)]
    assert stack.asr.calls, "the sound was checked for words"
    assert set(stack.asr.prompts[-len(stack.asr.calls):]) == {""}, "checks run unprimed (a primed Whisper hears names)"
    assert Need.INTERRUPTION in stack.asr.needs, "a check goes before other sessions' partials and held replies"
    types = t.types()
    # only our own events say what happened: paused at the sound, resumed after it (standard clients ignore them)
    assert [e["type"] for e in t.sent if e["type"].startswith("sub250.reply.")] == \
        ["sub250.reply.paused", "sub250.reply.resumed"]
    assert types.index("sub250.reply.resumed") < types.index("response.done")
    for kind in ("input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                 "input_audio_buffer.committed"):
        assert types.count(kind) == 1, kind  # the question's only: the cough never reached the client
    assert session.stats.false_interruptions == 1 and session.stats.interruptions == 0
    assert session.stats.cancelled == 0 and not llm.aborted
    said = "".join(e["delta"] for e in t.sent if e["type"] == "response.output_audio_transcript.delta")
    assert said.split() == [f"word{i}" for i in range(120)], "nothing was lost while paused"
    assert [h.role for h in session.conversation] == ["user", "assistant"]
    # the session goes on: the next question is a turn as any
    stack.asr.texts = ["how often do I change the filter"]
    await feed(session, speech(0.8) + silence(0.8))
    assert (await wait_for(t, "response.done", 2))[-1]["response"]["status"] == "completed"


@pytest.mark.parametrize("hold", [True, False])
async def test_the_paused_reply_synthesizes_nothing_new_while_the_sound_is_checked(hold):
    """hold_speech: while the check runs the TTS starts no new chunk (the check gets the core); nothing is
    lost: once the cough is dismissed every word is spoken. Off, synthesis goes on through the pause."""
    from dataclasses import replace

    llm = FakeLLM(words=[f"word{i}" for i in range(300)], delay=0.01)
    session, t, stack = make_session(llm=llm)
    session.tuning = replace(session.tuning, interruption=InterruptionOptions(hold_speech=hold))
    await feed(session, speech(0.8) + silence(0.8))
    await wait_for(t, "response.output_audio_transcript.delta", 5)
    stack.asr.texts = [tr("", 0.8)]
    await feed(session, speech(0.3))  # a cough: checked, no words yet, the sound has not ended
    assert session.recognition.arbiter.active
    at_pause = len(stack.tts.texts)
    await asyncio.sleep(0.6)  # the generation goes on: ~60 words, a 40-word chunk or more
    during = len(stack.tts.texts) - at_pause
    assert during <= 1 if hold else during >= 1, f"{during} chunks synthesized while paused"
    await feed(session, silence(0.8))
    done = (await wait_for(t, "response.done", 1, 10))[0]
    assert done["response"]["status"] == "completed"
    assert " ".join(stack.tts.texts).split() == [f"word{i}" for i in range(300)], "every word was spoken"


async def test_words_over_the_reply_cancel_it_and_the_client_hears_of_the_speech_only_then():
    session, t, stack, llm = await _reply_in_progress([tr("Wait, stop.", 0.1)])
    onset_ms = session.input.ms(session.input.end)
    before = t.types().count("input_audio_buffer.speech_started")
    await feed(session, speech(0.1))
    assert t.types().count("input_audio_buffer.speech_started") == before, "not before the words are heard"
    await feed(session, speech(0.4))
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "cancelled"
    assert done["response"]["status_details"]["reason"] == "turn_detected"
    started = t.of("input_audio_buffer.speech_started") if hasattr(t, "of") else \
        [e for e in t.sent if e["type"] == "input_audio_buffer.speech_started"]
    assert len(started) == 2 and abs(started[-1]["audio_start_ms"] - onset_ms) <= 2 * WINDOW_MS
    types = t.types()
    assert types.index("response.done") > len(types) - 1 - types[::-1].index("input_audio_buffer.speech_started")
    assert llm.aborted and session.stats.interruptions == 1 and session.stats.false_interruptions == 0
    await feed(session, silence(0.8))  # the interruption is a turn of its own
    await wait_for(t, "response.done", 2)
    assert [h.role for h in session.conversation][-2:] == ["user", "assistant"]
    assert session.conversation.get(started[-1]["item_id"]).text == "Wait, stop."


async def test_a_failing_check_counts_as_words_the_barge_in_of_old():
    session, t, stack, llm = await _reply_in_progress([RuntimeError("whisper fell over")])
    await feed(session, speech(0.5))
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "cancelled" and llm.aborted


async def test_with_the_check_disabled_any_speech_cancels_at_once():
    from dataclasses import replace

    session, t, stack, llm = await _reply_in_progress([tr("", 0.9)])
    session.tuning = replace(session.tuning, interruption=InterruptionOptions(enabled=False))
    await feed(session, speech(0.1))
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "cancelled" and t.pauses == [] and stack.asr.calls == []


async def test_the_session_can_turn_the_check_off_for_itself():
    session, t, stack, llm = await _reply_in_progress([tr("", 0.9)])
    await session.handle(parse_client_event(
        '{"type": "session.update", "session": {"sub250": {"interruption_check": false}}}'), 0)
    await feed(session, speech(0.1))
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "cancelled" and t.pauses == []


async def test_a_reply_that_finishes_while_paused_is_told_once_the_cough_is_dismissed():
    # its speech not held: the stages can end while paused (as a text-only reply's always can)
    session, t, stack, llm = await _reply_in_progress([tr("", 0.9)], hold_speech=False)
    await feed(session, speech(0.3))
    reply = session.recognition.arbiter.suspect.reply
    await wait_until(lambda: reply.task.done(), what="the reply's stages to end while paused")
    assert "response.done" not in t.types() and reply.active, "held while paused"
    await feed(session, silence(0.8))
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "completed" and session.stats.false_interruptions == 1
    assert not reply.active


async def test_a_reply_that_finishes_while_paused_is_cancelled_if_the_sound_was_words():
    """The caller talked over it before hearing the rest: cancelled, and the history keeps what was heard."""
    session, t, stack, llm = await _reply_in_progress([tr("Wait, stop.", 0.1)], hold_speech=False)
    stack.asr.gate = __import__("threading").Event()  # the check waits until the reply has ended
    await feed(session, speech(0.4))
    reply = session.recognition.arbiter.suspect.reply
    await wait_until(lambda: reply.task.done(), what="the reply's stages to end while paused")
    stack.asr.gate.set()
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "cancelled"
    assert done["response"]["status_details"]["reason"] == "turn_detected"
    heard = [h for h in session.conversation if h.role == "assistant"]
    assert not heard or len(heard[0].text.split()) < 120


async def test_a_long_wordless_sound_resumes_the_reply_before_it_ends():
    session, t, stack, llm = await _reply_in_progress([tr("", 0.9)])
    rid = session.reply.id
    from dataclasses import replace
    session.tuning = replace(session.tuning, interruption=InterruptionOptions(resume_after_ms=300))
    await feed(session, speech(0.8))  # still "speaking"
    assert t.pauses == [(rid, True), (rid, False)] and session.recognition.arbiter.active
    await feed(session, silence(0.8))
    assert not session.recognition.arbiter.active and session.stats.false_interruptions == 1
    assert t.types().count("sub250.reply.resumed") == 1, "resumed once, at the timeout"


async def test_clearing_the_input_buffer_during_the_check_lets_the_reply_play_on():
    session, t, stack, llm = await _reply_in_progress([tr("", 0.9)])
    await feed(session, speech(0.2))
    assert session.recognition.arbiter.active
    await session.handle(parse_client_event('{"type": "input_audio_buffer.clear"}'), 0)
    assert not session.recognition.arbiter.active and t.pauses[-1][1] is False
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "completed"


async def test_the_client_cancelling_during_the_check_still_ends_the_reply():
    session, t, stack, llm = await _reply_in_progress([tr("", 0.9)])
    await feed(session, speech(0.2))
    await session.handle(parse_client_event('{"type": "response.cancel"}'), 0)
    done = (await wait_for(t, "response.done"))[0]
    assert done["response"]["status"] == "cancelled"
    await feed(session, silence(0.8))
    await asyncio.sleep(0.05)
    assert not session.recognition.arbiter.active and session.reply is None
