"""The SDK client against a tiny real WebSocket server (websockets): retries while the server says 503."""

import asyncio
import json

from websockets.asyncio.server import serve
from websockets.http11 import Response
from websockets.datastructures import Headers

from sub250.sdk import SUB250_EVENTS, RealtimeClient
from sub250.sdk.events import ServerEvent, TurnLatency


async def test_connect_waits_out_a_503_with_retry_after_then_opens():
    refused = []

    def loading(connection, request):
        if len(refused) < 2:
            refused.append(request.path)
            return Response(503, "Service Unavailable", Headers({"Retry-After": "0.05"}), b"loading")
        return None

    async def handler(ws):
        await ws.send(json.dumps({"type": "session.created", "event_id": "e", "session": {"type": "realtime"}}))
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0, process_request=loading) as server:
        port = server.sockets[0].getsockname()[1]
        client = RealtimeClient(f"ws://127.0.0.1:{port}/v1/realtime", "k", connect_retries=3, include=())
        t0 = asyncio.get_running_loop().time()
        await client.connect()
        assert len(refused) == 2 and asyncio.get_running_loop().time() - t0 >= 0.1
        assert client.session == {"type": "realtime"}
        await client.close()


def test_events_are_typed_by_the_openai_packages_models_and_ours():
    done = ServerEvent("response.function_call_arguments.done", {
        "type": "response.function_call_arguments.done", "event_id": "e", "response_id": "r", "item_id": "i",
        "output_index": 0, "call_id": "c", "name": "lookup_order", "arguments": "{}"})
    typed = done.typed()
    assert type(typed).__name__ == "ResponseFunctionCallArgumentsDoneEvent" and typed.name == "lookup_order"
    lat = ServerEvent("sub250.turn.latency", {"type": "sub250.turn.latency", "turn_id": "t", "final": True})
    assert isinstance(lat.typed(), TurnLatency) and lat.typed().final


async def test_wait_for_keeps_the_events_it_passes_over_for_the_next_reads():
    async def handler(ws):
        await ws.send(json.dumps({"type": "session.created", "event_id": "e0", "session": {}}))
        for i, etype in enumerate(["response.created", "response.output_text.delta", "response.done", "error"]):
            await ws.send(json.dumps({"type": etype, "event_id": f"e{i + 1}"}))
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        async with RealtimeClient(f"ws://127.0.0.1:{port}/v1/realtime", "k", include=()) as client:
            assert (await client.wait_for("error", timeout=5)).data["event_id"] == "e4"
            got = [(await client.next_event(timeout=5)).type for _ in range(3)]
            assert got == ["response.created", "response.output_text.delta", "response.done"]
            assert client.dropped_events == 0


async def test_connect_asks_for_the_sub250_events_it_reads_and_include_nothing_asks_none():
    received = []

    async def handler(ws):
        await ws.send(json.dumps({"type": "session.created", "event_id": "e0", "session": {}}))
        async for raw in ws:
            received.append(json.loads(raw))
            await ws.send(json.dumps({"type": "session.updated", "event_id": "e1", "session": {}}))

    async with serve(handler, "127.0.0.1", 0) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/realtime"
        async with RealtimeClient(url, "k") as client:
            await client.update_session(instructions="Be brief.")
        async with RealtimeClient(url, "k", include=()) as client:
            pass
    assert [ev["session"].get("include") for ev in received] == [list(SUB250_EVENTS), list(SUB250_EVENTS)]
    assert received[1]["session"]["instructions"] == "Be brief."


def test_the_sdk_asks_for_every_extension_the_server_has():
    from sub250.protocol.extensions import ALL

    assert SUB250_EVENTS == ALL
