"""The front door: one ``aiohttp`` application serves the whole port.

- ``GET /v1/realtime`` (WebSocket upgrade): the realtime API (``websocket.py``);
- ``GET /`` and ``/web/*``: the demo page and its JavaScript client (static files, no build step);
- ``POST /v1/realtime/client_secrets``: a short-lived client secret for a page (auth: an API key);
- ``POST /v1/realtime/calls``: WebRTC signalling, SDP offer in, SDP answer out (auth: key or secret);
- ``POST /v1/realtime/calls/{id}/hangup`` and ``…/refer``: end or transfer a call (app/transport/call_routes.py);
- ``GET /healthz`` (liveness: 200 while the process serves, 503 once an engine died for good),
  ``GET /readyz`` (readiness: 200 only with the engines loaded and the server not draining),
  ``GET /metrics`` (Prometheus).

Every request passes the same checks, in the same order, whichever path it takes (see
``app/gateway/admission.py``): Host (403 ``host_not_allowed``), Origin (403 ``origin_not_allowed``), then
for the API: readiness (503 ``not_ready`` with ``Retry-After``) and the key (401 ``invalid_api_key``).
The WebSocket handshake's refusals are HTTP answers before the upgrade. Errors are JSON in the OpenAI
shape ``{"error": {"type", "code", "message"}}``, built by :func:`error_response` alone; an unexpected
exception answers 500 with an error id (the log has the details under that id), never its text.

Request heads are limited by aiohttp (:data:`MAX_LINE_BYTES` per line and header, :data:`MAX_HEADERS`
headers; over it aiohttp answers 400), bodies to :data:`MAX_BODY_BYTES` (413), and a connection that
sends no complete request within :data:`IDLE_TIMEOUT_S` is dropped.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from pathlib import Path
from typing import Any, Protocol

from aiohttp import BodyPartReader, web

from sub250.gateway import Admission, GatewayLimits, KeyLimiter, Principal, Refusal, select_subprotocol
from sub250.gateway.auth import TOKEN_TTL_S, TooManySecrets
from sub250.protocol import ProtocolError, load_json, new_id
from sub250.protocol.fields import MAX_NAME_CHARS
from sub250.telephony import control
from sub250.transport.websocket import REALTIME_PATH, WebSocketTransport, serve_realtime, websocket_response

log = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parents[2] / "web"
#: Largest request body accepted (an SDP offer is a few KB).
MAX_BODY_BYTES = 64 * 1024
#: Request head limits handed to aiohttp's parser (request line, each header; number of headers).
MAX_LINE_BYTES = 8190
MAX_HEADERS = 128
#: A connection without a complete request for this long is closed (aiohttp's keep-alive timer, which
#: also runs before the first request).
IDLE_TIMEOUT_S = 15.0
#: On shutdown, how long open handlers get before they are cancelled.
SHUTDOWN_TIMEOUT_S = 5.0
#: Seconds a client is asked to wait when the engines are still loading.
RETRY_AFTER_S = 5


class Backend(Protocol):
    """What the front door needs from the server (``app.server.Server`` is one)."""

    admission: Admission
    limits: GatewayLimits
    limiter: KeyLimiter
    #: Open WebRTC calls by id.
    calls: dict[str, Any]
    #: Handed unopened to each session (``RealtimeSession(shared, ...)``).
    shared: Any

    #: This server's name in a fleet ("" if none): the ``X-Sub250-Replica`` header of every answer.
    replica: str

    @property
    def ready(self) -> bool: ...

    @property
    def live(self) -> bool: ...

    def health(self) -> dict[str, Any]: ...


BACKEND: web.AppKey[Backend] = web.AppKey("backend", Backend)
SOCKETS: web.AppKey[set[WebSocketTransport]] = web.AppKey("sockets", set)


def error_response(status: int, code: str, message: str, type: str = "invalid_request_error",
                   headers: dict[str, str] | None = None) -> web.Response:
    """The one JSON error answer: ``{"error": {"type", "code", "message"}}``."""
    body = {"error": {"type": type, "code": code, "message": message}}
    return web.json_response(body, status=status, headers=headers)


def refusal_response(refusal: Refusal) -> web.Response:
    return error_response(refusal.http_status, refusal.code, refusal.message, refusal.type)


def not_ready_response(health: dict[str, Any] | None = None) -> web.Response:
    """The one "not ready" answer: engines still loading, or (``health["status"] == "failed"``) one of them died
    and the server is going down for its supervisor to restart it."""
    if health is not None and health.get("status") == "failed":
        message = f"the server is restarting ({health.get('reason', 'an engine failed')}); retry in a few seconds"
    elif health is not None and health.get("status") == "draining":
        message = "the server is shutting down; connect again (a load balancer sends you to another server)"
    else:
        message = "the server is still loading its engines; retry in a few seconds"
    return error_response(503, "not_ready", message, "server_error", headers={"Retry-After": str(RETRY_AFTER_S)})


def runner_options() -> dict[str, Any]:
    """Keyword arguments for ``web.AppRunner`` (request head limits, idle timeout, no access log)."""
    return {"access_log": None, "handle_signals": False, "max_line_size": MAX_LINE_BYTES,
            "max_field_size": MAX_LINE_BYTES, "max_headers": MAX_HEADERS, "keepalive_timeout": IDLE_TIMEOUT_S,
            "shutdown_timeout": SHUTDOWN_TIMEOUT_S}


def build_app(backend: Backend) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_front_door])
    app[BACKEND] = backend
    app[SOCKETS] = set()
    app.router.add_get("/", _index)
    if WEB_DIR.is_dir():
        app.router.add_static("/web/", WEB_DIR, show_index=False, follow_symlinks=False)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get(REALTIME_PATH, _realtime)
    app.router.add_post("/v1/realtime/client_secrets", _client_secrets)
    app.router.add_post("/v1/realtime/calls", _create_call)
    app.on_shutdown.append(_close_everything)
    if backend.replica:
        app.on_response_prepare.append(_name_replica)
    return app


async def _name_replica(request: web.Request, response: web.StreamResponse) -> None:
    """Which server answered (behind a load balancer): every answer, the WebSocket's 101 included."""
    response.headers["X-Sub250-Replica"] = request.app[BACKEND].replica


@web.middleware
async def _front_door(request: web.Request, handler: Any) -> web.StreamResponse:
    backend = request.app[BACKEND]
    refusal = backend.admission.check_request(request.headers)
    if refusal is not None:
        return refusal_response(refusal)  # no CORS headers: the page must not read it
    origin = request.headers.get("Origin")
    cors = {"Access-Control-Allow-Origin": origin, "Vary": "Origin",
            "Access-Control-Expose-Headers": "Location"} if origin else {}
    if request.method == "OPTIONS" and origin:
        return web.Response(status=204, headers={
            **cors, "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
            "Access-Control-Allow-Headers": "Authorization, Content-Type", "Access-Control-Max-Age": "600"})
    try:
        resp = await handler(request)
    except _Refused as refused:
        resp = refused.response
    except web.HTTPRequestEntityTooLarge:
        resp = error_response(413, "body_too_large", f"the request body is over {MAX_BODY_BYTES} bytes")
    except web.HTTPNotFound:
        resp = error_response(404, "not_found", f"no such path: {request.path}")
    except web.HTTPMethodNotAllowed as exc:
        resp = error_response(405, "method_not_allowed", f"{request.method} is not allowed on {request.path} "
                                                         f"(use {', '.join(sorted(exc.allowed_methods))})")
    except web.HTTPException:
        raise
    except Exception:  # a bug answers 500 with an id to quote, not a dropped connection nor its text
        error_id = new_id("err")
        log.exception("[%s] HTTP %s %s failed", error_id, request.method, request.path)
        resp = error_response(500, "server_error", f"internal error (id {error_id}); the server log has the details",
                              "server_error")
    if not resp.prepared:  # a WebSocket's headers are gone with its 101
        resp.headers.update(cors)
    return resp


class _Refused(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


def admit(request: web.Request, *, allow_client_secret: bool = True) -> Principal:
    """The caller's principal (Host and Origin have passed already), or :class:`_Refused`: not ready, or
    no valid key. The same for the WebSocket handshake and the HTTP endpoints."""
    backend = request.app[BACKEND]
    if not backend.ready:
        raise _Refused(not_ready_response(backend.health()))
    verdict = backend.admission.authenticate(request.headers, request.query, allow_client_secret=allow_client_secret)
    if isinstance(verdict, Refusal):
        raise _Refused(refusal_response(verdict))
    return verdict


def _model(request: web.Request) -> str | None:
    """``?model=`` (URL-decoded by aiohttp), bounded like every name of the protocol."""
    model = request.query.get("model") or None
    if model is not None and len(model) > MAX_NAME_CHARS:
        raise _Refused(error_response(400, "invalid_value", f"'model' is at most {MAX_NAME_CHARS} characters"))
    return model


# --- the realtime WebSocket ----------------------------------------------------------------------------


async def _realtime(request: web.Request) -> web.StreamResponse:
    backend = request.app[BACKEND]
    ws = websocket_response(select_subprotocol(request.headers), backend.limits)
    if not ws.can_prepare(request).ok:
        return error_response(426, "websocket_required", f"{REALTIME_PATH} is a WebSocket endpoint",
                              headers={"Upgrade": "websocket"})
    call_id = request.query.get("call_id")
    principal, model = admit(request, allow_client_secret=call_id is None), _model(request)
    session_for = None
    if call_id is not None:  # an app following a phone call (app/telephony/control.py)
        call = backend.calls.get(call_id)
        if not control.controllable(call):
            return error_response(404, "call_not_found", f"no open phone call {call_id[:MAX_NAME_CHARS]!r}")
        session_for = functools.partial(control.CallControl, call)
    await ws.prepare(request)
    sockets = request.app[SOCKETS]
    await serve_realtime(ws, principal, backend.shared, backend.limiter, model=model,
                         max_outbox_bytes=backend.limits.max_outbox_bytes,
                         on_open=sockets.add, on_closed=sockets.discard,
                         abort=request.transport.abort if request.transport is not None else None,
                         session_for=session_for, label="websocket" if call_id is None else "control")
    return ws


async def close_connections(app: web.Application, code: int, reason: str) -> None:
    """Close every open realtime connection with ``code`` and hang up every WebRTC call; wait until done."""
    open_now: set[WebSocketTransport] = app[SOCKETS]
    sockets = list(open_now)
    for transport in sockets:
        transport.close_soon(code, reason)
    calls = list(app[BACKEND].calls.values())
    results = await asyncio.gather(*(t.closed() for t in sockets), *(call.close(reason) for call in calls),
                                   return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            log.warning("a connection did not close cleanly: %r", result)


def close_idle_connections(app: web.Application, code: int, reason: str) -> tuple[int, int]:
    """Draining: close (``code``) every realtime connection and WebRTC call with nothing in flight (no turn being
    spoken, transcribed or answered; everything sent). Returns (closed now, still busy); those already closing
    count as neither."""
    closed = busy = 0
    open_now: set[WebSocketTransport] = app[SOCKETS]
    for transport in list(open_now):
        if transport.closing:
            continue
        if transport.idle:
            transport.close_soon(code, reason)
            closed += 1
        else:
            busy += 1
    for call in list(app[BACKEND].calls.values()):
        if call.closing:
            continue
        if call.idle:
            call.close_soon(reason)
            closed += 1
        else:
            busy += 1
    return closed, busy


async def _close_everything(app: web.Application) -> None:
    """Shutdown: open realtime connections are closed (1001), then open WebRTC calls."""
    await close_connections(app, 1001, "server shutting down")


# --- plain HTTP ----------------------------------------------------------------------------------------


async def _index(request: web.Request) -> web.StreamResponse:
    page = WEB_DIR / "index.html"
    if not page.is_file():
        return error_response(404, "not_found", f"the demo page is missing: {page}")
    return web.FileResponse(page, headers={"Cache-Control": "no-cache"})


async def _healthz(request: web.Request) -> web.Response:
    """Liveness: is the process serving? (A supervisor restarts it on 503; loading and draining are alive.)"""
    backend = request.app[BACKEND]
    return web.json_response(backend.health(), status=200 if backend.live else 503)


async def _readyz(request: web.Request) -> web.Response:
    """Readiness: may a new session open here? (A load balancer routes by it.)"""
    backend = request.app[BACKEND]
    return web.json_response(backend.health(), status=200 if backend.ready else 503,
                             headers={"Cache-Control": "no-store"})


async def _metrics(request: web.Request) -> web.Response:
    from prometheus_client import CONTENT_TYPE_LATEST

    from sub250.metrics.prometheus import exposition

    return web.Response(body=exposition(request.app[BACKEND].replica), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _client_secrets(request: web.Request) -> web.Response:
    """A client secret; with a ``session`` object in the body (the GA API's), every session the secret opens
    starts with it (validated here: a bad field is a 400 naming it), and the answer echoes it as configured."""
    from sub250.protocol.session_config import SessionConfig

    principal = admit(request, allow_client_secret=False)  # a secret must not extend itself
    ttl = TOKEN_TTL_S
    session: dict[str, Any] | None = None
    echoed: dict[str, Any] | None = None
    if request.can_read_body:
        example = 'expected JSON like {"expires_after": {"seconds": 600}, "session": {"type": "realtime", ...}}'
        raw = await request.read()
        try:
            body = load_json(raw) if raw.strip() else {}  # the protocol's bounded decoder: depth, numbers, UTF-8
        except ProtocolError as err:
            return error_response(400, "invalid_body", f"{err.message}; {example}")
        expires = body.get("expires_after") if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(expires, (dict, type(None))):
            return error_response(400, "invalid_body", example)
        seconds = (expires or {}).get("seconds", ttl)
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            return error_response(400, "invalid_body", f"expires_after.seconds must be an integer; {example}")
        ttl = seconds
        if body.get("session") is not None:
            session = body["session"]
            try:
                echoed = SessionConfig().updated(session).to_wire()
            except ProtocolError as err:
                return error_response(400, err.code, err.message)
    try:
        token, expires_at = request.app[BACKEND].admission.keys.mint(principal, ttl, session=session)
    except TooManySecrets as exc:
        return error_response(429, "too_many_client_secrets", str(exc), "rate_limit_error")
    except ValueError as exc:
        return error_response(400, "invalid_expires_after", str(exc))
    answer: dict[str, Any] = {"value": token, "expires_at": expires_at}
    if echoed is not None:
        answer["session"] = echoed
    return web.json_response(answer)


async def _create_call(request: web.Request) -> web.Response:
    from sub250.transport.webrtc import open_call  # aiortc loads only when a call comes

    principal, model = admit(request), _model(request)
    session: dict[str, Any] | None = None
    if request.content_type == "multipart/form-data":  # the openai client's calls.create(sdp=..., session=...)
        try:
            offer, session = await _multipart_offer(request)
        except ProtocolError as err:
            return error_response(400, err.code, err.message)
    elif request.content_type == "application/sdp":
        try:
            offer = (await request.read()).decode("utf-8")
        except UnicodeDecodeError:
            return error_response(400, "invalid_sdp", "the SDP offer is not UTF-8 text")
    else:
        return error_response(415, "unsupported_media_type",
                              f"send the SDP offer as the body with 'Content-Type: application/sdp', or as the "
                              f"'sdp' part of multipart/form-data (got {request.content_type!r})")
    if "m=" not in offer:
        return error_response(400, "invalid_sdp", "the body is not an SDP offer (no media section)")
    backend = request.app[BACKEND]
    calls = backend.calls
    try:
        call = await open_call(principal, backend.shared, backend.limiter, offer, model=model,
                               on_closed=lambda c: calls.pop(c.id, None),
                               max_outbox_bytes=backend.limits.max_outbox_bytes, session=session)
    except ProtocolError as err:
        status = getattr(err, "http_status", 400)
        return error_response(status, err.code, err.message, err.type)
    calls[call.id] = call
    return web.Response(status=201, text=call.answer_sdp, content_type="application/sdp",
                        headers={"Location": f"/v1/realtime/calls/{call.id}"})


#: The parts of a multipart call offer, each at most this many bytes.
MAX_OFFER_PART_BYTES = 256 * 1024


async def _multipart_offer(request: web.Request) -> tuple[str, dict[str, Any] | None]:
    """(SDP offer, session object or None) from a multipart/form-data body: parts ``sdp`` (required) and
    ``session`` (JSON, optional; the protocol's bounded decoder); other parts are ignored."""
    try:
        reader = await request.multipart()
        sdp: str | None = None
        session: Any = None
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader) or part.name not in ("sdp", "session"):
                continue
            raw = bytearray()
            while chunk := await part.read_chunk(64 * 1024):  # bounded as it is read, never whole first
                raw += chunk
                if len(raw) > MAX_OFFER_PART_BYTES:
                    raise ProtocolError("invalid_body", f"the '{part.name}' part is over {MAX_OFFER_PART_BYTES} bytes")
            if part.name == "sdp":
                try:
                    sdp = bytes(raw).decode("utf-8")
                except UnicodeDecodeError:
                    raise ProtocolError("invalid_sdp", "the SDP offer is not UTF-8 text") from None
            else:
                session = load_json(bytes(raw))
    except (ValueError, AssertionError, web.HTTPException):  # a body that is not multipart after all
        raise ProtocolError("invalid_body", "the multipart body cannot be read") from None
    if sdp is None:
        raise ProtocolError("invalid_sdp", "the multipart body has no 'sdp' part")
    if session is not None and not isinstance(session, dict):
        raise ProtocolError("invalid_value", "the 'session' part must be a JSON object")
    return sdp, session
