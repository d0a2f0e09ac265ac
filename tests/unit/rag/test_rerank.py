import numpy as np
import pytest

from sub250.errors import ConfigError
from sub250.rag.rerank import Reranker, RerankWeights
from sub250.rag.store import RRF_K, RetrievedPassage
from tests.unit import bags

VOCAB = ["replace", "filter", "months", "warning", "clear", "light", "pairing", "code"]


def bag(text: str) -> np.ndarray:
    return bags.bag(text, VOCAB)


def P(chunk_id, title, content, distance):
    return RetrievedPassage(chunk_id, "kb.md", title, content, distance)


class Sentences:
    def __init__(self):
        self.asked = []

    async def sentences(self, passage):
        self.asked.append(passage.chunk_id)
        texts = passage.content.split(". ")
        return texts, np.stack([bag(t) for t in texts])


def Embed():
    return bags.BagEmbed(VOCAB)


WARNING = P(1, "Filter Life Warning Will Not Clear", "Hold the button for five seconds. The light goes out", 0.40)
WHEN = P(2, "When to Replace the Filter", "Replace the filter every nine months. Sooner in a dusty home", 0.45)


async def test_a_passage_whose_sentence_and_title_answer_moves_ahead_of_a_closer_one():
    q = bag("when do I replace the filter, how many months")
    r = Reranker(Embed(), Sentences())
    # the store put WARNING first (its fused place), though WHEN's best sentence and title are the question's
    got = await r.rerank(q, [WARNING, WHEN])
    assert [p.chunk_id for p in got] == [2, 1]
    s = await r.scores(q, [WARNING, WHEN])
    w = RerankWeights()
    want = (w.cosine * 0.55 + w.fusion / (RRF_K + 1) + w.sentence * float(bag(WHEN.content.split(". ")[0]) @ q)
            + w.title * float(bag(WHEN.title) @ q))
    assert s[1] == pytest.approx(want, rel=1e-5)


async def test_with_only_the_fused_place_weighed_the_order_is_kept():
    q = bag("replace filter months")
    sentences = Sentences()
    r = Reranker(Embed(), sentences, RerankWeights(cosine=0, sentence=0, title=0, fusion=1))
    assert [p.chunk_id for p in await r.rerank(q, [WARNING, WHEN])] == [1, 2]
    assert sentences.asked == []  # weights at 0 compute nothing


async def test_titles_are_embedded_once_and_kept():
    embed = Embed()
    r = Reranker(embed, Sentences())
    assert await r.warm([WARNING, WHEN, WARNING]) == 2
    assert embed.calls == [[WARNING.title, WHEN.title]]
    await r.rerank(bag("filter"), [WHEN, WARNING])
    assert len(embed.calls) == 1


@pytest.mark.parametrize("cfg", [{"cosine": -1}, {"fusion": 1e9}, {"cosine": "much"}, {"speed": 1}, [1, 2]])
def test_bad_weights_are_a_config_error(cfg):
    with pytest.raises(ConfigError):
        RerankWeights.from_config(cfg)


def test_weights_default_and_read_from_the_profile():
    assert RerankWeights.from_config(None) == RerankWeights()
    assert RerankWeights.from_config({"title": 0.5}).title == 0.5


E1 = P(3, "Error E1 Fan Motor Stalled", "The fan motor could not turn. Unplug the fan", 0.30)
E7 = P(4, "Error E7 Tip-Over Detected", "The purifier stops when it is tipped over", 0.50)


async def test_the_lexical_term_moves_up_the_passage_holding_a_rare_word_of_the_question():
    q = bag("filter")  # the bag embedder knows none of these words: only the store's cosine and place speak
    question = "the screen says E7"
    plain = Reranker(Embed(), Sentences(), RerankWeights(sentence=0, title=0))
    assert [p.chunk_id for p in await plain.rerank(q, [E1, E7], question)] == [3, 4]  # not warmed: no BM25
    lexical = Reranker(Embed(), Sentences(), RerankWeights(sentence=0, title=0, lexical=1.0))
    # E1 leads by 0.5 x 0.2 of cosine and a fused place: less than E7's BM25 for the rare "E7"
    await lexical.warm([E1, E7, WARNING, WHEN])
    assert lexical.lexical is not None and len(lexical.lexical) == 4
    assert [p.chunk_id for p in await lexical.rerank(q, [E1, E7], question)] == [4, 3]
    # without the question's text the term counts 0
    assert [p.chunk_id for p in await lexical.rerank(q, [E1, E7])] == [3, 4]
    bm25 = lexical.lexical.scores(question, [E1, E7])
    scores = await lexical.scores(q, [E1, E7], question)
    assert scores[1] == pytest.approx(0.5 * 0.5 + 20.0 / (RRF_K + 1) + 1.0 * bm25[1], rel=1e-5)


async def test_with_the_lexical_weight_at_zero_no_index_is_built():
    r = Reranker(Embed(), Sentences(), RerankWeights(lexical=0))
    await r.warm([E1, E7])
    assert r.lexical is None


def test_the_lexical_weight_is_read_from_the_profile():
    assert RerankWeights.from_config({"lexical": 0.1}).lexical == 0.1
    assert RerankWeights().lexical == 0.05
    with pytest.raises(ConfigError):
        RerankWeights.from_config({"lexical": -0.5})
