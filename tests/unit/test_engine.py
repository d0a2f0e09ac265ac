"""ThreadedEngine's own threads, and the ASR interface's one-call-at-a-time recognize."""

import asyncio
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from sub250.asr.base import ASREngine, Need
from sub250.engine import ThreadedEngine
from sub250.errors import ConfigError


class Engine(ThreadedEngine):
    name = "fake-engine"


async def test_run_runs_off_the_loop_thread_on_the_engines_threads():
    engine = Engine(workers=1)
    loop_thread = threading.get_ident()
    where = await engine.run(lambda: (threading.get_ident(), threading.current_thread().name))
    assert where[0] != loop_thread
    assert where[1].startswith("fake-engine")
    assert await engine.run(lambda a, b=0: a + b, 2, b=3) == 5
    engine.close_threads()
    assert (await engine.run(lambda: threading.current_thread().name)).startswith("fake-engine"), "runs after close"
    engine.close_threads()


async def test_run_does_not_block_the_loop():
    engine, gate = Engine(), threading.Event()
    call = asyncio.ensure_future(engine.run(gate.wait, 5))
    ticks = 0
    for _ in range(3):
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 3 and not call.done()
    gate.set()
    assert await call is True
    engine.close_threads()


async def test_run_raises_what_the_call_raised():
    engine = Engine()

    def fail():
        raise ValueError("bad audio")

    with pytest.raises(ValueError, match="bad audio"):
        await engine.run(fail)
    engine.close_threads()


class GatedASR(ASREngine):
    """Each transcription waits for ``gate``; records the audio size and how many run at once."""

    def __init__(self, fifo=False, workers=1):
        super().__init__(fifo=fifo, workers=workers)
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls = []
        self.finals = []
        self.running = 0
        self.most = 0
        self._count = threading.Lock()

    def load(self):
        pass

    def transcribe(self, audio, *, window=None, prompt=None, final=False):
        with self._count:
            self.running += 1
            self.most = max(self.most, self.running)
        self.entered.set()
        try:
            assert self.gate.wait(5)
            self.calls.append((audio.size, window))
            self.finals.append(final)
            return SimpleNamespace(text=f"{audio.size}")
        finally:
            with self._count:
                self.running -= 1


async def wait_until(predicate, timeout=5.0):
    for _ in range(int(timeout / 0.002)):
        if predicate():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("timed out")


async def test_recognize_runs_one_call_at_a_time_and_is_busy_meanwhile():
    asr = GatedASR()
    assert not asr.busy
    first = asyncio.ensure_future(asr.recognize(np.zeros(10, dtype=np.float32)))
    second = asyncio.ensure_future(asr.recognize(np.zeros(20, dtype=np.float32), window="tiny"))
    await wait_until(asr.entered.is_set)
    assert asr.busy
    await asyncio.sleep(0.01)
    assert asr.running == 1, "the second waits for the first"
    asr.gate.set()
    assert (await first).text == "10" and (await second).text == "20"
    assert asr.calls == [(10, None), (20, "tiny")]
    assert asr.most == 1
    assert not asr.busy
    asr.close_threads()


async def test_recognize_runs_on_the_engines_thread():
    asr = GatedASR()
    asr.gate.set()
    seen = []
    asr.transcribe = lambda audio, window=None, prompt=None, final=False: seen.append(threading.current_thread().name) or SimpleNamespace(text="")
    await asr.recognize(np.zeros(1, dtype=np.float32))
    assert seen and seen[0].startswith("asr")
    asr.close_threads()


async def test_cancelling_a_recognize_waiting_for_its_turn_means_it_never_runs():
    asr = GatedASR()
    first = asyncio.ensure_future(asr.recognize(np.zeros(10, dtype=np.float32)))
    await wait_until(asr.entered.is_set)
    waiting = asyncio.ensure_future(asr.recognize(np.zeros(20, dtype=np.float32)))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    asr.gate.set()
    await first
    await asr.run(lambda: None)  # anything queued on the ASR thread has run by now
    assert asr.calls == [(10, None)], "the cancelled call never transcribed"
    assert not asr.busy
    asr.close_threads()


async def test_busy_stays_true_while_a_cancelled_transcription_still_runs():
    asr = GatedASR()
    call = asyncio.ensure_future(asr.recognize(np.zeros(10, dtype=np.float32)))
    await wait_until(asr.entered.is_set)
    call.cancel()
    await asyncio.wait([call])
    try:
        assert asr.running == 1, "the thread is still transcribing"
        assert asr.busy
    finally:
        asr.gate.set()
        await asr.run(lambda: None)
        asr.close_threads()


async def queue_behind_a_running_call(asr, *needs):
    """One call runs (held at the gate); then one call per need queues, audio sizes 1, 2, ... in that order."""
    running = asyncio.ensure_future(asr.recognize(np.zeros(100, dtype=np.float32)))
    await wait_until(asr.entered.is_set)
    waiting = [asyncio.ensure_future(asr.recognize(np.zeros(k, dtype=np.float32), need=need))
               for k, need in enumerate(needs, start=1)]
    await asyncio.sleep(0.01)
    return [running, *waiting]


async def test_waiting_calls_are_served_most_urgent_first_then_by_arrival():
    asr = GatedASR()
    calls = await queue_behind_a_running_call(asr, Need.PARTIAL, Need.AHEAD, Need.FINAL, Need.INTERRUPTION,
                                              Need.FINAL)
    asr.gate.set()
    await asyncio.gather(*calls)
    assert [size for size, _ in asr.calls] == [100, 3, 5, 4, 2, 1]
    assert asr.most == 1
    asr.close_threads()


async def test_a_callable_need_is_read_when_the_engine_frees():
    """A reply prepared at a pause asks as AHEAD; committed while it waits, it is served as FINAL."""
    asr = GatedASR()
    state = {"need": Need.AHEAD}
    calls = await queue_behind_a_running_call(asr, Need.INTERRUPTION, lambda: state["need"])
    state["need"] = Need.FINAL
    asr.gate.set()
    await asyncio.gather(*calls)
    assert [size for size, _ in asr.calls] == [100, 2, 1]
    asr.close_threads()


async def test_arrival_scheduling_serves_in_turn_whatever_the_need():
    """``[asr] scheduling = "arrival"``: the order before Need, kept to compare against."""
    asr = GatedASR(fifo=True)
    calls = await queue_behind_a_running_call(asr, Need.PARTIAL, Need.AHEAD, Need.FINAL)
    asr.gate.set()
    await asyncio.gather(*calls)
    assert [size for size, _ in asr.calls] == [100, 1, 2, 3]
    asr.close_threads()


def test_whisper_scheduling_is_need_or_arrival():
    from sub250.asr.whisper import WhisperASR
    from sub250.errors import ConfigError

    assert WhisperASR("model", {}).scheduling == "need"
    assert WhisperASR("model", {"scheduling": "arrival"}).scheduling == "arrival"
    with pytest.raises(ConfigError, match="scheduling"):
        WhisperASR("model", {"scheduling": "fastest"})
    assert WhisperASR("model", {}).workers == 1 and WhisperASR("model", {"workers": 2}).workers == 2
    for bad in (0, 9, 1.5, "2", True):
        with pytest.raises(ConfigError, match="workers"):
            WhisperASR("model", {"workers": bad})


def test_whisper_beams_final_transcripts_with_final_beam_size_else_beam_size():
    from sub250.asr.whisper import WhisperASR
    from sub250.errors import ConfigError

    asr = WhisperASR("model", {})
    assert (asr.beam_size, asr.final_beam_size) == (1, 1)
    asr = WhisperASR("model", {"beam_size": 1, "final_beam_size": 2})
    assert (asr.beam_size, asr.final_beam_size) == (1, 2)
    assert WhisperASR("model", {"beam_size": 3}).final_beam_size == 3, "final_beam_size defaults to beam_size"
    for key in ("beam_size", "final_beam_size"):
        for bad in (0, 11, 2.0, "2", True):
            with pytest.raises(ConfigError, match=key):
                WhisperASR("model", {key: bad})


async def test_recognize_tells_the_engine_which_calls_a_reply_answers():
    asr = GatedASR()
    asr.gate.set()
    for need in (Need.FINAL, Need.AHEAD, Need.INTERRUPTION, Need.PARTIAL, lambda: Need.AHEAD):
        await asr.recognize(np.zeros(1, dtype=np.float32), need=need)
    assert asr.finals == [True, True, False, False, True]


async def test_with_two_workers_a_final_runs_beside_a_partial_but_no_partial_beside_another_call():
    asr = GatedASR(workers=2)
    partial = asyncio.ensure_future(asr.recognize(np.zeros(1, dtype=np.float32), need=Need.PARTIAL))
    await wait_until(asr.entered.is_set)
    assert asr.busy, "no second partial now: the last slot is kept for urgent calls"
    final = asyncio.ensure_future(asr.recognize(np.zeros(2, dtype=np.float32), need=Need.FINAL))
    await wait_until(lambda: asr.running == 2)
    asr.gate.set()
    await asyncio.gather(partial, final)
    assert asr.most == 2 and not asr.busy
    asr.close_threads()


