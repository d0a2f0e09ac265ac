"""The TTS interface: a blocking ``synthesize`` each engine implements; the session runs it on the engine's
own threads (``await tts.run(...)``)."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass

from app.engine import ThreadedEngine


@dataclass(frozen=True)
class AudioChunk:
    """PCM16 mono little-endian bytes at ``sample_rate``; one chunk per sentence."""

    pcm16: bytes
    sample_rate: int

    @property
    def seconds(self) -> float:
        return len(self.pcm16) / 2 / self.sample_rate


class TTSEngine(ThreadedEngine, abc.ABC):
    name = "tts"
    sample_rate: int

    def __init__(self, workers: int = 2) -> None:
        super().__init__(workers=workers)

    @abc.abstractmethod
    def load(self) -> None: ...

    @abc.abstractmethod
    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        """Yield one chunk per sentence (blocking, CPU-heavy: run it with :meth:`run`)."""
