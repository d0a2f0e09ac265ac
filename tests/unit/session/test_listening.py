"""Listening: partial transcripts while the caller speaks, and retrieval ahead on stable partials."""

import asyncio
import math
import threading

import numpy as np

from sub250.asr.base import Need
from sub250.audio.endpointing import WINDOW_MS
from sub250.audio.vad import WINDOW
from sub250.metrics.timeline import now_ns
from sub250.rag.query_cache import QueryCache
from sub250.session.input_buffer import InputBuffer
from sub250.session.listening import MIN_AHEAD_WORDS, PARTIAL_EVERY_MS, Listening
from sub250.tasks import TaskSet
from sub250.session.turn import UserTurn
from tests.unit.session.fakes import FakeASR, FakeRetriever, wait_until

#: Windows of new speech that make a partial due.
EVERY = math.ceil(PARTIAL_EVERY_MS / WINDOW_MS)


class Rig:
    def __init__(self, texts=None, gate=None, retriever=None):
        self.asr = FakeASR(texts=texts, gate=gate)
        self.retriever = retriever
        self.sent = []
        self.spawned = []
        self.tasks = TaskSet()
        self.buffer = InputBuffer()
        self.listening = Listening(self.asr, retriever, window="audio", send=self.sent.append, spawn=self.spawn)

    def spawn(self, coro):
        task = self.tasks.spawn(coro)
        self.spawned.append(task)
        return task

    def begin(self, name="item_1"):
        turn = UserTurn.new(name, first_window=self.buffer.end)
        self.listening.begin(turn, self.buffer.end)
        return turn

    def speak(self, windows):
        self.buffer.append([np.full(WINDOW, 0.1, dtype=np.float32)] * windows, now_ns())
        self.listening.heard(self.buffer)

    async def settle(self):
        """Until every task spawned so far (partials, searches ahead) has ended."""
        while pending := [t for t in self.spawned if not t.done()]:
            await asyncio.wait(pending)
        await asyncio.sleep(0)

    def partials(self):
        return [e for e in self.sent if e["type"] == "sub250.transcript.partial"]


def stable(*texts):
    return Rig(texts=list(texts), retriever=FakeRetriever(cache=QueryCache()))


def test_a_partial_is_due_after_partial_every_ms():
    assert (EVERY - 1) * WINDOW_MS < PARTIAL_EVERY_MS <= EVERY * WINDOW_MS


async def test_a_partial_only_after_enough_new_speech():
    rig = Rig(texts=["how often", "how often do I"])
    turn = rig.begin()
    rig.speak(EVERY - 1)
    assert rig.spawned == []
    rig.speak(1)
    assert len(rig.spawned) == 1
    await rig.settle()
    assert rig.partials() == [{"type": "sub250.transcript.partial", "event_id": rig.partials()[0]["event_id"],
                               "item_id": "item_1", "text": "how often", "audio_ms": int(EVERY * WINDOW_MS)}]
    assert rig.asr.calls == [EVERY * WINDOW] and rig.asr.windows == ["audio"]
    assert rig.asr.needs == [Need.PARTIAL], "a partial waits behind every other call of the recognizer"
    assert turn.partials == ["how often"]
    rig.speak(EVERY - 1)  # counted from the last partial
    assert len(rig.spawned) == 1
    rig.speak(1)
    await rig.settle()
    assert [e["text"] for e in rig.partials()] == ["how often", "how often do I"]
    assert rig.asr.calls[-1] == 2 * EVERY * WINDOW, "a partial is of the whole turn so far"


async def test_a_partial_covers_the_turn_from_its_first_window():
    rig = Rig()
    rig.speak(10)  # before the turn
    rig.begin()
    rig.speak(EVERY)
    await rig.settle()
    assert rig.asr.calls == [EVERY * WINDOW]


async def test_no_partial_while_the_asr_engine_is_busy():
    gate = threading.Event()
    rig = Rig(gate=gate)
    final = asyncio.ensure_future(rig.asr.recognize(np.zeros(WINDOW, dtype=np.float32)))  # e.g. a final transcript
    await wait_until(lambda: rig.asr.busy, what="the ASR engine busy")
    rig.begin()
    rig.speak(EVERY * 2)
    assert rig.spawned == []
    gate.set()
    await final
    assert not rig.asr.busy
    rig.speak(1)  # the speech skipped is still new speech: due at once
    assert len(rig.spawned) == 1
    await rig.settle()
    assert len(rig.partials()) == 1


async def test_one_partial_at_a_time():
    gate = threading.Event()
    rig = Rig(gate=gate)
    rig.begin()
    rig.speak(EVERY)
    rig.speak(EVERY)  # no await in between: the engine is not busy yet, the partial is in flight
    assert not rig.asr.busy and len(rig.spawned) == 1
    await wait_until(rig.asr.entered.is_set, what="the partial running")
    rig.speak(EVERY)
    assert len(rig.spawned) == 1
    gate.set()
    await rig.settle()
    rig.speak(EVERY)
    assert len(rig.spawned) == 2
    await rig.settle()
    assert len(rig.partials()) == 2 and len(rig.asr.calls) == 2


async def test_a_partial_of_a_turn_no_longer_current_is_not_sent():
    gate = threading.Event()
    rig = Rig(gate=gate)
    old = rig.begin("item_old")
    rig.speak(EVERY)
    await wait_until(rig.asr.entered.is_set, what="the partial running")
    rig.begin("item_new")  # a new turn began while the old one's partial ran
    gate.set()
    await rig.settle()
    assert rig.asr.calls, "the partial ran"
    assert rig.partials() == [] and old.partials == []


async def test_an_empty_partial_is_not_sent():
    rig = Rig(texts=[""])
    turn = rig.begin()
    rig.speak(EVERY)
    await rig.settle()
    assert rig.asr.calls and rig.partials() == [] and turn.partials == []


async def test_end_cancels_a_partial_in_flight():
    gate = threading.Event()
    rig = Rig(gate=gate)
    turn = rig.begin()
    rig.speak(EVERY)
    await wait_until(rig.asr.entered.is_set, what="the partial running")
    rig.listening.end()
    gate.set()
    await rig.settle()
    assert rig.spawned[0].cancelled()
    assert rig.partials() == [] and turn.partials == []
    rig.speak(EVERY * 2)  # no turn: nothing to transcribe
    assert len(rig.spawned) == 1


async def test_end_before_the_partial_ran_means_it_never_transcribes():
    rig = Rig()
    rig.begin()
    rig.speak(EVERY)
    rig.listening.end()
    await rig.settle()
    assert rig.spawned[0].cancelled() and rig.asr.calls == [] and rig.partials() == []


# --- retrieval ahead -------------------------------------------------------------------------------


async def speak_partials(rig, count):
    turn = rig.begin()
    for _ in range(count):
        rig.speak(EVERY)
        await rig.settle()
    return turn


async def test_a_stable_growing_partial_is_searched_ahead():
    rig = stable("how often do I", "how often do I change", "how often do I change the filter")
    turn = await speak_partials(rig, 1)
    assert rig.retriever.calls == [], "a first partial has nothing to be stable against"
    assert turn.prefetch_ms is None
    rig.speak(EVERY)
    await rig.settle()
    assert rig.retriever.calls == [("how often do I change", False)], "searched ahead, not counted"
    assert turn.prefetch_ms is not None and turn.prefetch_ms >= 0
    rig.speak(EVERY)
    await rig.settle()
    assert rig.retriever.calls[-1] == ("how often do I change the filter", False)
    assert turn.partials == ["how often do I", "how often do I change", "how often do I change the filter"]


async def test_a_repeated_partial_counts_as_stable():
    rig = stable("How often do I?", "how often do I")
    await speak_partials(rig, 2)
    assert rig.retriever.calls == [("how often do I", False)]


async def test_too_few_words_are_not_searched_ahead():
    words = "how often do I change".split()
    short, enough = " ".join(words[:MIN_AHEAD_WORDS - 1]), " ".join(words[:MIN_AHEAD_WORDS])
    rig = stable(short, short)
    await speak_partials(rig, 2)
    assert rig.retriever.calls == []
    rig = stable(short, enough)
    await speak_partials(rig, 2)
    assert rig.retriever.calls == [(enough, False)]


async def test_a_partial_that_changed_is_not_searched_ahead():
    rig = stable("how often do I", "where is the filter in it")
    turn = await speak_partials(rig, 2)
    assert rig.retriever.calls == [] and turn.prefetch_ms is None
    assert len(rig.partials()) == 2


async def test_no_search_ahead_without_a_query_cache_or_a_retriever():
    rig = Rig(texts=["how often do I", "how often do I change"], retriever=FakeRetriever(cache=None))
    await speak_partials(rig, 2)
    assert rig.retriever.calls == [] and len(rig.partials()) == 2
    rig = Rig(texts=["how often do I", "how often do I change"], retriever=None)
    turn = await speak_partials(rig, 2)
    assert len(rig.partials()) == 2 and turn.prefetch_ms is None


async def test_a_failed_search_ahead_leaves_no_prefetch():
    retriever = FakeRetriever(fail=True, cache=QueryCache())
    rig = Rig(texts=["how often do I", "how often do I change"], retriever=retriever)
    turn = await speak_partials(rig, 2)
    assert retriever.calls == [("how often do I change", False)]
    assert turn.prefetch_ms is None
    assert all(not t.cancelled() and t.exception() is None for t in rig.spawned)
