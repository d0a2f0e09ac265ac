"""The front door: one aiohttp app serves HTTP and the /v1/realtime WebSocket on one port, with one set of
checks (Host, Origin, readiness, key) and one JSON error shape."""

import asyncio
import json
import logging

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from sub250.transport import http

TEST_KEY = "sk-sub250-unit-000000000000"
AUTH = {"Authorization": f"Bearer {TEST_KEY}"}


async def raw(port: int, payload: bytes, read: int = 65536) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(payload)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(read), 10)
    writer.close()
    return data


def head_and_body(data: bytes) -> tuple[bytes, dict]:
    head, _, body = data.partition(b"\r\n\r\n")
    return head, (json.loads(body) if body.strip().startswith(b"{") else {})


async def post(port: int, path: str, body: bytes = b"", headers: dict | None = None,
               host: str = "127.0.0.1") -> tuple[bytes, dict]:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return head_and_body(await raw(port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body))


async def test_http_and_websocket_share_the_port(make_server):
    srv = await make_server(ready=False)
    port = srv.port
    head, body = head_and_body(await raw(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"))
    assert head.startswith(b"HTTP/1.1 200") and body == {"status": "starting"}  # alive while loading
    head, body = head_and_body(await raw(port, b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"))
    assert head.startswith(b"HTTP/1.1 503") and body == {"status": "starting"}  # not ready
    head, body = head_and_body(await raw(port, b"GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                               b"Connection: close\r\n\r\n"))
    assert head.startswith(b"HTTP/1.1 426") and body["error"]["code"] == "websocket_required"
    # the upgrade is recognised whatever the header's case; not ready: one answer, 503 + Retry-After
    with pytest.raises(InvalidStatus) as err:
        async with connect(f"ws://127.0.0.1:{port}/v1/realtime", additional_headers=AUTH):
            pass
    assert err.value.response.status_code == 503
    assert err.value.response.headers["Retry-After"] == str(http.RETRY_AFTER_S)
    assert json.loads(err.value.response.body)["error"] == {
        "type": "server_error", "code": "not_ready",
        "message": "the server is still loading its engines; retry in a few seconds"}
    head, _ = head_and_body(await raw(port, b"GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\nUPGRADE:WebSocket\r\n"
                                            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                            b"Sec-WebSocket-Version: 13\r\n\r\n"))
    assert head.startswith(b"HTTP/1.1 503")
    head, body = await post(port, "/v1/realtime/client_secrets", b"{}", AUTH)
    assert head.startswith(b"HTTP/1.1 503") and b"Retry-After: 5" in head and body["error"]["code"] == "not_ready"
    srv.state, srv.shared = "ready", object()
    async with connect(f"ws://127.0.0.1:{port}/v1/realtime", additional_headers=AUTH) as ws:
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "session.created"


async def test_oversized_or_slow_heads_are_refused_and_the_server_keeps_serving(make_server, monkeypatch):
    monkeypatch.setattr(http, "IDLE_TIMEOUT_S", 0.5)
    srv = await make_server()
    port = srv.port
    # aiohttp's own limits (MAX_LINE_BYTES per header line): it answers 400
    head = await raw(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Junk: " + b"a" * 20000 + b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 400") or head.startswith(b"HTTP/1.1 400")
    headers = b"".join(b"X-%d: a\r\n" % i for i in range(http.MAX_HEADERS + 10))
    head = await raw(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n")
    assert b" 400 " in head.split(b"\r\n")[0]
    # a client that never finishes its head is dropped after IDLE_TIMEOUT_S
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHo")
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server, nothing sent
    writer.close()
    head, body = head_and_body(await raw(port, b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"))
    assert head.startswith(b"HTTP/1.1 404") and body["error"]["code"] == "not_found"


async def test_origin_rules_and_cors(make_server):
    srv = await make_server()
    port = srv.port
    head, body = head_and_body(await raw(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                               b"Origin: http://evil.example\r\nConnection: close\r\n\r\n"))
    assert head.startswith(b"HTTP/1.1 403") and body["error"]["code"] == "origin_not_allowed"
    assert b"Access-Control-Allow-Origin" not in head
    head = await raw(port, b"OPTIONS /v1/realtime/calls HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           b"Origin: http://allowed.example\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 204")
    assert b"Access-Control-Allow-Origin: http://allowed.example" in head
    head, body = await post(port, "/v1/realtime/client_secrets", b"", {**AUTH, "Origin": "http://allowed.example"})
    assert head.startswith(b"HTTP/1.1 200") and body["value"].startswith("ek_")
    assert b"Access-Control-Allow-Origin: http://allowed.example" in head
    # the page this server serves itself (same origin) needs no listing
    own = f"http://127.0.0.1:{port}"
    head, _ = await post(port, "/v1/realtime/client_secrets", b"", {**AUTH, "Origin": own}, host=f"127.0.0.1:{port}")
    assert head.startswith(b"HTTP/1.1 200")
    with pytest.raises(InvalidStatus) as err:
        async with connect(f"ws://127.0.0.1:{port}/v1/realtime", additional_headers={**AUTH, "Origin": "http://x.example"}):
            pass
    assert err.value.response.status_code == 403
    async with connect(f"ws://127.0.0.1:{port}/v1/realtime", additional_headers={**AUTH, "Origin": own}) as ws:
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "session.created"


async def test_dns_rebinding_is_refused_unless_the_host_is_listed(make_server):
    srv = await make_server()
    port = srv.port
    evil = f"evil.example:{port}"
    # Host and Origin agree ("same origin") but the Host is not a name of this server
    with pytest.raises(InvalidStatus) as err:
        async with connect(f"ws://{evil}/v1/realtime", host="127.0.0.1", port=port,  # Host: evil.example:PORT
                           additional_headers={**AUTH, "Origin": f"http://{evil}"}):
            pass
    assert err.value.response.status_code == 403
    assert json.loads(err.value.response.body)["error"]["code"] == "host_not_allowed"
    head, body = await post(port, "/v1/realtime/client_secrets", b"", {**AUTH, "Origin": f"http://{evil}"}, host=evil)
    assert head.startswith(b"HTTP/1.1 403") and body["error"]["code"] == "host_not_allowed"
    assert b"Access-Control-Allow-Origin" not in head
    # a same-origin GET carries no Origin at all: the Host check alone stops it
    head, body = head_and_body(await raw(port, f"GET / HTTP/1.1\r\nHost: {evil}\r\nConnection: close\r\n\r\n".encode()))
    assert head.startswith(b"HTTP/1.1 403") and body["error"]["code"] == "host_not_allowed"
    # names of this server: localhost, IP literals
    for host in (f"localhost:{port}", f"[::1]:{port}", f"10.1.2.3:{port}"):
        head, _ = await post(port, "/v1/realtime/client_secrets", b"", AUTH, host=host)
        assert head.startswith(b"HTTP/1.1 200"), host
    # listed in SUB250_HOSTS: served (and then it is its own origin)
    listed = await make_server(hosts=("evil.example",))
    head, _ = await post(listed.port, "/v1/realtime/client_secrets", b"",
                         {**AUTH, "Origin": f"http://evil.example:{listed.port}"}, host=f"evil.example:{listed.port}")
    assert head.startswith(b"HTTP/1.1 200")
    anyhost = await make_server(hosts=("*",))
    head, _ = await post(anyhost.port, "/v1/realtime/client_secrets", b"", AUTH, host="whatever.example")
    assert head.startswith(b"HTTP/1.1 200")


async def test_one_key_extraction_for_the_handshake_and_the_endpoints(make_server, sessions):
    srv = await make_server(origins=None)
    port = srv.port
    url = f"ws://127.0.0.1:{port}/v1/realtime"
    # browsers: the key as a subprotocol; "realtime" is echoed when offered, else the key's one
    proto = f"openai-insecure-api-key.{TEST_KEY}"
    async with connect(url, subprotocols=["realtime", proto]) as ws:
        assert ws.subprotocol == "realtime"
    async with connect(url, subprotocols=[proto]) as ws:
        assert ws.subprotocol == proto
    # ?api_key= is URL-decoded (request.query); ?model= reaches the session, ?xmodel= does not
    async with connect(f"{url}?api_key={TEST_KEY.replace('-', '%2D')}&model=tiny%2Dmodel") as ws:
        await asyncio.wait_for(ws.recv(), 5)
    async with connect(f"{url}?xmodel=nope", additional_headers=AUTH) as ws:
        await asyncio.wait_for(ws.recv(), 5)
    assert [s.model for s in sessions] == [None, None, "tiny-model", None]
    for headers, status in (({}, 401), ({"Authorization": "Bearer sk-wrong"}, 401), ({"Authorization": "Basic x"}, 401)):
        with pytest.raises(InvalidStatus) as err:
            async with connect(url, additional_headers=headers):
                pass
        assert err.value.response.status_code == status
        assert json.loads(err.value.response.body)["error"]["code"] == "invalid_api_key"
    # the HTTP endpoints take the same forms
    head, body = await post(port, f"/v1/realtime/client_secrets?api_key={TEST_KEY}")
    assert head.startswith(b"HTTP/1.1 200"), body
    head, body = await post(port, "/v1/realtime/client_secrets", headers={"Authorization": f"bearer   {TEST_KEY}"})
    assert head.startswith(b"HTTP/1.1 200"), body
    head, body = await post(port, "/v1/realtime/calls/rtc_nope/hangup", headers=AUTH)
    assert head.startswith(b"HTTP/1.1 404") and body["error"]["code"] == "call_not_found"
    head, body = await post(port, "/v1/realtime/calls/rtc_nope/hangup")
    assert head.startswith(b"HTTP/1.1 401") and body["error"]["code"] == "invalid_api_key"


async def test_a_client_secret_opens_sessions_but_mints_no_secrets(make_server):
    srv = await make_server()
    _, body = await post(srv.port, "/v1/realtime/client_secrets", b'{"expires_after": {"seconds": 60}}', AUTH)
    secret = body["value"]
    head, body = await post(srv.port, "/v1/realtime/client_secrets", b"", {"Authorization": f"Bearer {secret}"})
    assert head.startswith(b"HTTP/1.1 403") and body["error"]["code"] == "client_secret_not_allowed"
    head, body = await post(srv.port, f"/v1/realtime/client_secrets?api_key={secret}")
    assert head.startswith(b"HTTP/1.1 403")
    async with connect(f"ws://127.0.0.1:{srv.port}/v1/realtime",
                       subprotocols=["realtime", f"openai-insecure-api-key.{secret}"]) as ws:
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "session.created"
    head, body = await post(srv.port, "/v1/realtime/client_secrets", b'{"expires_after": 5}', AUTH)
    assert head.startswith(b"HTTP/1.1 400") and body["error"]["code"] == "invalid_body"
    head, body = await post(srv.port, "/v1/realtime/client_secrets", b"\xff\xfe", AUTH)
    assert head.startswith(b"HTTP/1.1 400") and body["error"]["code"] == "invalid_body"


async def test_bad_sdp_bytes_and_internal_errors_get_generic_messages(make_server, caplog):
    srv = await make_server()
    head, body = await post(srv.port, "/v1/realtime/calls", b"v=0\r\nm=audio \xff\xfe\xfd\r\n",
                            {**AUTH, "Content-Type": "application/sdp"})
    assert head.startswith(b"HTTP/1.1 400")
    assert body["error"] == {"type": "invalid_request_error", "code": "invalid_sdp",
                             "message": "the SDP offer is not UTF-8 text"}

    def broken() -> dict:
        raise RuntimeError("secret detail: /etc/passwd")

    srv.health = broken
    with caplog.at_level(logging.ERROR, logger="sub250.transport.http"):
        head, body = head_and_body(await raw(srv.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                       b"Connection: close\r\n\r\n"))
    assert head.startswith(b"HTTP/1.1 500") and body["error"]["code"] == "server_error"
    message = body["error"]["message"]
    assert "secret detail" not in message and "RuntimeError" not in message
    error_id = message.split("(id ")[1].split(")")[0]
    assert error_id.startswith("err_")
    logged = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged and "secret detail" in (logged[0].exc_text or str(logged[0].exc_info))


async def test_shutdown_closes_open_connections(make_server):
    srv = await make_server()
    async with connect(f"ws://127.0.0.1:{srv.port}/v1/realtime", additional_headers=AUTH) as ws:
        await asyncio.wait_for(ws.recv(), 5)
        await asyncio.wait_for(srv.close(), 10)
        await asyncio.wait_for(ws.wait_closed(), 5)
        assert ws.close_code == 1001


async def test_model_names_are_url_decoded_and_bounded(make_server, sessions):
    srv = await make_server()
    async with connect(f"ws://127.0.0.1:{srv.port}/v1/realtime?xmodel=no&model=my%20model",
                       additional_headers=AUTH) as ws:
        created = json.loads(await asyncio.wait_for(ws.recv(), 5))
    assert created["session"]["model"] == "my model"
    with pytest.raises(InvalidStatus) as err:
        async with connect(f"ws://127.0.0.1:{srv.port}/v1/realtime?model={'m' * 65}", additional_headers=AUTH):
            pass
    assert err.value.response.status_code == 400
    assert json.loads(err.value.response.body)["error"]["code"] == "invalid_value"


async def test_a_bad_client_secrets_body_is_answered_in_our_own_words(make_server):
    srv = await make_server()
    for body in (b'{"expires_after": {"seconds": 60}', b'{"expires_after": {"seconds": ' + b"9" * 5000 + b"}}"):
        head, answer = await post(srv.port, "/v1/realtime/client_secrets", body, AUTH)
        assert head.startswith(b"HTTP/1.1 400"), head
        assert answer["error"]["code"] == "invalid_body"
        assert "line 1" not in answer["error"]["message"] and "Exceeds" not in answer["error"]["message"]


async def test_a_client_secret_minted_with_a_session_opens_sessions_configured_with_it(make_server, sessions):
    srv = await make_server()
    session = {"type": "realtime", "instructions": "Be brief.", "output_modalities": ["text"]}
    head, body = await post(srv.port, "/v1/realtime/client_secrets",
                            json.dumps({"expires_after": {"seconds": 60}, "session": session}).encode(), AUTH)
    assert head.startswith(b"HTTP/1.1 200"), body
    assert body["session"]["instructions"] == "Be brief." and body["session"]["output_modalities"] == ["text"]
    assert len(body["value"]) < 200  # the session stays on the server: the secret still fits a subprotocol
    async with connect(f"ws://127.0.0.1:{srv.port}/v1/realtime",
                       subprotocols=["realtime", f"openai-insecure-api-key.{body['value']}"]) as ws:
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "session.created"
    assert sessions[-1].configured == [session]
    _, plain = await post(srv.port, "/v1/realtime/client_secrets", b"", AUTH)  # no session: nothing configured
    async with connect(f"ws://127.0.0.1:{srv.port}/v1/realtime",
                       subprotocols=["realtime", f"openai-insecure-api-key.{plain['value']}"]) as ws:
        await asyncio.wait_for(ws.recv(), 5)
    assert sessions[-1].configured == []
    head, body = await post(srv.port, "/v1/realtime/client_secrets",
                            json.dumps({"session": {"type": "realtime", "max_output_tokens": -1}}).encode(), AUTH)
    assert head.startswith(b"HTTP/1.1 400") and body["error"]["code"] == "invalid_value"
    assert "max_output_tokens" in body["error"]["message"]


async def test_too_many_secrets_with_a_session_is_a_429_not_a_bad_expiry(make_server, monkeypatch):
    from sub250.gateway import auth

    monkeypatch.setattr(auth, "MAX_SECRET_SESSIONS", 1)
    srv = await make_server()
    body = json.dumps({"session": {"type": "realtime"}}).encode()
    head, _ = await post(srv.port, "/v1/realtime/client_secrets", body, AUTH)
    assert head.startswith(b"HTTP/1.1 200")
    head, answer = await post(srv.port, "/v1/realtime/client_secrets", body, AUTH)
    assert head.startswith(b"HTTP/1.1 429") and answer["error"]["code"] == "too_many_client_secrets"
