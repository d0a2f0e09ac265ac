"""The retriever's own steps around the store: the question cleaned, the candidates reranked."""

import numpy as np

from sub250.engine import ThreadedEngine
from sub250.rag.retriever import RetrievalOptions, Retriever
from sub250.rag.store import RetrievedPassage


class Embedder(ThreadedEngine):
    def __init__(self):
        super().__init__()
        self.texts = []

    def embed_one(self, text):
        self.texts.append(text)
        return np.array([1.0, 0.0], dtype=np.float32)


def passage(i):
    return RetrievedPassage(i, "kb.md", f"T{i}", f"passage {i}", 0.5)


class Store:
    def __init__(self):
        self.asked = []

    async def hybrid_search(self, vec, text, k, *, text_weight):
        self.asked.append((text, k))
        return [passage(i) for i in range(k)]

    async def search(self, vec, k):
        self.asked.append((None, k))
        return [passage(i) for i in range(k)]


class Reverse:
    """A reranker that puts the candidates in reverse order."""

    def __init__(self):
        self.seen = []
        self.questions = []

    async def rerank(self, vector, passages, question=""):
        self.seen.append(len(passages))
        self.questions.append(question)
        return list(reversed(passages))


async def test_the_question_is_searched_without_its_fillers_when_asked():
    embedder, store = Embedder(), Store()
    r = Retriever(embedder, store, k=3, options=RetrievalOptions(hybrid=True, clean=True))
    await r.retrieve("um, so how much is it gonna cost?")
    assert embedder.texts == ["how much is it going to cost?"] and store.asked == [("how much is it going to cost?", 3)]
    plain = Retriever(embedder, store, k=3, options=RetrievalOptions(hybrid=True))
    await plain.retrieve("um, how much?")
    assert embedder.texts[-1] == "um, how much?"


async def test_the_reranker_orders_the_candidates_and_k_of_them_are_kept():
    store, reranker = Store(), Reverse()
    r = Retriever(Embedder(), store, k=3, reranker=reranker, options=RetrievalOptions(candidates=10, clean=True))
    got = await r.retrieve("um, filter")
    assert store.asked == [(None, 10)] and reranker.seen == [10]
    assert reranker.questions == ["filter"]  # the question as searched: its lexical term reads it
    assert [p.chunk_id for p in got.passages] == [9, 8, 7]
    without = await Retriever(Embedder(), store, k=3).retrieve("filter")
    assert [p.chunk_id for p in without.passages] == [0, 1, 2] and store.asked[-1] == (None, 3)


def test_the_profile_s_retrieval_options_are_read_typed_and_checked():
    import pytest

    from sub250.errors import ConfigError
    from sub250.rag.rerank import RerankWeights
    from sub250.rag.retriever import RetrievalOptions

    assert RetrievalOptions.from_stage({}) == RetrievalOptions()
    o = RetrievalOptions.from_stage({"hybrid": True, "hybrid_text_weight": 0.5, "clean_questions": True,
                                     "rerank": True, "rerank_candidates": 20, "rerank_weights": {"title": 0}})
    assert (o.hybrid, o.text_weight, o.clean, o.rerank, o.candidates) == (True, 0.5, True, True, 20)
    assert o.weights == RerankWeights(title=0)
    for bad in ({"rerank_candidates": 1}, {"rerank_candidates": 10**6}, {"rerank_candidates": "ten"},
                {"rerank_candidates": True}, {"hybrid_text_weight": "half"}, {"hybrid_text_weight": -1},
                {"rerank_weights": {"title": "big"}}, {"hybrid": "no"}, {"rerank": 1}, {"clean_questions": None}):
        with pytest.raises(ConfigError):
            RetrievalOptions.from_stage(bad)
