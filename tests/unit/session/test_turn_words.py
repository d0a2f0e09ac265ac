"""Words the LLM reads as a finished turn end the pause sooner; words it reads as unfinished are held
(``[vad] finished_commit_ms``, app/session/turn_words.py): the real session, endpointer and speculation around
fake engines."""

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from sub250.errors import ConfigError
from sub250.profiles import Profile
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import Words
from sub250.session.turn_cue import as_said
from sub250.session.turn_words import TurnWords
from tests.unit.session.fakes import FakeASR, feed, make_session, silence, speech, wait_for, wait_until

FINISHED, UNFINISHED, OPEN = "Where is my order?", "Can I return a filter that I", "How far from the"


class Judge:
    """turn_end_logprob: -10 for the finished question, -16 for anything else; ``delay`` s per call; ``fail``."""

    def __init__(self, delay=0.0, fail=False, gate=None):
        self.delay, self.fail, self.asked, self.stopped, self.gate = delay, fail, [], [], gate

    async def turn_end_logprob(self, text, request_id):
        self.asked.append(text)
        try:
            await asyncio.sleep(self.delay)
            if self.gate is not None:
                await self.gate.wait()
        except asyncio.CancelledError:
            self.stopped.append(text)  # the engine aborts the request
            raise
        if self.fail:
            raise RuntimeError("engine gone")
        return -10.0 if text == FINISHED.rstrip("?") else -16.0


def _session(texts, judge, commit_ms=200, hold_open_ms=1500, unfinished_hold_ms=0):
    session, t, stack = make_session(speculative=True)
    stack.asr = FakeASR(texts=texts)
    session.tuning = replace(session.tuning, hold_open_ms=hold_open_ms, partials=False, finished_commit_ms=commit_ms,
                             finished_logprob=-13.0, unfinished_hold_ms=unfinished_hold_ms)
    session.recognition.pauses.turn_words = TurnWords(judge, -13.0, spawn=session.tasks.spawn, wait_s=1.5)
    return session, t, stack


async def test_finished_words_commit_at_finished_commit_ms_of_silence():
    judge = Judge()
    session, t, _ = _session([FINISHED], judge)
    await feed(session, speech(0.8) + silence(0.1))
    await wait_until(lambda: judge.asked, what="the LLM asked")
    assert judge.asked == ["Where is my order"], "asked without Whisper's closing punctuation"
    assert "input_audio_buffer.committed" not in t.types()
    await feed(session, silence(0.15))  # 0.25 s of silence: past 200 ms, well before server_vad's 500
    await wait_for(t, "input_audio_buffer.committed")
    assert session.stats.pauses_finished == 1 and session.stats.pauses_held_open == 0
    assert (await wait_for(t, "response.done"))[0]["response"]["status"] == "completed"
    assert session.stats.speculative_adopted == 1


async def test_a_reading_that_comes_after_the_silence_commits_at_once():
    judge = Judge(delay=0.3)
    session, t, _ = _session([FINISHED], judge)
    await feed(session, speech(0.8) + silence(0.3))  # 300 ms of silence, the LLM still reading
    assert "input_audio_buffer.committed" not in t.types()
    await wait_for(t, "input_audio_buffer.committed")  # no more audio: the reading itself ends the pause
    assert session.stats.pauses_finished == 1


@pytest.mark.parametrize(("text", "asked"), [(UNFINISHED, True), (OPEN, False)])
async def test_unfinished_or_open_words_are_held_to_hold_open_ms(text, asked):
    judge = Judge()
    session, t, _ = _session([text], judge)
    await feed(session, speech(0.8) + silence(0.8))  # past server_vad's 500 ms
    await wait_until(lambda: session.stats.pauses_held_open == 1, what="the hold")
    assert "input_audio_buffer.committed" not in t.types() and session.recognition.detector.holding
    assert bool(judge.asked) is asked, "open words need no reading"
    await feed(session, silence(0.8))  # 1.6 s in all
    await wait_for(t, "input_audio_buffer.committed")
    assert session.stats.pauses_finished == 0


async def test_speech_again_before_the_commit_keeps_the_turn_going():
    judge = Judge(delay=0.05)
    session, t, _ = _session([FINISHED, FINISHED], judge, commit_ms=300)
    await feed(session, speech(0.8) + silence(0.2))
    await wait_until(lambda: session.recognition.pauses.finished is not None, what="the reading")
    await feed(session, speech(0.5))  # the caller goes on at 200 ms: no commit
    assert "input_audio_buffer.committed" not in t.types() and session.stats.pauses_finished == 0
    await feed(session, silence(0.4))
    await wait_for(t, "input_audio_buffer.committed")
    assert session.stats.pauses_finished == 1 and session.stats.speculative_discarded == 1


async def test_a_failed_reading_leaves_the_pause_to_server_vad():
    judge = Judge(fail=True)
    session, t, _ = _session([FINISHED], judge)
    await feed(session, speech(0.8) + silence(0.3))
    await wait_until(lambda: judge.asked, what="the LLM asked")
    await asyncio.sleep(0.05)
    assert "input_audio_buffer.committed" not in t.types()
    await feed(session, silence(0.3))  # 600 ms: server_vad's 500 ms commit, words that may end a turn
    await wait_for(t, "input_audio_buffer.committed")
    assert session.stats.pauses_finished == 0 and session.stats.pauses_held_open == 0


async def test_an_engine_that_cannot_read_words_leaves_the_pause_to_server_vad():
    class Mute:
        async def turn_end_logprob(self, text, request_id):
            return None

    session, t, _ = _session([UNFINISHED], Mute())
    await feed(session, speech(0.8) + silence(0.6))
    await wait_for(t, "input_audio_buffer.committed")
    assert session.stats.pauses_finished == 0 and session.stats.pauses_held_open == 0


@pytest.mark.parametrize(("text", "holds_s"), [(UNFINISHED, 0.7), (OPEN, 1.5)])
async def test_unfinished_words_not_ending_open_may_be_held_shorter(text, holds_s):
    session, t, _ = _session([text], Judge(), unfinished_hold_ms=700)
    await feed(session, speech(0.8) + silence(0.6))
    await wait_until(lambda: session.stats.pauses_held_open == 1, what="the hold")
    assert "input_audio_buffer.committed" not in t.types()
    await feed(session, silence(0.2))  # 0.8 s
    assert ("input_audio_buffer.committed" in t.types()) is (holds_s < 0.8)
    await feed(session, silence(0.8))
    await wait_for(t, "input_audio_buffer.committed")


@pytest.mark.parametrize(("text", "finished"), [(UNFINISHED, False), (FINISHED, True)])
async def test_a_reading_not_known_at_server_vads_silence_holds_the_pause_to_unfinished_hold_ms(text, finished):
    """The reading comes after server_vad's 500 ms (a busy server) but before unfinished_hold_ms (700): it is
    waited for, and decides as it would have - a finished turn ends now, unfinished words are held to 700 ms."""
    judge = Judge(gate=asyncio.Event())
    session, t, _ = _session([text], judge, unfinished_hold_ms=700)
    await feed(session, speech(0.8) + silence(0.55))  # server_vad's 500 ms have passed, the LLM still reading
    assert "input_audio_buffer.committed" not in t.types() and session.recognition.detector.holding
    judge.gate.set()  # the reading comes
    if finished:
        await wait_for(t, "input_audio_buffer.committed")
        assert session.stats.pauses_finished == 1
        return
    await wait_until(lambda: session.stats.pauses_held_open == 1, what="the unfinished words' hold")
    await asyncio.sleep(0.1)
    assert "input_audio_buffer.committed" not in t.types()
    await feed(session, silence(0.2))  # 0.75 s in all: past 700 ms, well before hold_open_ms (1.5 s)
    await wait_for(t, "input_audio_buffer.committed")
    assert session.stats.pauses_finished == 0


@pytest.mark.parametrize(("text", "committed"), [(UNFINISHED, True), (FINISHED, True), (OPEN, False)])
async def test_a_reading_not_known_by_unfinished_hold_ms_is_stopped_and_the_words_alone_decide(text, committed):
    """A reading that would come later still: at unfinished_hold_ms it is stopped (the engine aborts it) and the
    words alone decide - words that may end a turn end it there, open words are held (they need no reading)."""
    judge = Judge(delay=2.0)
    session, t, _ = _session([text], judge, unfinished_hold_ms=700)
    await feed(session, speech(0.8) + silence(0.55))  # past server_vad's 500 ms: held for the reading
    if committed:
        assert "input_audio_buffer.committed" not in t.types()
        await wait_for(t, "input_audio_buffer.committed")  # ~150 ms later: the pause reached 700 ms
        await wait_until(lambda: judge.stopped, what="the reading stopped")
        assert judge.stopped == judge.asked
    else:
        await wait_until(lambda: session.stats.pauses_held_open == 1, what="the open words' hold")
        assert not judge.asked
        await asyncio.sleep(0.3)
        assert "input_audio_buffer.committed" not in t.types()
    assert session.stats.pauses_finished == 0


async def test_words_known_only_after_unfinished_hold_ms_are_not_read():
    gate = threading.Event()
    judge = Judge()
    session, t, stack = _session([FINISHED], judge, unfinished_hold_ms=700)
    stack.asr.gate = gate  # the held reply's transcription waits
    await feed(session, speech(0.8) + silence(0.6))
    assert session.recognition.detector.holding, "held while the words are transcribed"
    await asyncio.sleep(0.3)  # the reading's wait (to 700 ms) is over
    gate.set()
    await wait_for(t, "input_audio_buffer.committed")  # the words known: not open, the turn ends
    await asyncio.sleep(0.1)
    assert not judge.asked and session.stats.pauses_finished == 0


async def test_the_reading_of_a_pause_the_caller_talks_through_is_stopped():
    judge = Judge(delay=0.5)
    session, t, _ = _session([UNFINISHED, FINISHED], judge)
    await feed(session, speech(0.8) + silence(0.2))
    await wait_until(lambda: judge.asked, what="the first pause read")
    await feed(session, speech(0.6) + silence(0.15))  # the caller goes on; a second pause
    await wait_until(lambda: judge.stopped, what="the first reading stopped")
    assert judge.stopped == [as_said(UNFINISHED)]


@pytest.mark.parametrize(("key", "value"), [("unfinished_hold_ms", -5), ("unfinished_hold_ms", "700"),
                                            ("finished_commit_ms", -1), ("finished_commit_ms", 0.3),
                                            ("finished_commit_ms", "300"), ("finished_logprob", 1.0),
                                            ("finished_logprob", "-13"), ("finished_logprob", True)])
def test_the_options_are_checked(key, value):
    profile = Profile(name="t", description="", path=Path("t.toml"), stages={"vad": {key: value}})
    with pytest.raises(ConfigError, match=key):
        PipelineTuning.from_profile(profile)


def test_the_options_are_read_from_the_profile_and_off_by_default():
    profile = Profile(name="t", description="", path=Path("t.toml"),
                      stages={"vad": {"finished_commit_ms": 300, "finished_logprob": -12}})
    tuning = PipelineTuning.from_profile(profile)
    assert (tuning.finished_commit_ms, tuning.finished_logprob) == (300, -12.0)
    bare = PipelineTuning.from_profile(Profile(name="t", description="", path=Path("t.toml"), stages={}))
    assert bare.finished_commit_ms == 0
    session, _, _ = make_session(speculative=True)
    assert session.recognition.pauses.turn_words is None


async def test_a_late_reading_stops_only_its_own_pause():
    """A held reply's reading that is too late stops; the reading of a later pause is another's."""
    judge = Judge(delay=2.0)
    words = TurnWords(judge, -13.0, spawn=asyncio.ensure_future, wait_s=1.0)
    first, second = _Held(UNFINISHED), _Held(FINISHED)
    words.judge(first)
    await wait_until(lambda: len(judge.asked) == 1, what="the first reading")
    task = words.judge(second)  # the caller went on: the first pause's reading stops
    await wait_until(lambda: len(judge.stopped) == 1, what="the first reading stopped")
    await wait_until(lambda: len(judge.asked) == 2, what="the second reading")
    words.too_late(first)  # the first pause's late settling: not the second's to stop
    await asyncio.sleep(0.05)
    assert judge.stopped == [as_said(UNFINISHED)] and not task.done()
    words.too_late(second)
    assert await task is None and judge.stopped == [as_said(UNFINISHED), as_said(FINISHED)]


class _Held:
    """What TurnWords needs of a held reply: its words (known)."""

    def __init__(self, text):
        self.words = Words(text)
