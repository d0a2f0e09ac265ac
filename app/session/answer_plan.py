"""What a reply answers with, decided before anything is said: a plan to speak (from the client's tool outputs,
or from the knowledge base) or a tool call to make instead. Returns the decision; the reply carries it out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sub250.session import stages
from sub250.session.reply_context import ReplyContext, ReplyOptions
from sub250.session.turn import UserTurn
from sub250.tools import ToolCall


@dataclass(frozen=True)
class Answer:
    """Speak ``plan`` (showing ``sources``, the retrieved passages, unless it answers from tool outputs), after
    the conversation item ``after``; or make the tool ``call`` instead. ``retrieval_failed``: the knowledge base
    was down (the reply answers without it, and says so)."""

    plan: Any = None
    call: ToolCall | None = None
    after: str | None = None
    sources: list[dict[str, Any]] | None = None
    retrieval_failed: bool = False


async def decide(context: ReplyContext, options: ReplyOptions, turn: UserTurn, question: str, answerer: Any, *,
                 heard: bool, request_id: str) -> Answer:
    """``heard``: the question was spoken (ASR's words), not typed."""
    tl, conversation = turn.timeline, context.conversation
    results = conversation.tool_results(after=turn.item_id)
    if results:  # the client ran the tools this question needed: answer from their outputs
        stages.record_tool_results(tl, results)
        plan = await answerer.plan_from_tools(question, results, options.instructions,
                                              conversation.for_prompt(until=turn.item_id), tl)
        return Answer(plan=plan, after=results[-1][1].id)
    found = await stages.retrieve(context.stack.retriever, question, turn)
    if options.may_call_tools:
        call = await stages.decide_tool(stages.tool_caller(context.stack, context.tuning), question, found,
                                        options.tools, options.tool_choice, request_id, tl)
        if call is not None:
            return Answer(call=call, retrieval_failed=found.failed)
    custom = options.instructions != context.tuning.instructions  # the client's own: a persona; grounding holds
    plan = await answerer.plan(question, found, options.instructions, conversation.for_prompt(exclude=turn.item_id),
                               tl, custom_instructions=custom, heard=heard)
    return Answer(plan=plan, sources=[p.as_source() for p in found.passages], retrieval_failed=found.failed)
