"""The ASR interface: a blocking ``transcribe`` each engine implements, and ``recognize``, the async call the
session uses: one transcription at a time per engine, on the engine's own thread, the most urgent waiting call of
every session first (:class:`Need`)."""

from __future__ import annotations

import abc
import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.engine import ThreadedEngine
from app.priority_lock import PriorityLock


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


class ASREngine(ThreadedEngine, abc.ABC):
    name = "asr"

    def __init__(self, *, fifo: bool = False) -> None:
        super().__init__(workers=1)
        # One Whisper call at a time: partials skip when it is busy, the rest wait, served by Need
        # (``fifo``: by arrival only, the scheduling before Need: profile ``[asr] scheduling = "arrival"``).
        self._lock = PriorityLock(fifo=fifo)

    @abc.abstractmethod
    def load(self) -> None:
        """Load the model (blocking; call from a thread)."""

    @abc.abstractmethod
    def transcribe(self, audio: np.ndarray, *, window: str | None = None, prompt: str | None = None) -> Transcript:
        """Transcribe float32 16 kHz mono audio (blocking, CPU-heavy: use :meth:`recognize` from async code).
        ``window`` may ask for a faster, less accurate pass (engines that have none ignore it); ``prompt``:
        text that primes the recognizer (None: the engine's default, "": none)."""

    @property
    def busy(self) -> bool:
        """A transcription is running or waiting."""
        return self._lock.locked() or self._lock.waiting > 0

    async def recognize(self, audio: np.ndarray, *, window: str | None = None, prompt: str | None = None,
                        need: Need | Callable[[], Need] = Need.FINAL) -> Transcript:
        """:meth:`transcribe` on the engine's thread, one call at a time; waiting calls are served by ``need``
        (a callable is read each time the engine frees), then by arrival. Cancelling a call that is still
        waiting for its turn means it never runs; cancelling one that runs returns at once, but the engine
        stays busy (and the next call waits) until the thread has really finished."""
        await self._lock.acquire(need)
        try:
            running = asyncio.ensure_future(self.run(self.transcribe, audio, window=window, prompt=prompt))
        except BaseException:
            self._lock.release()
            raise
        running.add_done_callback(lambda _: self._lock.release())
        return await asyncio.shield(running)
