"""The TTS interface."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class AudioChunk:
    """PCM16 mono little-endian bytes at ``sample_rate``; one chunk per sentence."""

    pcm16: bytes
    sample_rate: int

    @property
    def seconds(self) -> float:
        return len(self.pcm16) / 2 / self.sample_rate


class TTSEngine(abc.ABC):
    name = "tts"
    sample_rate: int

    @abc.abstractmethod
    def load(self) -> None: ...

    @abc.abstractmethod
    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        """Yield one chunk per sentence (blocking, CPU-heavy: run in a thread)."""
