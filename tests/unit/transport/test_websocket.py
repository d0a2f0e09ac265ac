"""The realtime WebSocket on aiohttp: frame limits and close codes, every frame through the rate limit,
honest ping/pong RTT and keepalive, reply audio (send_audio), the per-key session limit, and a client that
does not read."""

import asyncio
import base64
import json
import socket

import aiohttp
import pytest
from websockets.asyncio.client import connect

from sub250.protocol import ProtocolError
from sub250.transport import outbox, websocket

TEST_KEY = "sk-sub250-unit-000000000000"
AUTH = {"Authorization": f"Bearer {TEST_KEY}"}


def url(srv) -> str:
    return f"ws://127.0.0.1:{srv.port}/v1/realtime"


async def recv_json(ws, timeout: float = 5) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def wait_until(predicate, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_text_goes_to_the_session_binary_is_refused_with_received_time(make_server, sessions):
    srv = await make_server()
    async with connect(url(srv), additional_headers=AUTH) as ws:
        await recv_json(ws)
        await ws.send(json.dumps({"type": "input_audio_buffer.clear", "event_id": "e1"}))
        await ws.send(b"\x00\x01binary")
        err = await recv_json(ws)
        assert err["type"] == "error" and err["error"]["code"] == "invalid_event"
        await ws.send("{not json")
        assert (await recv_json(ws))["error"]["code"] == "invalid_json"
    session = sessions[0]
    await wait_until(lambda: session.closed)
    (event, received_ns), = session.events
    assert event.type == "input_audio_buffer.clear" and received_ns > 0


async def test_binary_frames_count_against_the_message_rate(make_server, sessions):
    srv = await make_server(messages_per_s=1, burst=5)
    async with connect(url(srv), additional_headers=AUTH) as ws:
        await recv_json(ws)
        for _ in range(12):
            await ws.send(b"\x00")
        codes = [(await recv_json(ws))["error"]["code"] for _ in range(12)]
    assert codes.count("invalid_event") == 5
    assert codes.count("rate_limit_exceeded") == 7


async def test_frame_limits_and_invalid_utf8_close_the_connection(make_server, sessions):
    srv = await make_server(max_frame_bytes=1024)
    async with aiohttp.ClientSession() as client:
        async with client.ws_connect(url(srv), headers=AUTH) as ws:
            assert json.loads((await ws.receive(5)).data)["type"] == "session.created"
            await ws.send_str("x" * 2000)
            msg = await ws.receive(5)
            assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == 1009  # message too big
        async with client.ws_connect(url(srv), headers=AUTH) as ws:
            await ws.receive(5)
            await ws.send_frame(b'{"type": "\xff\xfe"}', aiohttp.WSMsgType.TEXT)
            msg = await ws.receive(5)
            assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == 1007  # invalid UTF-8 in a text frame
    await wait_until(lambda: len(sessions) == 2 and all(s.closed for s in sessions))
    assert all(not s.events for s in sessions)


async def test_rtt_is_a_ping_pong_round_trip_even_while_the_session_is_busy(make_server, sessions):
    srv = await make_server()
    async with connect(url(srv), additional_headers=AUTH) as ws:
        await recv_json(ws)
        # the client's own pings are answered (with their payload)
        pong = await ws.ping(b"client-ping")
        await asyncio.wait_for(pong, 5)
        session = sessions[0]
        session.block = asyncio.Event()  # the session is stuck handling an event...
        await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        await wait_until(lambda: session.events)
        rtt = await session.transport.measure_rtt()  # ...and the PONG is still read and matched
        assert rtt is not None and 0 < rtt < 1000
        session.block.set()


async def test_rtt_is_unknown_when_the_peer_does_not_answer(make_server, sessions, monkeypatch):
    monkeypatch.setattr(websocket, "RTT_TIMEOUT_S", 0.3)
    srv = await make_server()
    async with aiohttp.ClientSession() as client:
        async with client.ws_connect(url(srv), headers=AUTH, autoping=False) as ws:  # never answers pings
            await ws.receive(5)
            assert await sessions[0].transport.measure_rtt() is None
            msg = await ws.receive(5)
            assert msg.type == aiohttp.WSMsgType.PING and len(msg.data) == 8
            await ws.pong(b"not-that-one")  # an unsolicited/unknown PONG is ignored


async def test_keepalive_closes_a_peer_that_stops_answering(make_server, sessions, monkeypatch):
    monkeypatch.setattr(websocket, "PING_INTERVAL_S", 0.2)
    monkeypatch.setattr(websocket, "PING_TIMEOUT_S", 0.3)
    srv = await make_server()
    async with aiohttp.ClientSession() as client:
        async with client.ws_connect(url(srv), headers=AUTH, autoping=False) as ws:
            await ws.receive(5)
            msg = await ws.receive(5)
            assert msg.type == aiohttp.WSMsgType.PING
            msg = await ws.receive(5)  # no PONG sent: closed as websockets' keepalive did
            assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == websocket.KEEPALIVE_CLOSE_CODE == 1008
            assert msg.extra == "keepalive ping timeout"
    # a peer that answers stays connected
    async with connect(url(srv), additional_headers=AUTH) as ws:
        await recv_json(ws)
        await asyncio.sleep(1.0)
        await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        await wait_until(lambda: sessions[-1].events)


async def test_send_audio_builds_tagged_deltas_and_purge_drops_them(make_server, sessions):
    srv = await make_server()
    async with connect(url(srv), additional_headers=AUTH) as ws:
        await recv_json(ws)
        transport = sessions[0].transport
        sent = []
        transport.send_audio(b"\x01\x02" * 240, response_id="resp_a", item_id="item_a", on_sent=sent.append)
        transport.audio_done("resp_a")
        delta = await recv_json(ws)
        assert delta["type"] == "response.output_audio.delta" and delta["event_id"].startswith("event_")
        assert (delta["response_id"], delta["item_id"], delta["output_index"], delta["content_index"]) == \
            ("resp_a", "item_a", 0, 0)
        assert base64.b64decode(delta["delta"]) == b"\x01\x02" * 240
        await wait_until(lambda: sent)
        assert sent[0] > 0
    # purge (barge-in) drops the queued deltas of one response only
    box = outbox.Outbox()
    fake = websocket.WebSocketTransport.__new__(websocket.WebSocketTransport)
    fake.outbox = box
    for rid in ("old", "new", "old"):
        fake.send_audio(memoryview(b"\x00\x00" * 10), response_id=rid, item_id="i")
    assert fake.purge("old") == 2 and len(box) == 1


async def test_session_limit_is_an_error_event_then_close_1008(make_server, sessions):
    srv = await make_server(max_sessions_per_key=1)
    async with connect(url(srv), additional_headers=AUTH) as first:
        await recv_json(first)
        async with connect(url(srv), additional_headers=AUTH) as second:
            ev = await recv_json(second)
            assert ev["type"] == "error" and ev["error"]["code"] == "session_limit"
            assert ev["error"]["type"] == "rate_limit_error"
            await asyncio.wait_for(second.wait_closed(), 5)
            assert second.close_code == 1008
    await wait_until(lambda: sessions[0].closed)
    async with connect(url(srv), additional_headers=AUTH) as again:  # released
        assert (await recv_json(again))["type"] == "session.created"


async def _never_reading_client(port: int) -> socket.socket:
    """A raw WebSocket client with a tiny receive buffer that completes the handshake and never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, (f"GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                                   f"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                   f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {TEST_KEY}\r\n\r\n").encode())
    head = await asyncio.wait_for(loop.sock_recv(sock, 1024), 5)
    assert head.startswith(b"HTTP/1.1 101"), head
    event = json.dumps({"type": "response.create", "response": {"metadata": {
        "audio_chunks": "300", "chunk_bytes": "48000", "events": "400", "pad": "30000"}}}).encode()
    mask = b"\x00\x00\x00\x00"
    frame = bytes([0x81, 0x80 | 126]) + len(event).to_bytes(2, "big") + mask + event  # masked (by 0) text frame
    await loop.sock_sendall(sock, frame)
    return sock


async def test_a_client_that_does_not_read_loses_old_audio_then_is_closed(make_server, sessions, monkeypatch):
    monkeypatch.setattr(websocket, "CLOSE_TIMEOUT_S", 0.5)
    srv = await make_server(max_outbox_bytes=1 << 20)
    async with connect(url(srv), additional_headers=AUTH) as healthy:
        await recv_json(healthy)
        sock = await _never_reading_client(srv.port)
        try:
            await wait_until(lambda: len(sessions) == 2 and sessions[1].closed, timeout=20)
            box = sessions[1].transport.outbox
            assert box.dropped_audio > 0  # reply audio went first...
            assert box.overflowed  # ...then the connection was closed
        finally:
            sock.close()
        # the other session is unaffected
        await healthy.send(json.dumps({"type": "response.create", "response": {"metadata": {"events": "3"}}}))
        assert [(await recv_json(healthy))["n"] for _ in range(3)] == [0, 1, 2]


def test_overflow_closes_with_a_clear_code(monkeypatch):
    closed = []

    class WS:
        closed = False

        async def close(self, code, message):
            closed.append((code, message))

    async def run():
        transport = websocket.WebSocketTransport(WS(), max_outbox_bytes=1000)
        transport.send({"type": "x", "pad": "y" * 2000})
        await transport.closed()

    asyncio.run(run())
    assert closed == [(1008, b"client is not reading")]


def test_dispatch_errors_are_protocol_errors():
    from sub250.gateway import GatewayLimits, KeyLimiter, Principal
    from sub250.transport.dispatch import admit_message

    limiter = KeyLimiter(GatewayLimits(max_event_bytes=10, burst=2, messages_per_s=0.001))
    who = Principal("k")
    assert admit_message(limiter, who, "x" * 11).code == "event_too_large"
    assert isinstance(admit_message(limiter, who, b"\x00"), ProtocolError)
    assert admit_message(limiter, who, "{}") is None
    assert admit_message(limiter, who, "{}").code == "rate_limit_exceeded"
