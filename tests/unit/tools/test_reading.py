"""An argument read from the question (app/tools/reading.py): a forced call of a one-pattern tool skips the model
when the question holds the argument once, as it is - and only then."""

import json

from sub250.protocol.tools import ToolChoice, function_tool
from sub250.tools import ToolCall
from sub250.tools.reading import read_arguments
from tests.unit.tools.test_caller import HUMAN, Script, caller

ORDER = function_tool({"name": "lookup_order", "description": "Look up an order.", "parameters": {
    "type": "object", "properties": {"order_number": {"type": "string", "pattern": "^[0-9]{4,8}$"}},
    "required": ["order_number"]}}, "t", None)


def test_the_one_match_of_the_pattern_is_the_argument():
    assert read_arguments(ORDER, "Keyed in: 48213") == {"order_number": "48213"}
    assert read_arguments(ORDER, "my order 48213, yes 48213") == {"order_number": "48213"}  # the same twice


def test_anything_unsure_is_left_to_the_model():
    assert read_arguments(ORDER, "Keyed in: 123") is None  # too short for the pattern
    assert read_arguments(ORDER, "Keyed in: 123456789") is None  # a longer number is not cut to fit
    assert read_arguments(ORDER, "orders 48213 and 55555") is None  # which one?
    assert read_arguments(ORDER, "order A48213") is None  # part of a longer word
    assert read_arguments(ORDER, "where is my order?") is None
    assert read_arguments(HUMAN, "a person, please") is None  # no pattern: the model writes it
    two = function_tool({"name": "f", "parameters": {"type": "object", "properties": {
        "a": {"type": "string", "pattern": "^[0-9]+$"}, "b": {"type": "string"}}}}, "t", None)
    assert read_arguments(two, "Keyed in: 12") is None  # two parameters: the model writes them


async def test_a_forced_call_that_can_be_read_asks_the_engine_nothing():
    s = Script(json.dumps({"order_number": "99999"}))
    d = await caller(s).decide("Keyed in: 48213", None, (ORDER, HUMAN), ToolChoice("function", "lookup_order"), "r")
    assert d.call == ToolCall("lookup_order", '{"order_number":"48213"}') and not s.requests
    assert d.report()["read"] and d.report()["tokens"] == 0
    d = await caller(s).decide("Keyed in: 12", None, (ORDER, HUMAN), ToolChoice("function", "lookup_order"), "r")
    assert len(s.requests) == 1 and not d.report()["read"]  # not readable: the model writes it


async def test_read_arguments_off_has_the_model_write_them():
    from sub250.tools import ToolCaller, ToolPolicy

    s = Script(json.dumps({"order_number": "48213"}))
    policy = ToolPolicy.from_stage({"read_arguments": False})
    d = await ToolCaller(policy, s.stream, None).decide("Keyed in: 48213", None, (ORDER,),
                                                         ToolChoice("function", "lookup_order"), "r")
    assert len(s.requests) == 1 and not d.report()["read"] and d.call.arguments == '{"order_number":"48213"}'
