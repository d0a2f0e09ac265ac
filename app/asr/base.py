"""The ASR interface: a blocking ``transcribe`` each engine implements, and ``recognize``, the async call the
session uses: ``workers`` transcriptions at a time per engine (one by default), on the engine's own threads, the
most urgent waiting call of every session first (:class:`Need`); with two or more, partials never take the last
one, so a final never waits behind a partial."""

from __future__ import annotations

import abc
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

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


class ASREngine(ThreadedEngine, abc.ABC):
    name = "asr"

    def __init__(self, *, workers: int = 1, fifo: bool = False) -> None:
        super().__init__(workers=workers)
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
        transcribed as ``final``."""
        await self._slots.acquire(need, leave_free=self._partial_leaves if need == Need.PARTIAL else 0)
        final = (need() if callable(need) else need) in (Need.FINAL, Need.AHEAD)

        def start() -> Awaitable[Transcript]:
            return self.run(self.transcribe, audio, window=window, prompt=prompt, final=final)

        return await self._slots.hold_until_done(start)
