"""The SDK's client tools: schemas from signatures, and calls answered whatever the tool does."""

import asyncio
import json

import jsonschema

from sub250.sdk.tools import ToolSet, tool_from_function


def lookup_order(order_number: str, include_items: bool = False) -> dict:
    """Look up where an order is.

    Longer text that is not part of the description."""
    return {"order_number": order_number, "status": "shipped", "items": include_items}


def test_the_schema_comes_from_the_signature_and_the_description_from_the_docstring():
    t = tool_from_function(lookup_order)
    assert t.name == "lookup_order" and t.description == "Look up where an order is."
    assert t.parameters == {"type": "object", "additionalProperties": False, "required": ["order_number"],
                            "properties": {"order_number": {"type": "string"},
                                           "include_items": {"type": "boolean", "default": False}}}
    jsonschema.validators.validator_for(t.parameters).check_schema(t.parameters)  # the server would accept it
    assert t.definition()["type"] == "function"


def call(name, arguments, call_id="call_1"):
    return {"type": "function_call", "name": name, "arguments": arguments, "call_id": call_id, "status": "completed"}


async def test_a_call_runs_the_function_with_typed_arguments():
    tools = ToolSet()
    tools.tool(lookup_order)
    run = await tools.run(call("lookup_order", '{"order_number": "48213"}'))
    assert run.ok and json.loads(run.output) == {"order_number": "48213", "status": "shipped", "items": False}
    assert run.ms >= 0 and run.call_id == "call_1"


async def test_whatever_goes_wrong_becomes_an_error_result_and_never_raises():
    tools = ToolSet()

    @tools.tool(timeout_s=0.05)
    async def slow(x: int) -> str:
        await asyncio.sleep(5)
        return "late"

    @tools.tool
    def broken() -> str:
        raise RuntimeError("the database is down")

    cases = {"bad arguments": call("slow", '{"x": "not a number"}'), "unknown": call("nope", "{}"),
             "timeout": call("slow", '{"x": 1}'), "raises": call("broken", "{}"), "not json": call("slow", "{x")}
    for what, c in cases.items():
        run = await tools.run(c)
        assert not run.ok, what
        assert set(json.loads(run.output)) == {"error"}, what
    assert "within 0.05 s" in (await tools.run(cases["timeout"])).error
    assert "the database is down" in (await tools.run(cases["raises"])).error


async def test_a_response_with_calls_is_answered_by_outputs_then_a_response_create():
    tools = ToolSet()
    tools.tool(lookup_order)
    done = {"type": "response.done", "response": {"output": [
        call("lookup_order", '{"order_number": "1"}', "call_a"), call("lookup_order", '{"order_number": "2"}', "call_b"),
        {"type": "message", "role": "assistant", "content": []}]}}
    runs, events = await tools.answer(done)
    assert [r.call_id for r in runs] == ["call_a", "call_b"]
    assert [e["type"] for e in events] == ["conversation.item.create"] * 2 + ["response.create"]
    assert events[0]["item"]["type"] == "function_call_output" and events[1]["item"]["call_id"] == "call_b"
    assert await tools.answer({"type": "response.done", "response": {"output": []}}) == ([], [])
