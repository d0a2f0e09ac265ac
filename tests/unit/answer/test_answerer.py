import functools
from dataclasses import dataclass

import numpy as np
import pytest

from sub250.answer.answerer import BORDERLINE_HINT, Answerer
from sub250.answer.extract import SentencePicker
from sub250.answer.policy import DECLINE_TEXT, AnswerPolicy
from sub250.errors import ConfigError
from sub250.metrics.timeline import TurnTimeline
from sub250.session.stages import Retrieved, build_prompt, generate
from sub250.session.tuning import PipelineTuning
from tests.unit.answer.test_extract import GLANCE, Embed, bag
from tests.unit.session.fakes import FakeLLM


@dataclass(frozen=True)
class Found:
    chunk_id: int
    content: str
    distance: float
    title: str = "Halden Aero at a Glance"


def retrieved(score, content=GLANCE.content, failed=False):
    passages = [] if score is None else [Found(1, content, 1.0 - score)]
    return Retrieved(passages=passages, failed=failed, vector=bag("how much does it cost in dollars"))


async def plan(policy, found, llm=None):
    llm = llm or FakeLLM()
    tl = TurnTimeline("t")
    build = functools.partial(build_prompt, llm, PipelineTuning())
    p = await Answerer(policy, build, functools.partial(generate, llm), SentencePicker(Embed())).plan(
        "How much does the Aero cost?", found, "Be brief.", [], tl)
    return p, tl, llm


async def test_below_the_gate_the_fixed_reply_answers_and_no_prompt_is_built():
    p, tl, llm = await plan(AnswerPolicy(min_score=0.3), retrieved(0.12))
    assert (p.path, p.text, p.messages) == ("declined", DECLINE_TEXT, [])
    assert llm.prompts == [] and tl.has("prompt_ready")
    assert tl.answer == {"path": "declined", "mode": "generative", "top_score": 0.12, "instructions": "default"}


async def test_nothing_found_is_declined_but_a_dead_store_is_answered_without_context():
    p, _, _ = await plan(AnswerPolicy(min_score=0.3), retrieved(None))
    assert p.path == "declined"
    p, _, llm = await plan(AnswerPolicy(min_score=0.3), Retrieved(failed=True))
    assert p.path == "generative" and llm.prompts[0][-1]["content"] == "How much does the Aero cost?"


async def test_the_gate_off_sends_every_question_to_the_model():
    p, _, _ = await plan(AnswerPolicy(min_score=0.0), retrieved(0.01))
    assert p.path == "generative"


async def test_a_borderline_question_gets_the_hint_and_a_clear_one_does_not():
    policy = AnswerPolicy(min_score=0.2, borderline_score=0.4)
    p, _, _ = await plan(policy, retrieved(0.3))
    assert p.messages[-1]["content"].endswith(BORDERLINE_HINT)
    p, _, _ = await plan(policy, retrieved(0.6))
    assert BORDERLINE_HINT not in p.messages[-1]["content"]
    assert p.messages[0] == {"role": "system", "content": "Be brief."}  # the cached prefix stays the same


async def test_extractive_speaks_the_closest_sentences_without_the_model():
    p, tl, llm = await plan(AnswerPolicy(mode="extractive", sentences=1), retrieved(0.7))
    assert p.path == "extractive" and p.text == "It costs three hundred and twenty-nine dollars from the Halden store."
    assert llm.prompts == [] and tl.answer["extract_score"] > 0.5


async def test_grounded_gives_the_model_only_the_extract():
    p, _, _ = await plan(AnswerPolicy(mode="grounded", sentences=1), retrieved(0.7))
    user = p.messages[-1]["content"]
    assert p.path == "generative" and "twenty-nine dollars" in user and "weighs" not in user


@pytest.mark.parametrize("cfg", [{"mode": "poetry"}, {"min_score": 2}, {"sentences": 0}, {"borderline_score": -1}])
def test_a_bad_answer_section_is_a_config_error(cfg):
    with pytest.raises(ConfigError):
        AnswerPolicy.from_stage(cfg)


def test_the_profile_section_is_read_typed():
    p = AnswerPolicy.from_stage({"mode": "extractive", "min_score": "0.3", "sentences": 1, "stop_loops": False})
    assert (p.mode, p.min_score, p.sentences, p.stop_loops) == ("extractive", 0.3, 1, False)


async def test_an_extract_far_from_the_question_is_declined_too():
    p, tl, _ = await plan(AnswerPolicy(mode="extractive", min_extract_score=0.99), retrieved(0.7))
    assert p.path == "declined" and p.text == DECLINE_TEXT and tl.answer["extract_score"] < 0.99
    p, _, _ = await plan(AnswerPolicy(mode="extractive", min_extract_score=0.3), retrieved(0.7))
    assert p.path == "extractive"
    p, _, llm = await plan(AnswerPolicy(mode="generative", min_extract_score=0.99), retrieved(0.7))
    assert p.path == "generative"  # no extract in the generative mode: that gate does not apply


async def test_a_client_s_own_instructions_keep_the_answer_grounded():
    llm = FakeLLM()
    build = functools.partial(build_prompt, llm, PipelineTuning())
    for mode in ("extractive", "grounded"):
        answerer = Answerer(AnswerPolicy(mode=mode, min_score=0.3), build, functools.partial(generate, llm),
                            SentencePicker(Embed()))
        alone = await answerer.plan("How much?", retrieved(0.7), "Be brief.", [], TurnTimeline("a"))
        tl = TurnTimeline("t")
        p = await answerer.plan("How much?", retrieved(0.7), "Talk like a pirate.", [], tl, custom_instructions=True)
        assert (p.path, p.text, p.extract) == (alone.path, alone.text, alone.extract)  # the same grounded answer
        assert tl.answer["mode"] == mode and tl.answer["instructions"] == "client"
        p = await answerer.plan("Capital of France?", retrieved(0.1), "Talk like a pirate.", [], TurnTimeline("u"),
                                custom_instructions=True)
        assert p.path == "declined"  # the gate holds


async def test_grounding_turned_off_sends_every_question_to_the_model_with_the_passages():
    policy = AnswerPolicy(mode="extractive", min_score=0.5, min_extract_score=0.4, min_score_unfamiliar=0.6,
                          borderline_score=0.7)
    free = policy.ungrounded()
    assert (free.mode, free.min_score, free.min_extract_score, free.min_score_unfamiliar, free.borderline_score) == \
        ("generative", 0.0, 0.0, 0.0, 0.0)
    assert free.decline_text == policy.decline_text and free.sentences == policy.sentences  # the rest is kept
    p, tl, _ = await plan(free, retrieved(0.1))  # far below the gate: answered all the same
    assert p.path == "generative" and not p.text and p.extract is None
    assert GLANCE.content in p.messages[-1]["content"] or any(GLANCE.content in m["content"] for m in p.messages)


async def test_the_idle_nudge_is_the_fixed_text_when_extractive_and_the_models_otherwise():
    from sub250.answer.answerer import IDLE, IDLE_HINT, IDLE_PROMPT
    from sub250.answer.policy import IDLE_TEXT

    llm = FakeLLM()
    build = functools.partial(build_prompt, llm, PipelineTuning())
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}]
    for mode in ("extractive", "generative"):
        tl = TurnTimeline("t")
        a = Answerer(AnswerPolicy(mode=mode), build, functools.partial(generate, llm), None)
        p = await a.plan_idle("Be brief.", history, tl)
        assert p.path == IDLE and tl.answer["path"] == IDLE
        if mode == "extractive":
            assert p.text == IDLE_TEXT and tl.has("prompt_ready") and not llm.prompts
        else:
            assert not p.text and p.messages[-1]["content"] == f"{IDLE_PROMPT}\n{IDLE_HINT}"


async def test_a_question_with_a_word_the_kb_never_uses_needs_the_closer_passage():
    from sub250.rag.vocabulary import Vocabulary

    llm = FakeLLM()
    build = functools.partial(build_prompt, llm, PipelineTuning())
    policy = AnswerPolicy(mode="extractive", min_score=0.3, min_score_unfamiliar=0.5)
    answerer = Answerer(policy, build, functools.partial(generate, llm), SentencePicker(Embed()),
                        Vocabulary.from_texts([GLANCE.content]))
    tl = TurnTimeline("t")
    p = await answerer.plan("How much does a Dyson cost in dollars?", retrieved(0.45), "", [], tl)
    assert p.path == "declined" and tl.answer["unknown_words"] == ["dyson"]
    tl = TurnTimeline("u")
    p = await answerer.plan("How much does it cost in dollars?", retrieved(0.45), "", [], tl)
    assert p.path == "extractive" and "unknown_words" not in tl.answer
    p = await answerer.plan("How much does a Dyson cost in dollars?", retrieved(0.55), "", [], TurnTimeline("v"))
    assert p.path == "extractive"  # close enough for the stricter gate
    # below min_score stays declined: the stricter gate never lowers the bar
    lower = Answerer(AnswerPolicy(mode="extractive", min_score=0.5, min_score_unfamiliar=0.2), build,
                     functools.partial(generate, llm), SentencePicker(Embed()), Vocabulary.from_texts([GLANCE.content]))
    assert (await lower.plan("A Dyson, dollars?", retrieved(0.4), "", [], TurnTimeline("w"))).path == "declined"


async def test_without_a_vocabulary_every_question_is_held_to_min_score():
    p, tl, _ = await plan(AnswerPolicy(mode="extractive", min_score=0.3, min_score_unfamiliar=0.9), retrieved(0.45))
    assert p.path == "extractive" and "unknown_words" not in tl.answer


@pytest.mark.parametrize("cfg", [{"min_score_unfamiliar": 1.5}, {"extract_span": "middle"}])
def test_bad_answer_settings_are_a_config_error(cfg):
    with pytest.raises(ConfigError):
        AnswerPolicy.from_stage(cfg)


async def test_a_heard_question_is_not_held_to_the_unfamiliar_gate():
    """A transcript's unknown word may be Whisper's mis-hearing of a name: only typed questions get that gate."""
    from sub250.rag.vocabulary import Vocabulary

    llm = FakeLLM()
    answerer = Answerer(AnswerPolicy(mode="extractive", min_score=0.3, min_score_unfamiliar=0.5),
                        functools.partial(build_prompt, llm, PipelineTuning()), functools.partial(generate, llm),
                        SentencePicker(Embed()), Vocabulary.from_texts([GLANCE.content]))
    typed = await answerer.plan("How much does the arrow cost in dollars?", retrieved(0.45), "", [], TurnTimeline("t"))
    heard = await answerer.plan("How much does the arrow cost in dollars?", retrieved(0.45), "", [], TurnTimeline("u"),
                                heard=True)
    assert (typed.path, heard.path) == ("declined", "extractive")
