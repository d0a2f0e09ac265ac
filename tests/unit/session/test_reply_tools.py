"""A reply that calls a client tool, and the reply that answers from the tool's output (fake engines)."""

import asyncio
import json
from dataclasses import replace

from sub250.answer.policy import AnswerPolicy
from sub250.metrics.timeline import now_ns
from sub250.protocol.session_config import DEFAULT_INSTRUCTIONS
from sub250.protocol.tools import ToolChoice, function_tool
from sub250.session.conversation import Conversation, FunctionOutput, Item
from sub250.session.output import ReplyOutput
from sub250.session.reply import Reply, ReplyOptions, ReplyState
from sub250.session.reply_context import ReplyContext
from sub250.session.stats import SessionStats
from sub250.session.tuning import PipelineTuning
from sub250.session.turn import UserTurn
from sub250.tasks import TaskSet
from tests.unit.session.fakes import FakeLLM, RecordingTransport, fake_engines

LOOKUP = function_tool({"name": "lookup_order", "description": "Look up an order by its number.",
                        "parameters": {"type": "object", "properties": {"order_number": {"type": "string"}},
                                       "required": ["order_number"]}}, "t", None)
CALL = '{"name": "lookup_order", "arguments": {"order_number": "48213"}}'
QUESTION = "Where is my order 48213?"

CALL_EVENTS = ["response.created", "response.output_item.added", "conversation.item.added",
               "response.function_call_arguments.delta", "response.function_call_arguments.done",
               "response.output_item.done", "conversation.item.done", "response.done", "sub250.turn.latency"]


def llm_writing(text):
    return FakeLLM(words=text.split(" "), abort_on_close=False)


def reply(conversation, *, llm, transport=None, choice=ToolChoice(), policy=None, modalities=("text",),
          item_id="item_user", response_id="resp_1", instructions="Be brief."):
    transport = transport or RecordingTransport()
    stack = fake_engines(llm=llm)
    turn = UserTurn.new(item_id, transcript=QUESTION)
    turn.timeline.mark("turn_commit")
    tuning = replace(PipelineTuning(), answer=policy or AnswerPolicy())
    r = Reply(ReplyContext(stack, tuning, conversation, SessionStats(), "sess_1"), turn,
              ReplyOptions(instructions, modalities, 64, tools=(LOOKUP,), tool_choice=choice),
              ReplyOutput(transport, response_id, f"item_{response_id}"), started_ns=now_ns())
    r.start(TaskSet().spawn)
    return r, transport


async def ended(r):
    await asyncio.wait([r.task])
    await asyncio.sleep(0)


def asked():
    c = Conversation()
    c.add(Item("item_user", "user", "input_text", QUESTION))
    return c


async def test_a_reply_that_needs_a_tool_is_a_function_call_item_and_joins_the_conversation():
    c = asked()
    r, t = reply(c, llm=llm_writing(CALL))
    await ended(r)
    assert t.types() == CALL_EVENTS
    assert r.state is ReplyState.DONE
    delta, = t.of("response.function_call_arguments.delta")
    done_args, = t.of("response.function_call_arguments.done")
    call_id = delta["call_id"]
    assert delta["delta"] == done_args["arguments"] == '{"order_number":"48213"}' and done_args["name"] == "lookup_order"
    added = t.of("response.output_item.added")[0]["item"]
    assert (added["type"], added["status"], added["call_id"]) == ("function_call", "in_progress", call_id)
    out, = t.of("response.done")[0]["response"]["output"]
    assert out == {"id": "item_resp_1", "type": "function_call", "object": "realtime.item", "status": "completed",
                   "call_id": call_id, "name": "lookup_order", "arguments": '{"order_number":"48213"}'}
    assert c.call(call_id) is not None and c.last_id == "item_resp_1" and c.call(call_id).sent_ns > 0
    lat, = t.of("sub250.turn.latency")
    assert lat["final"] and lat["tool"]["called"] == "lookup_order" and lat["beside"]["tool_choice"] > 0
    assert lat["spans"]["ttft"] is not None  # commit -> the call's arguments sent
    assert r.stack.llm.requests[0].json_schema is not None


async def test_the_answer_after_the_tool_speaks_its_output_in_the_extractive_mode():
    c = asked()
    first, _ = reply(c, llm=llm_writing(CALL))
    await ended(first)
    call = next(i for i in c if getattr(i, "call_id", None))
    c.add(FunctionOutput("item_out", call.call_id, '{"status": "shipped", "arrives": "3 December"}', tool_ms=42.0))
    llm = llm_writing(CALL)
    second, t = reply(c, llm=llm, policy=AnswerPolicy(mode="extractive"), response_id="resp_2",
                      instructions=DEFAULT_INSTRUCTIONS)  # custom instructions would go to the model
    await ended(second)
    assert not llm.requests, "the extractive answer needs no engine"
    text = "".join(e["delta"] for e in t.of("response.output_text.delta"))
    assert text == "Status: shipped. Arrives: 3 December."
    lat, = t.of("sub250.turn.latency")
    assert lat["beside"]["tool"] == 42.0 and lat["tool"]["results"][0]["name"] == "lookup_order"
    assert lat["answer"]["path"] == "tool_result" and "sub250.sources" not in t.types()
    assert c.last_id == "item_resp_2"


async def test_the_answer_after_the_tool_is_generated_from_its_output_in_the_generative_mode():
    c = asked()
    first, _ = reply(c, llm=llm_writing(CALL))
    await ended(first)
    call = next(i for i in c if getattr(i, "call_id", None))
    c.add(FunctionOutput("item_out", call.call_id, '{"status": "shipped"}'))
    llm = FakeLLM(words="Your order has shipped.".split(), abort_on_close=False)
    second, t = reply(c, llm=llm, response_id="resp_2")
    await ended(second)
    prompt = llm.prompts[0][-1]["content"]
    assert 'Result of lookup_order: {"status": "shipped"}' in prompt and QUESTION in prompt
    assert llm.requests[0].json_schema is None  # the answer is free text
    assert "".join(e["delta"] for e in t.of("response.output_text.delta")) == "Your order has shipped."


async def test_tool_choice_none_answers_as_usual_and_asks_no_tool():
    llm = FakeLLM(words="Nine months.".split(), abort_on_close=False)
    r, t = reply(asked(), llm=llm, choice=ToolChoice("none"))
    await ended(r)
    assert "response.function_call_arguments.delta" not in t.types()
    assert all(req.json_schema is None for req in llm.requests)


async def test_arguments_the_tool_cannot_take_fail_the_response_with_a_clear_error_and_free_the_slot():
    r, t = reply(asked(), llm=llm_writing('{"name": "lookup_order", "arguments": {"order_number": 48213}}'))
    await ended(r)
    assert r.state is ReplyState.FAILED and not r.active
    err, = t.of("error")
    assert err["error"]["code"] == "tool_arguments_invalid" and "lookup_order" in err["error"]["message"]
    assert "error id" in err["error"]["message"] and "Traceback" not in err["error"]["message"]
    done, = t.of("response.done")
    assert done["response"]["status"] == "failed" and done["response"]["output"] == []


async def test_a_cancelled_tool_decision_aborts_its_engine_request_and_leaves_no_call():
    pause = asyncio.Event()
    llm = FakeLLM(words=CALL.split(" "), pause=pause, pause_at=1)
    c = asked()
    r, t = reply(c, llm=llm)
    while not llm.requests:
        await asyncio.sleep(0.01)
    r.cancel("turn_detected")
    await ended(r)
    assert llm.aborted == [llm.requests[0].request_id]  # the engine stops writing the call
    assert r.state is ReplyState.CANCELLED and t.of("response.done")[0]["response"]["output"] == []
    assert [i.id for i in c] == ["item_user"]
    json.dumps(t.events)  # every event is plain JSON


async def test_the_calls_final_report_waits_until_its_arguments_have_left():
    t = RecordingTransport(delayed=True)  # a socket writes later than the reply queues
    r, _ = reply(asked(), llm=llm_writing(CALL), transport=t)
    await ended(r)
    assert "response.done" in t.types() and not t.of("sub250.turn.latency")
    t.deliver()
    lat, = t.of("sub250.turn.latency")
    assert lat["final"] and lat["spans"]["ttft"] is not None
