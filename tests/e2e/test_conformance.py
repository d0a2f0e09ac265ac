"""Conformance with the official `openai` client: every client event type of the GA union is sent through the
client's own typed methods and answered as docs/PROTOCOL.md says (the API's answer, or a documented `error`);
every server event that comes back must validate against the package's pydantic models; and a WebRTC call is
created with `client.realtime.calls.create(sdp=..., session=...)`."""

import asyncio
import base64
import typing

import numpy as np
import pydantic
import pytest
import soundfile as sf
import soxr
from openai import AsyncOpenAI
from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent

pytestmark = pytest.mark.engines
TEST_KEY = "sk-sub250-test-0123456789"
SERVER_EVENTS = pydantic.TypeAdapter(RealtimeServerEvent)


def union_types(union) -> set[str]:
    """The ``type`` literals of a discriminated union of the openai package."""
    out = set()
    for member in typing.get_args(typing.get_args(union)[0]):
        out.update(typing.get_args(member.model_fields["type"].annotation))
    return out


class Conn:
    """The official connection, with every server event kept and checked against the GA models."""

    def __init__(self, conn):
        self.conn, self.events, self.invalid = conn, [], []

    async def until(self, *types: str, timeout: float = 120):
        """Events up to and including the first of ``types`` (its answer)."""
        got = []

        async def run():
            while True:
                raw = await self.conn.recv_bytes()
                import json

                data = json.loads(raw)
                try:  # ours too: a client that did not ask for them (session.include) gets none
                    SERVER_EVENTS.validate_python(data)
                except pydantic.ValidationError as exc:
                    self.invalid.append((data["type"], str(exc)[:400]))
                got.append(data)
                if data["type"] in types:
                    return

        await asyncio.wait_for(run(), timeout)
        self.events += got
        return got


async def test_every_ga_client_event_gets_its_documented_answer_from_the_official_client(server, speak):
    client = AsyncOpenAI(api_key=TEST_KEY, base_url=f"http://127.0.0.1:{server.port}/v1")
    sent: set[str] = set()
    data, rate = sf.read(str(speak("How often do I need to buy a new filter?")), dtype="float32")
    pcm = (soxr.resample(data, rate, 24000) * 32767).astype("<i2").tobytes()
    b64 = base64.b64encode(pcm).decode()
    async with client.realtime.connect(model="smollm2-135m-instruct") as raw:
        c = Conn(raw)
        await c.until("session.created")

        await raw.session.update(session={"type": "realtime", "output_modalities": ["text"],
                                          "audio": {"input": {"turn_detection": None}}})
        sent.add("session.update")
        assert (await c.until("session.updated"))[-1]["session"]["audio"]["input"]["turn_detection"] is None

        await raw.input_audio_buffer.append(audio=b64)
        await raw.input_audio_buffer.commit()
        sent |= {"input_audio_buffer.append", "input_audio_buffer.commit"}
        got = await c.until("conversation.item.input_audio_transcription.completed")
        assert "input_audio_buffer.committed" in [e["type"] for e in got] and "filter" in got[-1]["transcript"].lower()
        spoken_item = got[-1]["item_id"]

        await raw.input_audio_buffer.append(audio=b64[:4000])
        await raw.input_audio_buffer.clear()
        sent.add("input_audio_buffer.clear")
        await c.until("input_audio_buffer.cleared")

        await raw.conversation.item.create(item={"type": "message", "role": "user", "id": "item_typed",
                                                 "content": [{"type": "input_text", "text": "How long does the filter last?"}]})
        sent.add("conversation.item.create")
        assert (await c.until("conversation.item.done"))[-1]["item"]["id"] == "item_typed"

        await raw.conversation.item.retrieve(item_id=spoken_item)
        sent.add("conversation.item.retrieve")
        assert (await c.until("conversation.item.retrieved"))[-1]["item"]["id"] == spoken_item

        await raw.response.create()
        sent.add("response.create")
        done = (await c.until("response.done"))[-1]
        assert done["response"]["status"] == "completed"
        reply_item = done["response"]["output"][0]["id"]

        await raw.conversation.item.truncate(item_id=reply_item, content_index=0, audio_end_ms=0)
        sent.add("conversation.item.truncate")
        await c.until("conversation.item.truncated")

        await raw.conversation.item.delete(item_id="item_typed")
        sent.add("conversation.item.delete")
        await c.until("conversation.item.deleted")

        await raw.response.cancel()  # nothing is running: the documented error
        sent.add("response.cancel")
        err = (await c.until("error"))[-1]["error"]
        assert err["code"] == "response_not_found"

        await raw.output_audio_buffer.clear()  # WebRTC only: the documented error over a WebSocket
        sent.add("output_audio_buffer.clear")
        assert (await c.until("error"))[-1]["error"]["code"] == "unsupported_event"

        # a tool round trip, in the client's own shapes
        await raw.session.update(session={"type": "realtime", "tools": [{
            "type": "function", "name": "lookup_order", "description": "Look up where a customer's order is.",
            "parameters": {"type": "object", "properties": {"order_number": {
                "type": "string", "pattern": "^[0-9]{4,8}$", "description": "the order number, digits only"}},
                "required": ["order_number"]}}], "tool_choice": {"type": "function", "name": "lookup_order"}})
        await c.until("session.updated")
        await raw.conversation.item.create(item={"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Where is my order 48213?"}]})
        await raw.response.create()
        call = (await c.until("response.done"))[-1]["response"]["output"][0]
        assert call["type"] == "function_call" and call["arguments"] == '{"order_number":"48213"}'
        await raw.conversation.item.create(item={"type": "function_call_output", "call_id": call["call_id"],
                                                 "output": '{"status": "shipped"}'})
        await raw.response.create(response={"tool_choice": "none"})
        answer = (await c.until("response.done"))[-1]["response"]
        assert answer["status"] == "completed" and answer["output"][0]["type"] == "message"

    assert sent == union_types(RealtimeClientEvent), union_types(RealtimeClientEvent) - sent
    assert not c.invalid, c.invalid[:5]


async def test_calls_create_of_the_official_client_opens_a_configured_webrtc_call(server):
    from aiortc import RTCPeerConnection, RTCSessionDescription

    client = AsyncOpenAI(api_key=TEST_KEY, base_url=f"http://127.0.0.1:{server.port}/v1")
    pc = RTCPeerConnection()
    pc.addTransceiver("audio", direction="sendrecv")
    channel = pc.createDataChannel("oai-events")
    created = asyncio.get_running_loop().create_future()

    @channel.on("message")
    def on_message(msg):
        import json

        event = json.loads(msg)
        if event["type"] == "session.created" and not created.done():
            created.set_result(event)

    try:
        await pc.setLocalDescription(await pc.createOffer())
        answer = await client.realtime.calls.create(
            sdp=pc.localDescription.sdp, session={"type": "realtime", "instructions": "Answer in five words."})
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer.text, type="answer"))
        event = await asyncio.wait_for(created, 30)
        assert event["session"]["instructions"] == "Answer in five words."
        SERVER_EVENTS.validate_python(event)
    finally:
        await pc.close()
        await client.close()
