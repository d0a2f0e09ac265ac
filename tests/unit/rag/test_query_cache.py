"""The query cache: exact and near-duplicate hits, counting, expiry, capacity; the retriever's use of it."""

import asyncio

import numpy as np
import pytest

from sub250.engine import ThreadedEngine
from sub250.rag.query_cache import QueryCache, normalize
from sub250.rag.retriever import Retriever


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_normalize_ignores_case_punctuation_and_spacing():
    assert normalize("  How long does the FILTER last?! ") == "how long does the filter last"
    assert normalize("What's in the box") == "what's in the box"


def test_exact_near_and_miss_are_counted():
    cache = QueryCache(near_threshold=0.95)
    assert cache.hit_rate is None
    cache.put("How long does the filter last?", unit(1, 0, 0), ["p1"])
    assert cache.exact("how long does the filter last").passages == ["p1"]
    entry, sim = cache.near(unit(1, 0.1, 0))
    assert entry is not None and sim == pytest.approx(0.995, abs=1e-3)
    entry, sim = cache.near(unit(1, 1, 0))  # cosine 0.707: another question
    assert entry is None and sim == pytest.approx(0.707, abs=1e-3)
    assert cache.exact("something else") is None  # an exact miss is not counted: near decides
    assert cache.counts == {"exact": 1, "near": 1, "miss": 1}
    assert cache.hit_rate == pytest.approx(2 / 3)
    cache.exact("how long does the filter last", count=False)  # ahead-of-time lookups stay out
    assert cache.counts["exact"] == 1


def test_no_threshold_means_exact_only_and_entries_expire_and_are_bounded():
    cache = QueryCache(max_entries=2, near_threshold=None, ttl_s=0.05)
    cache.put("a b c", unit(1, 0), ["a"])
    assert cache.near(unit(1, 0))[0] is None
    cache.put("d e f", unit(0, 1), ["d"])
    cache.put("g h i", unit(1, 1), ["g"])
    assert len(cache) == 2 and cache.exact("a b c") is None  # the oldest went
    import time

    time.sleep(0.06)
    assert cache.exact("g h i") is None and len(cache) == 0


class FakeEmbedder(ThreadedEngine):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def embed_one(self, text):
        self.calls += 1
        return unit(1, 0.01 * len(text), 0)


class FakeStore:
    def __init__(self):
        self.searches = 0

    async def search(self, vec, k):
        self.searches += 1
        return [f"passage-{self.searches}"]


def test_retriever_serves_hits_without_searching_and_reports_how():
    embedder, store = FakeEmbedder(), FakeStore()
    r = Retriever(embedder, store, k=3, cache=QueryCache(near_threshold=0.99))

    async def run():
        first = await r.retrieve("How long does the filter last?")
        again = await r.retrieve("how long does the filter last")
        near = await r.retrieve("How long does the filter last, then?")  # embeds: a near-identical vector
        other_k = await r.retrieve("How long does the filter last?", k=5)  # another k: not cached
        return first, again, near, other_k

    first, again, near, other_k = asyncio.run(run())
    assert (first.cache, again.cache, near.cache, other_k.cache) == ("miss", "exact", "near", "off")
    assert first.passages == again.passages == near.passages == ["passage-1"]
    assert again.embed_ms == 0 and store.searches == 2 and embedder.calls == 3
