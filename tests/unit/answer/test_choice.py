import functools
from dataclasses import dataclass

from sub250.answer.answerer import Answerer
from sub250.answer.choice import CHOICE_HINT, ChoiceReader, candidates, prompt_hint
from sub250.answer.extract import SentencePicker
from sub250.answer.policy import DECLINE_TEXT, AnswerPolicy
from sub250.metrics.timeline import TurnTimeline
from sub250.session.stages import Retrieved, build_prompt, generate
from sub250.session.tuning import PipelineTuning
from tests.unit.answer.test_extract import Embed, bag
from tests.unit.session.fakes import FakeLLM


@dataclass(frozen=True)
class Found:
    chunk_id: int
    content: str
    distance: float
    title: str


PRICE = Found(1, "The Aero is round. It costs three hundred and twenty-nine dollars from the Halden store.", 0.3,
              "Aero at a glance")
FILTER = Found(2, "The filter costs forty-nine dollars. It lasts about nine months.", 0.4, "Filters")
SAME = Found(3, "It costs three hundred and twenty-nine dollars from the Halden store.", 0.5, "Store")


def test_candidates_are_the_extracts_best_first_without_repeats_then_the_decline():
    assert candidates(["A.", " A.", "", "B.", DECLINE_TEXT], DECLINE_TEXT) == ("A.", "B.", DECLINE_TEXT)
    assert candidates(["A.", "B."], None) == ("A.", "B.")
    assert prompt_hint("Say {decline} if not.", "no") == "Say no if not."


def test_the_reader_knows_the_choice_once_one_candidate_is_left():
    reader = ChoiceReader(("It costs ten dollars.", "It lasts nine months.", "Sorry, I cannot help."))
    assert reader.feed("It") is None and reader.chosen is None  # two candidates start so
    assert reader.feed(" lasts") == "It lasts nine months."
    assert reader.rest == " nine months." and reader.feed(" nine") is None  # decided once
    off = ChoiceReader(("A b.", "C d."))
    assert off.feed("Zed") is None and off.chosen == "Zed" and off.rest == ""  # no grammar honoured: as said


async def answer(policy, passages, llm):
    tl = TurnTimeline("t")
    build = functools.partial(build_prompt, llm, PipelineTuning())
    answerer = Answerer(policy, build, functools.partial(generate, llm), SentencePicker(Embed()))
    found = Retrieved(passages=passages, vector=bag("how much does it cost in dollars"))
    plan = await answerer.plan("How much does the Aero cost?", found, "Be brief.", [], tl)
    said = [piece async for piece in answerer.speak(plan, "req", 96, tl)]
    return plan, said, tl


async def test_the_model_chooses_among_the_passages_extracts_and_the_decline_and_its_choice_is_said_whole():
    llm = FakeLLM(words=["It", "costs", "three"], abort_on_close=False)
    plan, said, tl = await answer(AnswerPolicy(mode="choice", sentences=1, choices=3), [PRICE, FILTER, SAME], llm)
    assert plan.path == "choice"
    assert plan.choices == ("It costs three hundred and twenty-nine dollars from the Halden store.",
                            "The filter costs forty-nine dollars. It lasts about nine months.",  # 6 words at least
                            DECLINE_TEXT)  # SAME's extract is PRICE's: one candidate
    request = llm.requests[0]
    assert request.choice == plan.choices  # the grammar: these texts and nothing else
    user = plan.messages[-1]["content"]
    assert "- Aero at a glance: It costs three" in user and "- Filters: The filter costs" in user
    assert user.endswith(CHOICE_HINT) and "The Aero is round" not in user
    # "It" starts one candidate only: the rest of it is said at once, and the stream is stopped there
    assert said == ["It", " costs three hundred and twenty-nine dollars from the Halden store."]
    assert tl.answer["chosen"] == 0 and tl.answer["declined"] is False and tl.answer["choice_tokens"] == 1
    assert tl.measured["llm_choice"] >= 0 and tl.measured["extract"] >= 0 and tl.has("first_token")
    assert tl.tokens == 1  # the model's own tokens: the next ones were never asked for


async def test_the_model_may_decline_and_the_gate_still_declines_without_it():
    llm = FakeLLM(words=DECLINE_TEXT.split(" ")[:2], abort_on_close=False)
    plan, said, tl = await answer(AnswerPolicy(mode="choice", sentences=1), [PRICE, FILTER], llm)
    assert "".join(said) == DECLINE_TEXT and tl.answer["declined"] is True
    gated = FakeLLM()
    plan, said, tl = await answer(AnswerPolicy(mode="choice", min_score=0.9), [PRICE], gated)
    assert plan.path == "declined" and said == [DECLINE_TEXT] and gated.requests == []
