"""ToolCaller: the decision of one turn, with a scripted engine stream and fake embeddings (no models)."""

import json

import numpy as np
import pytest

from sub250.llm.base import TokenDelta
from sub250.protocol.tools import FunctionTool, ToolChoice, function_tool
from sub250.tools import ToolArgumentsError, ToolCall, ToolCaller, ToolPolicy
from sub250.tools.prompt import NO_TOOL, call_schema, describe, signature
from sub250.tools.selector import EmbeddingSelector, tool_text

LOOKUP = function_tool({"name": "lookup_order", "description": "Look up an order's status by its number.",
                        "parameters": {"type": "object", "properties": {"order_number": {"type": "string"}},
                                       "required": ["order_number"]}}, "t", None)
HUMAN = function_tool({"name": "transfer_to_human", "description": "Hand the caller to a person.",
                       "parameters": {"type": "object", "properties": {"reason": {"type": "string"}},
                                      "required": ["reason"]}}, "t", None)
TOOLS = (LOOKUP, HUMAN)


class Script:
    """An engine stream that writes ``text`` in a few deltas and records each request."""

    def __init__(self, *texts):
        self.texts = list(texts)
        self.requests = []

    async def stream(self, request):
        self.requests.append(request)
        text = self.texts[min(len(self.requests), len(self.texts)) - 1]
        for i in range(0, len(text), 7):
            yield TokenDelta(text[i:i + 7], i // 7 + 1)


def caller(script, selector="llm", embed=None, min_score=0.5):
    return ToolCaller(ToolPolicy(selector=selector, min_score=min_score), script.stream,
                      EmbeddingSelector(embed) if embed else None)


async def test_the_llm_selector_writes_a_whole_call_under_a_schema_of_every_tool():
    s = Script(json.dumps({"name": "lookup_order", "arguments": {"order_number": "48213"}}))
    d = await caller(s).decide("Where is my order 48213?", None, TOOLS, ToolChoice(), "req_1")
    assert d.call == ToolCall("lookup_order", '{"order_number":"48213"}')
    assert d.report()["called"] == "lookup_order" and d.report()["selector"] == "llm" and d.ms > 0
    (req,) = s.requests
    assert req.request_id == "req_1-tool" and req.json_schema == call_schema(TOOLS, may_decline=True)
    assert req.messages[0]["content"] == describe(TOOLS, may_decline=True)
    assert req.messages[1] == {"role": "user", "content": "Where is my order 48213?"}
    names = [o["properties"]["name"]["const"] for o in req.json_schema["anyOf"]]
    assert names == ["lookup_order", "transfer_to_human", NO_TOOL]


async def test_no_tool_and_tool_choice_none_call_nothing():
    s = Script('{"name": "none"}')
    assert (await caller(s).decide("How long does the filter last?", None, TOOLS, ToolChoice(), "r")).call is None
    d = await caller(s).decide("Where is my order 7?", None, TOOLS, ToolChoice("none"), "r")
    assert d.call is None and len(s.requests) == 1  # "none" asks the engine nothing
    assert (await caller(s).decide("Where is my order 7?", None, (), ToolChoice(), "r")).call is None


async def test_required_leaves_no_way_out_and_a_forced_function_asks_only_its_arguments():
    s = Script('{"name": "transfer_to_human", "arguments": {"reason": "asked"}}', '{"order_number": "7"}')
    d = await caller(s).decide("hello", None, TOOLS, ToolChoice("required"), "r")
    assert d.call.name == "transfer_to_human"
    assert NO_TOOL not in json.dumps(s.requests[0].json_schema)
    d = await caller(s).decide("order seven", None, TOOLS, ToolChoice("function", "lookup_order"), "r")
    assert d.call == ToolCall("lookup_order", '{"order_number":"7"}') and d.selector == "forced"
    assert s.requests[1].json_schema == LOOKUP.parameters
    assert "lookup_order(order_number: string)" in s.requests[1].messages[0]["content"]


@pytest.mark.parametrize("output,detail", [
    ('{"name": "lookup_order", "arguments": {"order_number": 7}}', "order_number"),  # the schema wants a string
    ('{"name": "lookup_order", "arguments": {}}', "required"),
    ('{"name": "delete_everything", "arguments": {}}', "names no tool"),
    ('{"name": "lookup_order", "argum', "not complete JSON"),
])
async def test_output_the_tool_cannot_take_is_a_tool_arguments_error(output, detail):
    with pytest.raises(ToolArgumentsError) as err:
        await caller(Script(output)).decide("Where is my order?", None, TOOLS, ToolChoice(), "r")
    assert detail in str(err.value) and len(str(err.value)) < 300


def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


class Embed:
    """Tool texts -> fixed vectors; counts the texts it was asked for."""

    def __init__(self):
        self.asked = []

    async def __call__(self, texts):
        self.asked += texts
        return np.stack([unit([1, 0, 0]) if "order" in t else unit([0, 1, 0]) for t in texts])


async def test_the_embedding_selector_calls_the_closest_tool_above_its_threshold_and_asks_only_arguments():
    embed = Embed()
    s = Script('{"order_number": "48213"}', '{"reason": "asked"}')
    c = caller(s, "embedding", embed, min_score=0.6)
    d = await c.decide("Where is my order 48213?", unit([0.9, 0.1, 0.2]), TOOLS, ToolChoice(), "r")
    assert d.call == ToolCall("lookup_order", '{"order_number":"48213"}')
    assert d.best == "lookup_order" and d.score == pytest.approx(float(unit([0.9, 0.1, 0.2])[0]))
    assert s.requests[0].json_schema == LOOKUP.parameters
    far = await c.decide("How long does the filter last?", unit([0, 0.3, 1]), TOOLS, ToolChoice(), "r")
    assert far.call is None and far.best == "transfer_to_human" and far.score < 0.6 and len(s.requests) == 1
    forced = await c.decide("How long does the filter last?", unit([0, 0.3, 1]), TOOLS, ToolChoice("required"), "r")
    assert forced.call == ToolCall("transfer_to_human", '{"reason":"asked"}')  # required: the closest, whatever its score
    assert embed.asked == [tool_text(LOOKUP), tool_text(HUMAN)]  # each tool text embedded once, then cached


async def test_the_embedding_selector_falls_back_to_the_llm_without_a_question_vector():
    s = Script('{"name": "none"}')
    d = await caller(s, "embedding", Embed()).decide("hi", None, TOOLS, ToolChoice(), "r")
    assert d.selector == "llm" and d.call is None


def test_signatures_and_texts_name_the_parameters():
    assert signature(LOOKUP) == "lookup_order(order_number: string)"
    assert tool_text(HUMAN) == "transfer to human: Hand the caller to a person."
    assert call_schema((LOOKUP,), may_decline=False)["properties"]["name"] == {"const": "lookup_order"}


def test_a_policy_with_an_unknown_selector_or_absurd_numbers_is_refused():
    from sub250.errors import ConfigError

    for bad in ({"selector": "magic"}, {"min_score": 2}, {"max_tokens": 1}):
        with pytest.raises(ConfigError):
            ToolPolicy.from_stage(bad)
    assert ToolPolicy.from_stage({}) == ToolPolicy()


async def test_with_a_kb_margin_a_question_the_knowledge_base_answers_better_calls_no_tool():
    s = Script('{"order_number": "48213"}')
    c = ToolCaller(ToolPolicy(selector="embedding", min_score=0.2, kb_margin=0.1), s.stream,
                   EmbeddingSelector(Embed()))
    q = unit([0.5, 0.1, 0.86])  # cosine ~0.5 to lookup_order
    assert (await c.decide("q", q, TOOLS, ToolChoice(), "r", kb_score=0.55)).call is not None  # within the margin
    d = await c.decide("q", q, TOOLS, ToolChoice(), "r", kb_score=0.7)
    assert d.call is None and d.report()["kb_score"] == 0.7 and len(s.requests) == 1
    assert (await c.decide("q", q, TOOLS, ToolChoice(), "r", kb_score=None)).call is not None  # no KB to compete


def test_a_tool_text_carries_its_parameters_descriptions():
    t = function_tool({"name": "lookup_order", "description": "Find an order.", "parameters": {
        "type": "object", "properties": {"order_number": {"type": "string", "description": "digits only"}}}}, "t", None)
    assert tool_text(t) == "lookup order: Find an order. order number: digits only"
