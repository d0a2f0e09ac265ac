"""A small query cache in front of the vector search.

- **exact**: the same question after normalization (case, punctuation, spaces) skips embedding and search;
- **near**: a question whose embedding is within ``near_threshold`` (cosine) of a cached one skips the
  search. The threshold is measured, not guessed: ``docs/lab/probes/measure_query_reuse.py`` replays the corpus'
  questions against their partial and ASR-like variants and finds the lowest cosine at which reusing
  the cached passages never changed the top-k (docs/BENCHMARKS.md has the run).

Retrieval ahead of the commit (on a stable partial transcript) fills this cache; the committed question
then hits it as exact or near. Entries live ``ttl_s`` seconds, so a knowledge base re-ingested by another
process is seen soon; :meth:`clear` drops everything at once.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_NON_WORD = re.compile(r"[^\w']+")


def normalize(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


@dataclass
class CacheEntry:
    query: str
    vector: np.ndarray
    passages: list[Any]
    created: float
    #: How long the search behind this entry took (ms) — the work a hit saves.
    search_ms: float = 0.0
    hits: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class QueryCache:
    def __init__(self, max_entries: int = 256, near_threshold: float | None = 0.95, ttl_s: float = 300.0) -> None:
        self.max_entries = max_entries
        self.near_threshold = near_threshold
        self.ttl_s = ttl_s
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()
        self.counts = {"exact": 0, "near": 0, "miss": 0}

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def hit_rate(self) -> float | None:
        total = sum(self.counts.values())
        return None if total == 0 else (self.counts["exact"] + self.counts["near"]) / total

    def _expire(self, now: float) -> None:
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if now - entry.created <= self.ttl_s:
                break
            del self._entries[key]

    def exact(self, query: str, *, count: bool = True) -> CacheEntry | None:
        now = time.monotonic()
        self._expire(now)
        entry = self._entries.get(normalize(query))
        if entry is not None and count:
            entry.hits += 1
            self.counts["exact"] += 1
        return entry

    def near(self, vector: np.ndarray, *, count: bool = True) -> tuple[CacheEntry | None, float | None]:
        """The closest cached entry and its cosine; a hit only at or above the threshold."""
        if not self._entries or self.near_threshold is None:
            if count:
                self.counts["miss"] += 1
            return None, None
        entries = list(self._entries.values())
        sims = np.stack([e.vector for e in entries]) @ vector  # embeddings are unit-normalized
        best = int(np.argmax(sims))
        sim = float(sims[best])
        if sim >= self.near_threshold:
            if count:
                entries[best].hits += 1
                self.counts["near"] += 1
            return entries[best], sim
        if count:
            self.counts["miss"] += 1
        return None, sim

    def put(self, query: str, vector: np.ndarray, passages: list[Any], search_ms: float = 0.0) -> CacheEntry:
        key = normalize(query)
        entry = CacheEntry(query, vector, passages, time.monotonic(), search_ms)
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return entry

    def clear(self) -> None:
        self._entries.clear()
