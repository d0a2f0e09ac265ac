"""An app that follows and steers a phone call (app/telephony/control.py: ``/v1/realtime?call_id=``) and hands it to
a person (app/transport/call_routes.py: ``…/refer``), on a real server and real sockets with a stand-in session;
the call is a Twilio stream driven as Twilio drives it (scripts/bench/phone.py), and Twilio's REST API is a
stand-in HTTP server - the only thing mocked, at Twilio's HTTP boundary."""

from __future__ import annotations

import asyncio
import base64
import json
from urllib.parse import parse_qs

import aiohttp
import pytest_asyncio
from aiohttp import web

from sub250.gateway import ApiKeys, GatewayLimits
from sub250.protocol.session_config import SessionConfig
from sub250.protocol.tools import ToolChoice
from sub250.server import Server
from sub250.telephony import keypad
from sub250.telephony.call_webhook import SIGNATURE_HEADER, CallWebhook, signature
from sub250.telephony.twilio_routes import TwilioSettings
from tests.unit.transport.conftest import TEST_KEY
from tests.unit.transport.test_twilio_stream import TOKEN, call_of, until

ACCOUNT = "AC" + "1" * 32  # what scripts/bench/phone.py's start and stop carry
LOOKUP = {"type": "function", "name": "lookup_order", "description": "Look up an order by its number.",
          "parameters": {"type": "object", "properties": {"order_number": {"type": "string"}},
                         "required": ["order_number"]}}
AUTH = {"Authorization": f"Bearer {TEST_KEY}"}
WEBHOOK_SECRET = "whsec-unit"


class TwilioApi:
    """Twilio's REST API as far as a transfer needs it: ``POST …/Accounts/{sid}/Calls/{sid}.json``."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        #: The call webhooks the server sent here (``/hooks/call``): (signature, body); and what they get back.
        self.webhooks: list[tuple[str | None, bytes]] = []
        self.webhook_status = 200
        self.answer: tuple[int, dict] = (200, {"status": "in-progress"})
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> TwilioApi:
        app = web.Application()
        app.router.add_post("/2010-04-01/Accounts/{account}/Calls/{call}.json", self._update)
        app.router.add_post("/hooks/call", self._webhook)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _webhook(self, request: web.Request) -> web.Response:
        self.webhooks.append((request.headers.get(SIGNATURE_HEADER), await request.read()))
        return web.Response(status=self.webhook_status)

    async def _update(self, request: web.Request) -> web.Response:
        user, _, password = base64.b64decode(request.headers["Authorization"].split()[1]).decode().partition(":")
        self.requests.append({"account": request.match_info["account"], "call": request.match_info["call"],
                              "auth": (user, password), "form": parse_qs(await request.text())})
        status, body = self.answer
        return web.json_response({"sid": request.match_info["call"], **body}, status=status)


@pytest_asyncio.fixture
async def twilio_api():
    async with TwilioApi() as api:
        yield api


@pytest_asyncio.fixture
async def phone_server(sessions, twilio_api):
    srv = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(max_sessions_per_key=4),
                 twilio=TwilioSettings(TOKEN, api_url=twilio_api.url),
                 call_webhook=CallWebhook(twilio_api.url + "/hooks/call", WEBHOOK_SECRET))
    await srv.listen()
    srv.attach(object())
    yield srv
    await srv.close()


def control_url(srv: Server, call_id: str) -> str:
    return f"ws://127.0.0.1:{srv.port}/v1/realtime?call_id={call_id}"


async def next_json(ws: aiohttp.ClientWebSocketResponse, kind: str, timeout: float = 5.0) -> dict:
    async with asyncio.timeout(timeout):
        while True:
            msg = await ws.receive()
            assert msg.type is aiohttp.WSMsgType.TEXT, msg
            event = json.loads(msg.data)
            if event["type"] == kind:
                return event


async def test_an_app_follows_a_call_and_its_events_reach_the_session(phone_server, sessions):
    async with await call_of(phone_server) as call, aiohttp.ClientSession() as http:
        await until(lambda: phone_server.calls)
        (phone,) = phone_server.calls.values()
        async with http.ws_connect(control_url(phone_server, phone.id), headers=AUTH) as app:
            created = await next_json(app, "session.created")
            assert created["session"]["id"] == "sess_fake"  # the call's own session, as it is now
            assert created["session"]["include"] == []  # the app has asked for no additions yet
            await until(lambda: phone.listeners)
            # The app's response.create reaches the call's session, and what the session sends reaches the app.
            await app.send_json({"type": "response.create"})
            await until(lambda: [e.type for e, _ in sessions[0].events] == ["response.create"])
            phone.send({"type": "response.done", "response": {"id": "resp_1"}})
            assert (await next_json(app, "response.done"))["response"]["id"] == "resp_1"
            # Our additions only as the app's own include asks; the call's session keeps the ledger it needs.
            phone.send({"type": "sub250.turn.latency", "n": 1})
            phone.send({"type": "response.done", "response": {"id": "resp_2"}})
            assert (await next_json(app, "response.done"))["response"]["id"] == "resp_2"  # no latency before it
            await app.send_json({"type": "session.update", "session": {"include": ["sub250.sources"]}})
            await until(lambda: len(sessions[0].events) == 2)
            assert sessions[0].events[1][0].session["include"] == ["sub250.sources", "sub250.latency"]
            phone.send({"type": "sub250.sources", "n": 2})
            assert (await next_json(app, "sub250.sources"))["n"] == 2
            await app.send_json({"type": "session.update", "session": {"include": ["nope"]}})
            assert (await next_json(app, "error"))["error"]["param"] == "session.include[0]"
            assert len(sessions[0].events) == 2  # refused whole, before the session
            # The call's audio is the caller's: an app's audio is refused on its own socket; the call goes on.
            await app.send_json({"type": "input_audio_buffer.append", "audio": base64.b64encode(bytes(480)).decode()})
            err = await next_json(app, "error")
            assert err["error"]["code"] == "audio_not_allowed"
            assert not sessions[0].audio and not phone.closing
            await call.stop()  # the caller hangs up: the app's socket closes, 1000
            msg = await app.receive(timeout=5)
            while msg.type is aiohttp.WSMsgType.TEXT:
                msg = await app.receive(timeout=5)
            assert msg.type is aiohttp.WSMsgType.CLOSE and msg.data == 1000 and msg.extra == "the call ended"
    await until(lambda: not phone_server.calls)


async def test_each_call_that_comes_in_is_announced_signed(phone_server, sessions, twilio_api):
    async with await call_of(phone_server, "CA9"):
        await until(lambda: twilio_api.webhooks)
        (phone,) = phone_server.calls.values()
        twilio_api.webhook_status = 500
    (sig, body), = twilio_api.webhooks
    event = json.loads(body)
    assert event["type"] == "realtime.call.incoming" and event["data"]["call_id"] == phone.id
    assert event["data"]["carrier"] == "twilio" and sig == signature(WEBHOOK_SECRET, body)
    async with await call_of(phone_server, "CA10"):  # a webhook that fails is logged; the call goes on
        await until(lambda: len(twilio_api.webhooks) == 2)
        await asyncio.sleep(0.1)
        (phone,) = phone_server.calls.values()
        assert not phone.closing


async def test_an_app_that_leaves_leaves_the_call_going(phone_server, sessions):
    async with await call_of(phone_server), aiohttp.ClientSession() as http:
        await until(lambda: phone_server.calls)
        (phone,) = phone_server.calls.values()
        async with http.ws_connect(control_url(phone_server, phone.id), headers=AUTH) as app:
            await next_json(app, "session.created")
        await until(lambda: not phone.listeners)
        assert not phone.closing and not sessions[0].closed


async def test_only_an_open_phone_call_can_be_followed_and_only_with_an_api_key(phone_server, sessions):
    async with aiohttp.ClientSession() as http:
        for headers in (AUTH, {}):
            async with http.get(control_url(phone_server, "twi_nope"), headers={**headers, "Upgrade": "websocket",
                                "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}) as resp:
                assert resp.status == (404 if headers else 401), await resp.text()
                if headers:
                    assert (await resp.json())["error"]["code"] == "call_not_found"
        async with http.post(f"http://127.0.0.1:{phone_server.port}/v1/realtime/client_secrets",
                             headers=AUTH) as resp:
            secret = (await resp.json())["value"]
        async with await call_of(phone_server):
            await until(lambda: phone_server.calls)
            (phone,) = phone_server.calls.values()
            async with http.post(f"http://127.0.0.1:{phone_server.port}/v1/realtime/calls/{phone.id}/hangup",
                                 headers={"Authorization": f"Bearer {secret}"}) as resp:
                assert resp.status == 403, await resp.text()  # a browser's secret does not reach phone calls
            assert not phone.closing
            async with http.post(f"http://127.0.0.1:{phone_server.port}/v1/realtime/calls/{phone.id}/hangup",
                                 headers=AUTH) as resp:
                assert resp.status == 200
            await until(lambda: not phone_server.calls)


async def test_keys_call_the_sessions_keypad_tool(phone_server, sessions, monkeypatch):
    monkeypatch.setattr(keypad, "ENTRY_IDLE_S", 0.2)
    async with await call_of(phone_server) as call:
        await until(lambda: sessions)
        sessions[0].config = SessionConfig().updated({"tools": [LOOKUP], "sub250": {"keypad_tool": "lookup_order"}})
        for key in "48213#":
            await call.dtmf(key)
        await until(lambda: len(sessions[0].events) == 2)
    (item, _), (respond, _) = sessions[0].events
    assert item.data["item"]["content"][0]["text"] == "Keyed in: 48213"
    assert respond.data["response"]["tool_choice"] == ToolChoice("function", "lookup_order")


async def test_a_refer_has_twilio_dial_the_target(phone_server, sessions, twilio_api):
    async with await call_of(phone_server, "CA7"), aiohttp.ClientSession() as http:
        await until(lambda: phone_server.calls)
        (phone,) = phone_server.calls.values()
        url = f"http://127.0.0.1:{phone_server.port}/v1/realtime/calls/{phone.id}/refer"
        async with http.post(url, json={"target_uri": "sip:support@pbx.example.com"}, headers=AUTH) as resp:
            assert resp.status == 200, await resp.text()
            assert await resp.json() == {"status": "in-progress"}
        (req,) = twilio_api.requests
        assert req["account"] == ACCOUNT and req["call"] == "CA7" and req["auth"] == (ACCOUNT, TOKEN)
        assert "<Dial><Sip>sip:support@pbx.example.com</Sip></Dial>" in req["form"]["Twiml"][0]
        async with http.post(url, json={"target_uri": "tel:+15551234567"}, headers=AUTH) as resp:
            assert resp.status == 200
        assert "<Dial><Number>+15551234567</Number></Dial>" in twilio_api.requests[-1]["form"]["Twiml"][0]
        twilio_api.answer = (404, {"code": 20404, "message": "The requested resource was not found",
                                   "status": 404})
        async with http.post(url, json={"target_uri": "tel:+15551234567"}, headers=AUTH) as resp:
            body = await resp.json()
            assert resp.status == 409 and body["error"]["code"] == "transfer_refused", body
            assert "404" in body["error"]["message"] and "not found" in body["error"]["message"]
        for bad in ({"target_uri": "http://evil"}, {"target_uri": 5}, {}, [], "x" * 10):
            async with http.post(url, json=bad, headers=AUTH) as resp:
                assert resp.status == 400, bad
        async with http.post(url, data=b"{nope", headers=AUTH) as resp:
            assert resp.status == 400 and (await resp.json())["error"]["code"] == "invalid_body"
        assert len(twilio_api.requests) == 3 and not phone.closing  # nothing bad reached Twilio; the call goes on


async def test_a_twilio_api_that_cannot_be_reached_is_a_refusal_not_a_crash(sessions):
    srv = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(),
                 twilio=TwilioSettings(TOKEN, api_url="http://127.0.0.1:9"))  # nothing listens there
    await srv.listen()
    srv.attach(object())
    try:
        async with await call_of(srv), aiohttp.ClientSession() as http:
            await until(lambda: srv.calls)
            (phone,) = srv.calls.values()
            async with http.post(f"http://127.0.0.1:{srv.port}/v1/realtime/calls/{phone.id}/refer",
                                 json={"target_uri": "tel:+15551234567"}, headers=AUTH) as resp:
                body = await resp.json()
                assert resp.status == 409 and "cannot be reached" in body["error"]["message"], body
            assert not phone.closing
    finally:
        await srv.close()
