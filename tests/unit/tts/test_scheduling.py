"""Syntheses of every session share the engine's threads by need (``TTSEngine.speak``, ``SpeechNeed``): a reply's
first chunk, which its caller waits for in silence, goes before other replies' later chunks; a reply held at a
pause asks as AHEAD and is served as FIRST once committed; ``[tts] scheduling = "arrival"`` serves in turn. Also
the Speaker's side: the first chunk asks by the reply's need, the rest as LATER, and ``tts_wait`` is measured."""

import asyncio
import threading

import pytest

from sub250.errors import ConfigError
from sub250.metrics.timeline import TurnTimeline
from sub250.session.stages import Speaker
from sub250.tts.base import SpeechNeed
from sub250.tts.piper import PiperTTS
from tests.unit.session.fakes import ToneTTS


async def _busy(tts: ToneTTS, need: SpeechNeed = SpeechNeed.FIRST) -> asyncio.Task:
    """A thread of the engine taken by a synthesis (asked with ``need``) that waits for ``tts.gate``."""
    task = asyncio.ensure_future(tts.speak(lambda: list(tts.synthesize("busy")), need=need))
    await asyncio.to_thread(tts.entered.wait, 5)
    return task


def _asks(tts: ToneTTS, order: list[str], name: str, need) -> asyncio.Task:
    return asyncio.ensure_future(tts.speak(lambda: order.append(name), need=need))


async def test_a_first_chunk_goes_before_later_chunks_that_asked_earlier():
    gate, order = threading.Event(), []
    tts = ToneTTS(gate=gate)
    busy = await _busy(tts)
    waiting = [_asks(tts, order, "later-a", SpeechNeed.LATER), _asks(tts, order, "ahead-b", SpeechNeed.AHEAD),
               _asks(tts, order, "first-c", SpeechNeed.FIRST), _asks(tts, order, "later-d", SpeechNeed.LATER)]
    await asyncio.sleep(0.02)
    assert order == []  # all wait for the one thread
    gate.set()
    await asyncio.gather(busy, *waiting)
    assert order == ["first-c", "ahead-b", "later-a", "later-d"]


async def test_a_held_reply_committed_while_waiting_is_served_as_first():
    gate, order, need = threading.Event(), [], [SpeechNeed.AHEAD]
    tts = ToneTTS(gate=gate)
    busy = await _busy(tts)
    waiting = [_asks(tts, order, "held", lambda: need[0]), _asks(tts, order, "first", SpeechNeed.FIRST)]
    await asyncio.sleep(0.02)
    need[0] = SpeechNeed.FIRST  # the commit adopts the held reply: as urgent, and it asked first
    gate.set()
    await asyncio.gather(busy, *waiting)
    assert order == ["held", "first"]


async def test_arrival_scheduling_serves_in_turn():
    gate, order = threading.Event(), []
    tts = ToneTTS(gate=gate, fifo=True)  # as PiperTTS builds it for [tts] scheduling = "arrival"
    busy = await _busy(tts)
    waiting = [_asks(tts, order, "later", SpeechNeed.LATER), _asks(tts, order, "first", SpeechNeed.FIRST)]
    await asyncio.sleep(0.02)
    gate.set()
    await asyncio.gather(busy, *waiting)
    assert order == ["later", "first"]


async def test_a_cancelled_synthesis_keeps_its_thread_until_it_has_finished():
    gate, order = threading.Event(), []
    tts = ToneTTS(gate=gate)
    busy = await _busy(tts)
    busy.cancel()
    next_one = _asks(tts, order, "next", SpeechNeed.FIRST)
    await asyncio.sleep(0.05)
    assert order == [], "the thread is still synthesizing the cancelled chunk"
    gate.set()
    await next_one
    assert order == ["next"]
    with pytest.raises(asyncio.CancelledError):
        await busy


async def test_a_waiting_synthesis_cancelled_never_runs():
    gate, order = threading.Event(), []
    tts = ToneTTS(gate=gate)
    busy = await _busy(tts)
    gone = _asks(tts, order, "gone", SpeechNeed.FIRST)
    kept = _asks(tts, order, "kept", SpeechNeed.LATER)
    await asyncio.sleep(0.02)
    gone.cancel()
    gate.set()
    await asyncio.gather(busy, kept)
    assert order == ["kept"]


async def test_the_speakers_first_chunk_asks_by_its_replys_need_and_the_rest_as_later():
    asked = []

    class Recording(ToneTTS):
        async def speak(self, fn, *args, need=SpeechNeed.FIRST, due_s=None):
            asked.append((need() if callable(need) else need, due_s))
            return await super().speak(fn, *args, need=need, due_s=due_s)

    tl = TurnTimeline("t")
    speaker = Speaker(Recording(seconds=0.05), tl, lambda view, words: None, first_clause=False,
                      first_need=lambda: SpeechNeed.AHEAD, playback_left_ms=lambda: 2000.0)
    speaker.put("One whole sentence here. And a second one there. ")
    await speaker.finish()
    # later chunks become due when 1500 ms of the reply is left to play: 0.5 s from now; the last, the tail
    assert asked == [(SpeechNeed.AHEAD, None), (SpeechNeed.LATER, 0.5), (SpeechNeed.LATER, 0.5)]
    assert tl.spans()["tts_wait"] is not None and 0 <= tl.spans()["tts_wait"] < 1000


async def test_a_later_chunk_whose_reply_is_about_to_fall_silent_takes_the_free_thread():
    gate, order = threading.Event(), []
    tts = ToneTTS(gate=gate, workers=2)
    running = await _busy(tts, SpeechNeed.LATER)  # a long later chunk
    patient = _asks(tts, order, "patient", SpeechNeed.LATER)
    due = asyncio.ensure_future(tts.speak(lambda: order.append("due"), need=SpeechNeed.LATER, due_s=0.05))
    await asyncio.wait_for(due, 5)  # waited 50 ms as a later chunk, then took the thread kept for first chunks
    assert order == ["due"]
    gate.set()
    await asyncio.gather(running, patient)
    assert order == ["due", "patient"]


async def test_the_first_chunks_wait_for_a_thread_is_measured():
    gate = threading.Event()
    tts = ToneTTS(gate=gate, seconds=0.05)
    busy = await _busy(tts)
    tl = TurnTimeline("t")
    speaker = Speaker(tts, tl, lambda view, words: None, first_clause=False)
    speaker.put("One whole sentence here. ")
    await asyncio.sleep(0.2)
    gate.set()
    await speaker.finish()
    await busy
    assert tl.spans()["tts_wait"] >= 150, tl.spans()["tts_wait"]


def test_an_unknown_tts_scheduling_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        PiperTTS(tmp_path / "voice.onnx", tmp_path / "voice.json", {"scheduling": "random"})
    assert "[tts] scheduling" in str(err.value)
    assert PiperTTS(tmp_path / "v.onnx", tmp_path / "v.json", {"scheduling": "arrival"}).scheduling == "arrival"


async def test_later_chunks_leave_a_thread_free_for_a_first_chunk():
    gate, order = threading.Event(), []
    tts = ToneTTS(gate=gate, workers=2)
    running = await _busy(tts, SpeechNeed.LATER)  # a long later chunk
    later = _asks(tts, order, "later", SpeechNeed.LATER)
    first = _asks(tts, order, "first", SpeechNeed.FIRST)
    await asyncio.wait_for(first, 5)  # on the thread the later ones leave free
    await asyncio.sleep(0.02)
    assert order == ["first"], "the second later chunk waits for the first one's thread"
    gate.set()
    await asyncio.gather(running, later)
    assert order == ["first", "later"]


async def test_under_arrival_later_chunks_take_every_thread():
    gate, order = threading.Event(), []
    tts = ToneTTS(gate=gate, workers=2, fifo=True)
    running = await _busy(tts, SpeechNeed.LATER)  # a long later chunk
    await asyncio.wait_for(_asks(tts, order, "later", SpeechNeed.LATER), 5)
    assert order == ["later"]
    gate.set()
    await running
