import numpy as np
import pytest

from app.errors import ConfigError
from app.rag.rerank import Reranker, RerankWeights
from app.rag.store import RRF_K, RetrievedPassage
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
