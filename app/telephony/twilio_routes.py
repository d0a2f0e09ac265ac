"""Twilio's two doors: the voice webhook and the media stream.

- ``POST /v1/telephony/twilio/voice``: the number's "A call comes in" webhook. Its ``X-Twilio-Signature`` is
  checked with the account's auth token (``twilio.request_validator``; an unsigned or wrongly signed request gets
  403), and the answer is TwiML built by the ``twilio`` package: ``<Connect><Stream url="wss://…/stream">`` with
  the call's stream token as a ``<Parameter>`` (app/telephony/stream_token.py).
- ``GET /v1/telephony/twilio/stream``: Twilio's WebSocket; the call runs in app/telephony/twilio_call.py once its
  ``start`` carries a valid token.

Both answer 404 ``telephony_off`` until ``SUB250_TWILIO_AUTH_TOKEN`` is set. The URL Twilio signs is the one it
called: behind a proxy that ends TLS set ``SUB250_PUBLIC_URL`` (``https://voice.example.com``), else the URL is
rebuilt from the request (``X-Forwarded-Proto`` and ``Host``). Phone calls count against one key, ``twilio``:
``SUB250_MAX_SESSIONS_PER_KEY`` is how many calls run at once.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from sub250.gateway import Principal
from sub250.metrics import prometheus
from sub250.telephony import stream_token
from sub250.telephony import twilio_messages as tw
from sub250.telephony.twilio_call import START_TIMEOUT_S, TwilioCall, bad_frame, messages
from sub250.transport.http import BACKEND, error_response, not_ready_response

log = logging.getLogger(__name__)

VOICE_PATH = "/v1/telephony/twilio/voice"
STREAM_PATH = "/v1/telephony/twilio/stream"
#: The principal every phone call runs as (its limits are one key's).
PHONE = Principal(key_id="twilio")


@dataclass(frozen=True)
class TwilioSettings:
    #: The Twilio account's auth token: checks the webhook's signature and keys the stream tokens.
    auth_token: str
    #: The server's public URL as Twilio calls it (``https://host``); empty: rebuilt from each request.
    public_url: str = ""
    #: Twilio's REST API, for transfers (app/telephony/twilio_rest.py); empty: https://api.twilio.com.
    api_url: str = ""

    @classmethod
    def of(cls, settings: Any) -> TwilioSettings | None:
        """From ``SUB250_TWILIO_AUTH_TOKEN``, ``SUB250_PUBLIC_URL`` and ``SUB250_TWILIO_API_URL``; None (off)
        without a token."""
        token = settings.twilio_auth_token.strip()
        return cls(token, settings.public_url.strip(), settings.twilio_api_url.strip()) if token else None


TWILIO: web.AppKey[TwilioSettings | None] = web.AppKey("twilio", TwilioSettings)


def add_routes(app: web.Application, settings: TwilioSettings | None) -> None:
    app[TWILIO] = settings
    app.router.add_post(VOICE_PATH, _voice)
    app.router.add_get(STREAM_PATH, _stream)


def _door(request: web.Request) -> tuple[TwilioSettings, Any] | web.Response:
    """(Twilio's settings, the server), or the answer when Twilio is off (404) or the server not ready (503)."""
    settings = request.app[TWILIO]
    if settings is None:
        return error_response(404, "telephony_off", "Twilio is not set up on this server: set SUB250_TWILIO_AUTH_TOKEN")
    backend = request.app[BACKEND]
    if not backend.ready:
        return not_ready_response(backend.health())
    return settings, backend


def public_base(request: web.Request, settings: TwilioSettings) -> str:
    if settings.public_url:
        return settings.public_url.rstrip("/")
    scheme = request.headers.get("X-Forwarded-Proto", request.scheme).split(",")[0].strip()
    return f"{scheme}://{request.host}"


def _refused(reason: str, status: int, code: str, message: str) -> web.Response:
    prometheus.TELEPHONY_REFUSED.labels(reason=reason).inc()
    log.warning("twilio webhook refused: %s", message)
    return error_response(status, code, message)


async def _voice(request: web.Request) -> web.Response:
    from twilio.request_validator import RequestValidator
    from twilio.twiml.voice_response import Connect, VoiceResponse

    door = _door(request)
    if isinstance(door, web.Response):
        return door
    settings, _ = door
    form = await request.post()
    params = {k: v for k, v in form.items() if isinstance(v, str)}
    base = public_base(request, settings)
    url = base + request.path_qs
    signature = request.headers.get("X-Twilio-Signature", "")
    if not signature or not RequestValidator(settings.auth_token).validate(url, params, signature):
        return _refused("signature", 403, "invalid_twilio_signature",
                        f"X-Twilio-Signature is {'wrong' if signature else 'missing'} for {url}")
    call_sid = params.get("CallSid", "")
    if not call_sid or len(call_sid) > tw.MAX_NAME_CHARS:
        return _refused("call_sid", 400, "missing_call_sid", "the webhook carries no CallSid")
    stream_url = ("wss" if base.startswith("https") else "ws") + base[base.index("://"):] + STREAM_PATH
    twiml = VoiceResponse()
    connect = Connect()
    stream = connect.stream(url=stream_url)
    stream.parameter(name=stream_token.PARAMETER, value=stream_token.mint(settings.auth_token, call_sid))
    twiml.append(connect)
    log.info("twilio call %s from the webhook: streaming to %s", call_sid, stream_url)
    return web.Response(text=str(twiml), content_type="text/xml")


async def _stream(request: web.Request) -> web.StreamResponse:
    door = _door(request)
    if isinstance(door, web.Response):
        return door
    settings, backend = door
    ws = web.WebSocketResponse(max_msg_size=backend.limits.max_frame_bytes, compress=False)
    await ws.prepare(request)
    why: str | None
    try:
        start = await asyncio.wait_for(_until_start(ws), START_TIMEOUT_S)
    except TimeoutError:
        start, why = None, f"no start within {START_TIMEOUT_S:.0f} s"
    else:
        why = "the socket closed before start" if start is None else _refusal(start, settings)
    if start is None or why is not None:
        prometheus.TELEPHONY_REFUSED.labels(reason="stream").inc()
        log.warning("twilio stream refused: %s", why)
        await ws.close(code=1008, message=(why or "")[:120].encode())
        return ws
    refusal = backend.limiter.open_session(PHONE.key_id)
    if refusal is not None:
        prometheus.TELEPHONY_REFUSED.labels(reason="sessions").inc()
        log.warning("twilio call %s refused: %s", start.call_sid, refusal.message)
        await ws.close(code=1008, message=refusal.code.encode())
        return ws
    try:
        call = TwilioCall(ws, start, PHONE, backend.shared, backend.limiter,
                          on_closed=lambda c: backend.calls.pop(c.id, None),
                          rest=(settings.auth_token, settings.api_url))
        backend.calls[call.id] = call
        if backend.call_webhook is not None:
            backend.call_webhook.announce(call, start.parameters.get("From", start.call_sid))
        await call.run()
    finally:
        backend.limiter.close_session(PHONE.key_id)
    return ws


async def _until_start(ws: web.WebSocketResponse) -> tw.Start | None:
    """Frames up to ``start`` (``connected`` first, as Twilio sends it); None if the socket closes first."""
    async with aclosing(messages(ws)) as stream:
        async for parsed, _ in stream:
            if isinstance(parsed, tw.Start):
                return parsed
            if not isinstance(parsed, tw.Connected):
                bad_frame(f"{type(parsed).__name__.lower()} before start")
    return None


def _refusal(start: tw.Start, settings: TwilioSettings) -> str | None:
    if start.encoding != tw.ENCODING or start.sample_rate != tw.SAMPLE_RATE or start.channels != 1:
        return f"media {start.encoding} {start.sample_rate} Hz x{start.channels}: {tw.ENCODING} 8000 Hz mono only"
    return stream_token.check(settings.auth_token, start.call_sid, start.parameters.get(stream_token.PARAMETER))
