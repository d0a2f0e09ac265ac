import asyncio
from dataclasses import dataclass

import numpy as np
import pytest

from sub250.answer.extract import SentencePicker, split_sentences
from tests.unit import bags

VOCAB = ["cost", "dollars", "filter", "months", "loud", "decibels", "tabs", "shell", "store", "weigh"]


def bag(text: str) -> np.ndarray:
    return bags.bag(text, VOCAB)


@dataclass(frozen=True)
class P:
    chunk_id: int
    content: str
    title: str = "t"


class Embed(bags.BagEmbed):
    def __init__(self):
        super().__init__(VOCAB)


GLANCE = P(1, "The Aero is round. It weighs six point eight kilograms. It costs three hundred and twenty-nine "
              "dollars from the Halden store. It is quiet.")


def test_sentences_split_at_their_ends_only():
    assert split_sentences("It captures 99.95 percent at 0.1 microns. Then it stops! Why? Because.") == [
        "It captures 99.95 percent at 0.1 microns.", "Then it stops!", "Why?", "Because."]
    assert split_sentences("  ") == []


async def test_the_sentence_closest_to_the_question_is_picked_with_the_next_one():
    picker = SentencePicker(Embed())
    got = await picker.pick(bag("how much does it cost in dollars"), [GLANCE], sentences=2)
    assert got.text == "It costs three hundred and twenty-nine dollars from the Halden store. It is quiet."
    assert got.chunk_id == 1 and got.sentences == (2, 3) and got.score > 0.5


async def test_one_sentence_and_a_short_pick_gets_its_next_sentence():
    picker = SentencePicker(Embed())
    one = await picker.pick(bag("cost dollars store"), [GLANCE], sentences=1)
    assert one.text.startswith("It costs") and one.sentences == (2,)
    short = P(2, "Filter: nine months. It depends on the air in your home and on the speed.")
    got = await picker.pick(bag("filter months"), [short], sentences=1)
    assert got.sentences == (0, 1)


async def test_a_passage_is_embedded_once_and_the_cache_is_bounded():
    embed = Embed()
    picker = SentencePicker(embed, max_passages=2)
    for _ in range(3):
        await picker.pick(bag("cost"), [GLANCE])
    assert len(embed.calls) == 1
    for i in range(3, 6):
        await picker.pick(bag("cost"), [P(i, f"Passage {i} costs dollars.")])
    await picker.pick(bag("cost"), [GLANCE])  # pushed out by the three after it
    assert len(embed.calls) == 5


async def test_the_best_sentence_is_searched_across_the_passages_asked_for():
    other = P(9, "Press the two grey tabs. Lift the shell straight up.")
    picker = SentencePicker(Embed())
    first_only = await picker.pick(bag("tabs shell"), [GLANCE, other], passages_searched=1)
    assert first_only.chunk_id == 1
    both = await picker.pick(bag("tabs shell"), [GLANCE, other], passages_searched=2)
    assert both.chunk_id == 9


@pytest.mark.parametrize("passages", [[], [P(1, "   ")]])
async def test_nothing_to_pick_is_none(passages):
    assert await SentencePicker(Embed()).pick(bag("cost"), passages) is None


def test_subject_words_meet_across_endings_and_fillers_do_not_count():
    from sub250.answer.extract import content_stems, lexical_overlap

    q = content_stems("um, so how much does the Aero weigh?")
    assert q == {"aero", "weigh"}
    assert lexical_overlap(q, "It weighs six point eight kilograms.") == 0.5
    assert lexical_overlap(set(), "anything") == 0.0


async def test_the_lexical_weight_can_turn_the_pick_to_the_sentence_with_the_question_s_words():
    passage = P(3, "It costs dollars at the store. It weighs six point eight kilograms.")
    vector = bag("cost dollars store")  # the embedding alone prefers the price
    picker = SentencePicker(Embed())
    plain = await picker.pick(vector, [passage], question="how much does it weigh")
    assert plain.text.startswith("It costs")
    weighted = await picker.pick(vector, [passage], question="how much does it weigh", lexical_weight=2.0)
    assert weighted.text.startswith("It weighs")


async def test_warming_embeds_each_passage_once_up_to_the_cache_size():
    embed = Embed()
    picker = SentencePicker(embed, max_passages=2)
    assert await picker.warm([GLANCE, P(7, "One. Two."), P(8, "Three.")]) == 2
    assert len(embed.calls) == 2
    await picker.pick(bag("cost"), [GLANCE])
    assert len(embed.calls) == 2  # served from the warm cache


STEPS = P(3, "Open the back cover. Lift the old filter out by its tabs. Slide the new filter in. "
             "Close the cover until it clicks. The filter costs forty dollars.")


async def test_around_lays_the_extract_where_the_run_holding_the_best_sentence_is_closest():
    picker = SentencePicker(Embed())
    # the best sentence for "filter tabs" is the second; "following" takes it and the next two
    following = await picker.pick(bag("filter tabs"), [STEPS], sentences=3)
    assert following.sentences == (1, 2, 3)
    around = await picker.pick(bag("filter tabs"), [STEPS], sentences=3, span="around")
    # of the runs holding sentence 1 - (0, 1, 2) and (1, 2, 3) - the first is closer on average (two filters)
    assert around.sentences == (0, 1, 2) and around.score == following.score
    # at the passage's end the run is laid back from it, never cut short
    last = await picker.pick(bag("cost dollars"), [STEPS], sentences=3, span="around")
    assert last.sentences == (2, 3, 4)
    with pytest.raises(ValueError):
        await picker.pick(bag("cost"), [STEPS], span="middle")
