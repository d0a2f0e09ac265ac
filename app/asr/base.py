"""The ASR interface: a blocking ``transcribe`` each engine implements, and ``recognize``, the async call the
session uses: one transcription at a time per engine, on the engine's own thread."""

from __future__ import annotations

import abc
import asyncio
from dataclasses import dataclass

import numpy as np

from app.engine import ThreadedEngine


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

    def __init__(self) -> None:
        super().__init__(workers=1)
        # One Whisper call at a time: partials skip when it is busy, finals wait their turn.
        self._lock = asyncio.Lock()

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
        return self._lock.locked()

    async def recognize(self, audio: np.ndarray, *, window: str | None = None,
                        prompt: str | None = None) -> Transcript:
        """:meth:`transcribe` on the engine's thread, one call at a time. Cancelling a call that is still
        waiting for its turn means it never runs; cancelling one that runs returns at once, but the engine
        stays busy (and the next call waits) until the thread has really finished."""
        await self._lock.acquire()
        try:
            running = asyncio.ensure_future(self.run(self.transcribe, audio, window=window, prompt=prompt))
        except BaseException:
            self._lock.release()
            raise
        running.add_done_callback(lambda _: self._lock.release())
        return await asyncio.shield(running)
