"""One question's answer plan: declined, extractive, choice or generative, from the retrieval and the policy.

The plan is made after retrieval and before anything is said. A declined or extractive plan carries its
whole text (no LLM call: the fastest turns there are); a generative one carries the prompt. Marks
``prompt_ready`` on the timeline either way, and records the path on it for the turn's report.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sub250.answer import choice as ch
from sub250.answer.extract import Extract, SentencePicker
from sub250.answer.loops import find_loop
from sub250.answer.policy import AnswerPolicy
from sub250.llm.base import LLMRequest, TokenDelta
from sub250.metrics.timeline import TurnTimeline, now_ns
from sub250.rag.vocabulary import Vocabulary
from sub250.tools.results import speakable

log = logging.getLogger(__name__)

#: ``(request, timeline) -> the engine's text deltas`` (the session's ``stages.generate`` with its engine bound).
Generator = Callable[[LLMRequest, TurnTimeline], AsyncGenerator[TokenDelta, None]]

#: ``(instructions, question, passages, history, timeline, hint=) -> (messages, token ids)``, marking
#: ``prompt_ready`` (the session's ``stages.build_prompt`` with its engine and budgets bound).
PromptBuilder = Callable[..., tuple[list[dict[str, str]], list[int]]]


class Found(Protocol):
    """What retrieval found (``sub250.session.stages.Retrieved``)."""

    passages: list[Any]
    failed: bool
    vector: Any

    @property
    def top_score(self) -> float | None: ...

#: Said to the model after a borderline question (between ``min_score`` and ``borderline_score``).
BORDERLINE_HINT = "If the context does not answer the question, say that you do not know."

DECLINED, EXTRACTIVE, GENERATIVE = "declined", "extractive", "generative"
#: The LLM chose the answer among grounded candidates (the ``choice`` mode).
CHOICE = "choice"
#: The path of the nudge after the caller's long silence (``idle_timeout_ms``).
IDLE = "idle"
#: Said to the model in place of a question when the caller has been silent too long.
IDLE_PROMPT = "(The caller has said nothing for a while.)"
IDLE_HINT = "Ask in one short sentence whether they are still there or need anything else."
#: The extractive path of an answer after tool calls: the tools' outputs said as they are (app/tools/results.py).
TOOL_RESULT = "tool_result"


@dataclass(frozen=True)
class ContextPassage:
    """A passage made for the prompt (the grounded mode's extract)."""

    title: str
    content: str


@dataclass
class Plan:
    path: str
    top_score: float | None
    #: declined / extractive: the whole reply
    text: str = ""
    messages: list[dict[str, str]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    extract: Extract | None = None
    #: choice: the texts the model's tokens may spell (the candidates, then the decline)
    choices: tuple[str, ...] = ()


class Answerer:
    def __init__(self, policy: AnswerPolicy, build_prompt: PromptBuilder, generate: Generator,
                 picker: SentencePicker | None, vocabulary: Vocabulary | None = None) -> None:
        """``vocabulary``: the knowledge base's words, for ``min_score_unfamiliar`` (None: every question is held
        to ``min_score``)."""
        self.policy, self.build_prompt, self.generate, self.picker = policy, build_prompt, generate, picker
        self.vocabulary = vocabulary

    async def speak(self, plan: Plan, request_id: str, max_tokens: int, timeline: TurnTimeline) -> AsyncIterator[str]:
        """The reply's text as it comes: the plan's whole text at once (marks ``first_token``), or the engine's
        deltas, stopped - and the request aborted - at the first phrase said twice (``stop_loops``)."""
        if plan.text:
            timeline.mark("first_token")
            yield plan.text
            return
        p = self.policy
        request = LLMRequest(request_id, plan.messages, max_tokens=max_tokens, prompt_token_ids=plan.ids or None,
                             repetition_penalty=p.repetition_penalty, frequency_penalty=p.frequency_penalty,
                             choice=plan.choices or None)
        reader = ch.ChoiceReader(plan.choices) if plan.choices else None
        submitted = now_ns()
        text = ""
        async with contextlib.aclosing(self.generate(request, timeline)) as deltas:
            async for delta in deltas:
                text += delta.text
                yield delta.text
                if reader is not None:
                    if (chosen := reader.feed(delta.text)) is not None:
                        # decided: the grammar would only copy the rest out, token by token
                        timeline.measured["llm_choice"] = (now_ns() - submitted) / 1e6
                        timeline.answer = dict(timeline.answer or {}, chosen=plan.choices.index(chosen),
                                               candidates=len(plan.choices), declined=chosen == p.decline_text,
                                               choice_tokens=timeline.tokens)
                        if reader.rest:
                            yield reader.rest
                        return  # closing the stream aborts the engine request
                    continue
                if p.stop_loops and (phrase := find_loop(text, repeats=2)) is not None:
                    log.info("request %s: stopped at a phrase loop (%r)", request_id, phrase)
                    timeline.answer = dict(timeline.answer or {}, stopped_loop=phrase)
                    return  # closing the stream aborts the engine request

    async def plan(self, question: str, found: Found, instructions: str,
                   history: list[dict[str, str]], timeline: TurnTimeline, *, custom_instructions: bool = False,
                   heard: bool = False) -> Plan:
        """``custom_instructions``: the client set its own instructions (``session.update`` or
        ``response.create``). They are a persona and rules for the model, not a reason to drop grounding: the
        gate, the extract and the profile's mode apply as they do without them (docs/BENCHMARKS.md §40: a
        135M model answering under a persona got 13 of 20 right). Recorded in the turn's report.
        ``heard``: the question is a transcript of the caller's speech; a word of it the KB never uses is as
        likely Whisper's mis-hearing of a name ("arrow" for Aero) as another subject (docs/BENCHMARKS.md §27), so
        ``min_score_unfamiliar`` applies to typed questions only."""
        p = self.policy
        score = found.top_score
        unknown = self.vocabulary.unknown(question) if (self.vocabulary is not None and p.min_score_unfamiliar
                                                        and not heard) else []
        plan = await self._choose(p, question, found, instructions, history, timeline, score,
                                  max(p.min_score, p.min_score_unfamiliar) if unknown else p.min_score)
        if plan.text:
            timeline.mark("prompt_ready")  # declined or extractive: the whole reply is known
        timeline.answer = {"path": plan.path, "mode": p.mode,
                           "top_score": None if score is None else round(score, 4),
                           "instructions": "client" if custom_instructions else "default"}
        if unknown:
            timeline.answer["unknown_words"] = unknown[:8]
        if plan.extract is not None:
            timeline.answer["extract_score"] = round(plan.extract.score, 4)
        return plan

    async def plan_idle(self, instructions: str, history: list[dict[str, str]], timeline: TurnTimeline) -> Plan:
        """The nudge after the caller's long silence: the profile's fixed ``idle_text`` in the extractive mode,
        else the model asked to check in, given the conversation so far."""
        mode = self.policy.mode
        if mode == "extractive":
            plan = Plan(IDLE, None, text=self.policy.idle_text)
            timeline.mark("prompt_ready")
        else:
            messages, ids = self.build_prompt(instructions, IDLE_PROMPT, [], history, timeline, hint=IDLE_HINT)
            plan = Plan(IDLE, None, messages=messages, ids=ids)
        timeline.answer = {"path": IDLE, "mode": mode, "top_score": None}
        return plan

    async def plan_from_tools(self, question: str, results: list[tuple[Any, Any]], instructions: str,
                              history: list[dict[str, str]], timeline: TurnTimeline) -> Plan:
        """The answer after the client ran tools: ``results`` are (call or None, output) pairs. The extractive
        mode says the outputs (no LLM: a small model loses the facts it is given); the others give them to the
        model as the context, in place of retrieved passages."""
        mode = self.policy.mode
        if mode == "extractive":
            plan = Plan(TOOL_RESULT, None, text=" ".join(speakable(out.output) for _, out in results))
            timeline.mark("prompt_ready")
        else:
            passages = [ContextPassage(f"Result of {call.name if call is not None else 'a tool'}", out.output)
                        for call, out in results]
            messages, ids = self.build_prompt(instructions, question, passages, history, timeline)
            plan = Plan(GENERATIVE, None, messages=messages, ids=ids)
        timeline.answer = {"path": plan.path, "mode": mode, "top_score": None, "from": "tools"}
        return plan

    async def _choose(self, p: AnswerPolicy, question: str, found: Found, instructions: str,
                      history: list[dict[str, str]], timeline: TurnTimeline, score: float | None,
                      min_score: float) -> Plan:
        # A store that could not be reached says nothing about the question: answer without context.
        if not found.failed and min_score > 0 and (score is None or score < min_score):
            return Plan(DECLINED, score, text=p.decline_text)
        extract = await self._extract(p, question, found) if p.picks_sentences else None
        if (not found.failed and p.picks_sentences and p.min_extract_score > 0
                and (extract is None or extract.score < p.min_extract_score)):
            return Plan(DECLINED, score, text=p.decline_text, extract=extract)
        if p.mode == "extractive" and extract is not None:
            return Plan(EXTRACTIVE, score, text=extract.text, extract=extract)
        if p.mode == "choice" and extract is not None:
            return await self._choice(p, question, found, instructions, history, timeline, score, extract)
        passages: list[Any] = found.passages
        if extract is not None:  # grounded: the model sees only the sentences that answer
            passages = [ContextPassage(found.passages[0].title, extract.text)]
        hint = BORDERLINE_HINT if score is not None and score < p.borderline_score else None
        messages, ids = self.build_prompt(instructions, question, passages, history, timeline, hint=hint)
        return Plan(GENERATIVE, score, messages=messages, ids=ids, extract=extract)

    async def _choice(self, p: AnswerPolicy, question: str, found: Found, instructions: str,
                      history: list[dict[str, str]], timeline: TurnTimeline, score: float | None,
                      extract: Extract) -> Plan:
        """The prompt of the ``choice`` mode: the extract of each of the best ``choices`` passages (the
        overall best first) as the context, and the grammar's candidates: those extracts and the decline."""
        assert self.picker is not None and found.vector is not None
        t0 = now_ns()
        home = next((q for q in found.passages if q.chunk_id == extract.chunk_id), found.passages[0])
        picked: list[tuple[str, str]] = [(home.title, extract.text)]  # the best extract under its own title
        for passage in found.passages[:p.choices]:
            if len(picked) >= p.choices:
                break
            if passage.chunk_id == extract.chunk_id:
                continue
            other = await self.picker.pick(found.vector, [passage], sentences=p.sentences, question=question,
                                           lexical_weight=p.lexical_weight, span=p.extract_span)
            if other is not None:
                picked.append((passage.title, other.text))
        options = ch.candidates([text for _, text in picked], p.decline_text if p.choice_decline else None)
        timeline.measured["extract"] = (now_ns() - t0) / 1e6
        # one context line per candidate (two passages may give the same sentences), under its first title
        first_title = {text.strip(): title for title, text in reversed(picked)}
        passages = [ContextPassage(first_title[text], text) for text in options if text in first_title]
        messages, ids = self.build_prompt(instructions, question, passages, history, timeline,
                                          hint=ch.prompt_hint(p.choice_hint, p.decline_text))
        return Plan(CHOICE, score, messages=messages, ids=ids, extract=extract, choices=options)

    async def _extract(self, p: AnswerPolicy, question: str, found: Found) -> Extract | None:
        if self.picker is None or found.vector is None or not found.passages:
            return None
        return await self.picker.pick(found.vector, found.passages, sentences=p.sentences,
                                      passages_searched=p.extract_passages, question=question,
                                      lexical_weight=p.lexical_weight, span=p.extract_span)
