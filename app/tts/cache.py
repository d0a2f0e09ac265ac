"""Speech said before, kept: a chunk's synthesized audio by its text, least recently used out past a byte budget.

A support line says the same things again and again: the fixed replies (the out-of-scope answer, the nudge
after a long silence) and the knowledge base's own sentences, which the extractive answers speak as they are.
Synthesizing such a chunk again costs its caller 100-700 ms of waiting for a core (``tts_first_audio``,
docs/BENCHMARKS.md §28); found here it costs nothing. The fixed replies are put in at start
(:meth:`TTSEngine.warm <app.tts.base.TTSEngine.warm>`). The same text always sounds the same then (Piper's
noise would vary it a little otherwise). Thread-safe: the TTS engine's worker threads read and fill it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.tts.base import AudioChunk

__all__ = ["SpeechCache"]


class SpeechCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[AudioChunk, ...]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def _size(chunks: tuple[AudioChunk, ...]) -> int:
        return sum(len(c.pcm16) for c in chunks)

    def get(self, text: str) -> tuple[AudioChunk, ...] | None:
        with self._lock:
            chunks = self._items.get(text)
            if chunks is None:
                self.misses += 1
                return None
            self._items.move_to_end(text)
            self.hits += 1
            return chunks

    def put(self, text: str, chunks: tuple[AudioChunk, ...]) -> None:
        """Keep ``chunks`` for ``text`` (a chunk larger than the whole budget is not kept)."""
        size = self._size(chunks)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(text, None)
            if old is not None:
                self._bytes -= self._size(old)
            self._items[text] = chunks
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= self._size(dropped)

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)
