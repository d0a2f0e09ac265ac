"""The ASR interface: a blocking ``transcribe`` each engine implements, and ``recognize``, the async call the
session uses: ``workers`` transcriptions at a time per engine (one by default), on the engine's own threads, the
most urgent waiting call of every session first (:class:`Need`); with two or more, partials never take the last
one, so a final never waits behind a partial. An engine that can transcribe several utterances in one call
(:meth:`ASREngine.batch_key`) serves the finals waiting when a slot frees together, up to ``max_batch``."""

from __future__ import annotations

import abc
import asyncio
import enum
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

import numpy as np

from sub250.engine import ThreadedEngine
from sub250.priority_slots import PrioritySlots


class Need(enum.IntEnum):
    """Why a transcription is asked for, most urgent first: the order in which waiting calls of all sessions
    get the engine (a running call is never interrupted)."""

    #: A committed turn's final transcript: the caller is waiting for the reply.
    FINAL = 0
    #: Is the sound over a reply the caller's words? The reply is paused until it is told.
    INTERRUPTION = 1
    #: The final transcript of a reply prepared at a pause, before the commit (served as FINAL once committed).
    AHEAD = 2
    #: A partial transcript (display, retrieval ahead): nobody waits for it.
    PARTIAL = 3


@dataclass(frozen=True)
class Transcript:
    text: str
    #: Seconds of audio transcribed, and seconds of CPU wall time it took.
    audio_seconds: float
    compute_seconds: float
    language: str = "en"
    #: The model's probability that the audio holds no speech (Whisper's ``no_speech_prob``; for several
    #: segments, the lowest), when the engine reports one. A hallucination on noise has words *and* a high one.
    no_speech_prob: float | None = None
    #: The mean log-probability of the transcript's tokens (Whisper's ``avg_logprob``; for several segments,
    #: the lowest), when the engine reports one: low when the model was guessing at what it heard.
    avg_logprob: float | None = None


@dataclass(eq=False)
class _Call:
    """A final waiting for a slot that another final's call may take along (same :meth:`ASREngine.batch_key`)."""

    audio: np.ndarray
    key: Hashable
    result: asyncio.Future[Transcript] = field(repr=False)


class ASREngine(ThreadedEngine, abc.ABC):
    name = "asr"

    def __init__(self, *, workers: int = 1, fifo: bool = False, max_batch: int = 1) -> None:
        super().__init__(workers=workers)
        #: Finals one call transcribes at most (1: each its own call), for engines with :meth:`batch_key`.
        self.max_batch = max_batch
        # ``workers`` calls at once (the engine must run that many in parallel): partials skip when none is free
        # for them, the rest wait, served by Need (``fifo``: by arrival only, the scheduling before Need:
        # profile ``[asr] scheduling = "arrival"``).
        self._slots = PrioritySlots(workers, fifo=fifo)
        #: Slots a partial leaves free for urgent calls: the last one, when there are two or more.
        self._partial_leaves = 1 if workers > 1 else 0

    @abc.abstractmethod
    def load(self) -> None:
        """Load the model (blocking; call from a thread)."""

    @abc.abstractmethod
    def transcribe(self, audio: np.ndarray, *, window: str | None = None, prompt: str | None = None,
                   final: bool = False) -> Transcript:
        """Transcribe float32 16 kHz mono audio (blocking, CPU-heavy: use :meth:`recognize` from async code).
        ``window`` may ask for a faster, less accurate pass (engines that have none ignore it); ``prompt``:
        text that primes the recognizer (None: the engine's default, "": none); ``final``: a reply will answer
        this transcript (not a partial or an interruption check), so an engine may decode it more carefully."""

    def batch_key(self, audio: np.ndarray, *, window: str | None, prompt: str | None) -> Hashable | None:
        """Finals with the same key can be transcribed in one :meth:`transcribe_batch` call; None (the default):
        this one cannot."""
        return None

    def transcribe_batch(self, audios: list[np.ndarray], key: Hashable) -> list[Transcript]:
        """Transcribe several finals of one :meth:`batch_key` in one call (blocking), in order."""
        raise NotImplementedError(f"{type(self).__name__} does not batch transcriptions")

    @property
    def busy(self) -> bool:
        """No slot for a partial now: a transcription is running (with two or more slots: as many as partials
        may leave free) or waiting."""
        return not self._slots.free(self._partial_leaves)

    async def recognize(self, audio: np.ndarray, *, window: str | None = None, prompt: str | None = None,
                        need: Need | Callable[[], Need] = Need.FINAL) -> Transcript:
        """:meth:`transcribe` on the engine's threads, ``workers`` calls at a time; waiting calls are served by
        ``need`` (a callable is read each time a slot frees), then by arrival. Cancelling a call that is still
        waiting for its turn means it never runs; cancelling one that runs returns at once, but its slot stays
        taken (and the next call waits) until the thread has really finished. A FINAL or AHEAD call is
        transcribed as ``final``. A final whose :meth:`batch_key` is not None may be transcribed in one call
        with others of its key waiting when it gets its slot (``max_batch`` in all), or taken along by one."""
        final = (need() if callable(need) else need) in (Need.FINAL, Need.AHEAD)
        key = self.batch_key(audio, window=window, prompt=prompt) if final and self.max_batch > 1 else None
        call = None
        if key is not None:
            call = _Call(audio, key, asyncio.get_running_loop().create_future())
            call.result.add_done_callback(_retrieved)
        if not await self._slots.acquire(need, leave_free=self._partial_leaves if need == Need.PARTIAL else 0,
                                         tag=call):
            assert call is not None  # only a call with a key (tag) is taken along
            return await asyncio.shield(call.result)  # another final's call took this one along
        final = (need() if callable(need) else need) in (Need.FINAL, Need.AHEAD)

        def start() -> Awaitable[Transcript]:
            along = [] if call is None else self._slots.take(lambda other: other.key == key, self.max_batch - 1)
            if call is not None and along:
                return self._run_batch(call, along)
            return self.run(self.transcribe, audio, window=window, prompt=prompt, final=final)

        return await self._slots.hold_until_done(start)

    def _run_batch(self, call: _Call, along: list[_Call]) -> asyncio.Future[Transcript]:
        """One :meth:`transcribe_batch` for ``call`` and the finals taken ``along`` (whose results are set when
        it is done); the future of ``call``'s transcript."""
        calls = [call, *along]
        batch = asyncio.ensure_future(self.run(self.transcribe_batch, [c.audio for c in calls], call.key))

        def hand_out(done: asyncio.Future[list[Transcript]]) -> None:
            for i, c in enumerate(calls):
                if c.result.done():
                    continue
                if done.cancelled():
                    c.result.cancel()
                elif (exc := done.exception()) is not None:
                    c.result.set_exception(exc)
                else:
                    c.result.set_result(done.result()[i])

        batch.add_done_callback(hand_out)
        return call.result


def _retrieved(future: asyncio.Future) -> None:
    """A taken-along final whose caller gave up still has its outcome read (no "never retrieved" warning)."""
    if not future.cancelled():
        future.exception()
