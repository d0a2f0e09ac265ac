"""ThreadedEngine's own threads, and the ASR interface's one-call-at-a-time recognize."""

import asyncio
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from app.asr.base import ASREngine
from app.engine import ThreadedEngine


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

    def __init__(self):
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls = []
        self.running = 0
        self.most = 0
        self._count = threading.Lock()

    def load(self):
        pass

    def transcribe(self, audio, *, window=None, prompt=None):
        with self._count:
            self.running += 1
            self.most = max(self.most, self.running)
        self.entered.set()
        try:
            assert self.gate.wait(5)
            self.calls.append((audio.size, window))
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
    asr.transcribe = lambda audio, window=None, prompt=None: seen.append(threading.current_thread().name) or SimpleNamespace(text="")
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
