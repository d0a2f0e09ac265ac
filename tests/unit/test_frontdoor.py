"""One port, two libraries: WebSocket upgrades reach websockets, other HTTP reaches aiohttp, and
malformed or oversized request heads are refused before either sees them."""

import asyncio
import json

import pytest

from app.gateway import ApiKeys, GatewayLimits
from app.server import Server


async def _raw(port: int, payload: bytes, read: int = 65536) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(payload)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(read), 10)
    writer.close()
    return data


@pytest.fixture
async def bare_server():
    srv = Server("127.0.0.1", 0, keys=ApiKeys(["sk-sub250-unit-000000000000"]),
                 limits=GatewayLimits(origins=("http://allowed.example",)))
    await srv.listen()
    yield srv
    await srv.close()


async def test_http_and_websocket_share_the_port(bare_server):
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    port = bare_server.port
    head = await _raw(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503") and b'"starting"' in head  # aiohttp answered
    head = await _raw(port, b"GET /v1/realtime HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 426")
    # the upgrade header is matched whatever its case; websockets answers (503: engines not loaded)
    with pytest.raises(InvalidStatus) as err:
        async with connect(f"ws://127.0.0.1:{port}/v1/realtime"):
            pass
    assert err.value.response.status_code == 503
    head = await _raw(port, b"GET /v1/realtime HTTP/1.1\r\nHost: x\r\nUPGRADE:WebSocket\r\nConnection: Upgrade\r\n"
                            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503")
    # POST with a body (impossible for websockets alone) reaches aiohttp
    head = await _raw(port, b"POST /v1/realtime/client_secrets HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                            b"Connection: close\r\n\r\n{}")
    assert head.startswith(b"HTTP/1.1 503")


async def test_oversized_head_is_refused_and_the_server_keeps_serving(bare_server):
    port = bare_server.port
    head = await _raw(port, b"GET / HTTP/1.1\r\nX-Junk: " + b"a" * 20000)
    assert head.startswith(b"HTTP/1.1 431")
    # a client that goes away mid-head costs nothing
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHo")
    writer.close()
    head = await _raw(port, b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 404")
    assert json.loads(head.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "not_found"


async def test_origin_rules_and_cors(bare_server):
    port = bare_server.port
    head = await _raw(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\n"
                            b"Connection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403")
    head = await _raw(port, b"OPTIONS /v1/realtime/calls HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            b"Origin: http://allowed.example\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 204")
    assert b"Access-Control-Allow-Origin: http://allowed.example" in head
    assert bare_server.origin_allowed("http://127.0.0.1:8250", "127.0.0.1:8250")  # its own page
    assert not bare_server.origin_allowed("http://127.0.0.1:9", "127.0.0.1:8250")
    assert bare_server.origin_allowed(None)  # SDKs send no Origin
