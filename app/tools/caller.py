"""One turn's tool decision: a :class:`ToolCall` whose arguments are valid for the tool's schema, or None.

``tool_choice`` decides first: ``none`` (or no tools) calls nothing; ``{"type": "function", "name": N}``
calls N (the model writes only its arguments); ``required`` always calls one; ``auto`` lets the profile's
selector (:class:`~app.tools.policy.ToolPolicy`) decide. A chosen tool whose one argument the question holds
as it is (an order number) gets it read, not written (app/tools/reading.py). Every generation runs under a JSON
schema (the engine's structured outputs), so the output parses; the arguments are then validated against the tool's
own schema with ``jsonschema`` - a model that still gets them wrong raises :class:`ToolArgumentsError`
(the reply turns it into an ``error`` event and a failed response, never a crash or a hang).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import numpy as np

from sub250.llm.base import LLMRequest, TokenDelta
from sub250.protocol.tools import FunctionTool, ToolChoice
from sub250.tools import prompt
from sub250.tools.policy import ToolPolicy
from sub250.tools.reading import read_arguments
from sub250.tools.selector import EmbeddingSelector

#: ``request -> the engine's deltas`` (``LLMEngine.stream``).
Stream = Callable[[LLMRequest], AsyncGenerator[TokenDelta, None]]


class ToolArgumentsError(Exception):
    """The model's output for a tool call is not valid for the tool's schema (or not JSON at all)."""

    def __init__(self, tool: str, detail: str) -> None:
        super().__init__(f"the arguments written for {tool} are not valid: {detail}")
        self.tool, self.detail = tool, detail


@dataclass(frozen=True)
class ToolCall:
    name: str
    #: Compact JSON text, valid for the tool's ``parameters``.
    arguments: str


@dataclass
class Decision:
    """What the decision did, for the turn's report (``timeline.tool``)."""

    selector: str
    call: ToolCall | None = None
    #: ``embedding``: the best tool's cosine; ``llm``: None.
    score: float | None = None
    best: str | None = None
    #: The best retrieved passage's cosine, when the knowledge base competed.
    kb_score: float | None = None
    ms: float = 0.0
    tokens: int = 0
    #: The arguments were read from the question, not written by the model (app/tools/reading.py).
    read: bool = False

    def report(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 4)  # noqa: E731
        return {"selector": self.selector, "called": self.call.name if self.call else None, "best": self.best,
                "score": r(self.score), "kb_score": r(self.kb_score), "ms": round(self.ms, 3), "tokens": self.tokens,
                "read": self.read}


class ToolCaller:
    def __init__(self, policy: ToolPolicy, stream: Stream, selector: EmbeddingSelector | None) -> None:
        self.policy, self.stream, self.selector = policy, stream, selector

    async def decide(self, question: str, vector: np.ndarray | None, tools: Sequence[FunctionTool],
                     choice: ToolChoice, request_id: str, kb_score: float | None = None) -> Decision:
        """``vector``: the question's embedding (retrieval's), for the embedding selector; ``kb_score``: the
        cosine of the best passage retrieval found (the knowledge base's claim on the question)."""
        t0 = time.perf_counter()
        decision = await self._decide(question, vector, tuple(tools), choice, request_id, kb_score)
        decision.ms = (time.perf_counter() - t0) * 1000
        return decision

    async def _decide(self, question: str, vector: np.ndarray | None, tools: tuple[FunctionTool, ...],
                      choice: ToolChoice, request_id: str, kb_score: float | None) -> Decision:
        if choice.mode == "none" or not tools:
            return Decision("none")
        if choice.mode == "function":
            tool = next(t for t in tools if t.name == choice.name)
            return await self._arguments(Decision("forced", best=tool.name), tool, question, request_id)
        required = choice.mode == "required"
        if self.policy.selector == "embedding" and self.selector is not None and vector is not None:
            ranked = await self.selector.rank(vector, tools)
            tool, score = ranked[0]
            decision = Decision("embedding", score=score, best=tool.name, kb_score=kb_score)
            margin = self.policy.kb_margin
            below_kb = margin is not None and kb_score is not None and score < kb_score - margin
            if (score < self.policy.min_score or below_kb) and not required:
                return decision
            return await self._arguments(decision, tool, question, request_id)
        return await self._whole_call(Decision("llm"), tools, question, request_id, may_decline=not required)

    async def _arguments(self, decision: Decision, tool: FunctionTool, question: str, request_id: str) -> Decision:
        """The chosen tool's arguments: read from the question when it holds them (app/tools/reading.py), else
        written by the model under the tool's schema."""
        read = read_arguments(tool, question) if self.policy.read_arguments else None
        if read is not None:
            decision.call, decision.read = ToolCall(tool.name, prompt.compact(read)), True
            return decision
        value = await self._generate(decision, prompt.messages(prompt.describe_arguments(tool), question),
                                     tool.parameters, request_id, tool.name)
        decision.call = ToolCall(tool.name, prompt.compact(self._valid(tool, value)))
        return decision

    async def _whole_call(self, decision: Decision, tools: tuple[FunctionTool, ...], question: str,
                          request_id: str, *, may_decline: bool) -> Decision:
        system = prompt.describe(tools, may_decline=may_decline)
        value = await self._generate(decision, prompt.messages(system, question),
                                     prompt.call_schema(tools, may_decline=may_decline), request_id, "a tool call")
        name = value.get("name") if isinstance(value, dict) else None
        decision.best = name
        if name == prompt.NO_TOOL and may_decline:
            return decision
        tool = next((t for t in tools if t.name == name), None)
        if tool is None:
            raise ToolArgumentsError("a tool call", f"it names no tool of the session ({str(name)[:40]!r})")
        decision.call = ToolCall(tool.name, prompt.compact(self._valid(tool, value.get("arguments"))))
        return decision

    async def _generate(self, decision: Decision, messages: list[dict[str, str]], schema: dict[str, Any],
                        request_id: str, what: str) -> Any:
        request = LLMRequest(f"{request_id}-tool", messages, max_tokens=self.policy.max_tokens, json_schema=schema)
        text = ""
        async with contextlib.aclosing(self.stream(request)) as deltas:
            async for delta in deltas:
                text += delta.text
                decision.tokens = delta.num_tokens
        try:
            return json.loads(text)
        except ValueError:
            raise ToolArgumentsError(what, f"the model's output is not complete JSON ({len(text)} characters; "
                                           f"the budget is {self.policy.max_tokens} tokens)") from None

    @staticmethod
    def _valid(tool: FunctionTool, arguments: Any) -> Any:
        error = jsonschema.exceptions.best_match(tool.validator.iter_errors(arguments))  # as jsonschema.validate
        if error is not None:
            where = "/".join(str(p) for p in error.path) or "(top)"
            raise ToolArgumentsError(tool.name, f"at {where}: {error.message[:160]}")
        return arguments
