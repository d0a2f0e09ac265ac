"""The TTS interface: a blocking ``synthesize`` each engine implements; the session runs it on the engine's
own threads (``await tts.run(...)``)."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from app.engine import ThreadedEngine
from app.tts.cache import SpeechCache


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

    def __init__(self, workers: int = 2, *, cache_bytes: int = 0) -> None:
        super().__init__(workers=workers)
        #: Speech said before (app/tts/cache.py); None: every chunk is synthesized.
        self.cache = SpeechCache(cache_bytes) if cache_bytes > 0 else None

    @abc.abstractmethod
    def load(self) -> None: ...

    @abc.abstractmethod
    def synthesize(self, text: str) -> Iterator[AudioChunk]:
        """Yield one chunk per sentence (blocking, CPU-heavy: run it with :meth:`run`)."""

    def speak(self, text: str) -> tuple[AudioChunk, ...]:
        """``text``'s audio: from the cache when it was said before, else synthesized (and kept). Blocking on a
        miss: run it with :meth:`run`."""
        if self.cache is None:
            return tuple(self.synthesize(text))
        chunks = self.cache.get(text)
        if chunks is None:
            chunks = tuple(self.synthesize(text))
            self.cache.put(text, chunks)
        return chunks

    def warm(self, texts: Iterable[str]) -> int:
        """Synthesize ``texts`` into the cache now (blocking: at start, in a thread); returns how many are held."""
        if self.cache is None:
            return 0
        for text in texts:
            self.speak(text)
        return len(self.cache)
