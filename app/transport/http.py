"""Plain HTTP endpoints (``aiohttp``), on the same port as the WebSocket API (see ``frontdoor.py``):

- ``GET /`` and ``/web/*``: the demo page and its JavaScript client (static files, no build step);
- ``POST /v1/realtime/client_secrets``: a short-lived client secret for a page (auth: API key);
- ``POST /v1/realtime/calls``: WebRTC signalling, SDP offer in, SDP answer out (auth: key or secret);
- ``POST /v1/realtime/calls/{id}/hangup``: end a WebRTC call;
- ``GET /healthz``, ``GET /metrics`` (Prometheus).

Errors are JSON in the OpenAI shape: ``{"error": {"type", "code", "message"}}``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from app.gateway.auth import TOKEN_TTL_S
from app.protocol import ProtocolError

if TYPE_CHECKING:
    from app.server import Server

log = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parents[2] / "web"
SERVER: web.AppKey[Any] = web.AppKey("server")
#: Largest request body accepted (an SDP offer is a few KB).
MAX_BODY_BYTES = 64 * 1024


def error_response(status: int, code: str, message: str, type: str = "invalid_request_error",
                   headers: dict[str, str] | None = None) -> web.Response:
    body = {"error": {"type": type, "code": code, "message": message}}
    return web.json_response(body, status=status, headers=headers)


def build_app(server: "Server") -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_errors(server)])
    app[SERVER] = server
    app.router.add_get("/", _index)
    if WEB_DIR.is_dir():
        app.router.add_static("/web/", WEB_DIR, show_index=False, follow_symlinks=False)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/v1/realtime", _realtime_needs_upgrade)
    app.router.add_post("/v1/realtime/client_secrets", _client_secrets)
    app.router.add_post("/v1/realtime/calls", _create_call)
    app.router.add_post("/v1/realtime/calls/{call_id}/hangup", _hangup)
    return app


def _errors(server: "Server") -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and not server.origin_allowed(origin, request.host):
            return error_response(403, "origin_not_allowed",
                                  f"Origin {origin!r} is not allowed (SUB250_ORIGINS)")
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
            resp = error_response(405, "method_not_allowed",
                                  f"{request.method} is not allowed on {request.path} (use {', '.join(exc.allowed_methods)})")
        except web.HTTPException:
            raise
        except Exception as exc:  # a bug must answer 500 with a message, not a dropped connection
            log.exception("HTTP %s %s failed", request.method, request.path)
            resp = error_response(500, "server_error", f"internal error: {exc}", "server_error")
        resp.headers.update(cors)
        return resp

    return middleware


def _auth(request: web.Request) -> Any:
    """The caller's principal, or :class:`_Refused` (answered by the middleware) when not ready or not allowed."""
    server: Server = request.app[SERVER]
    if server.state != "ready":
        raise _Refused(error_response(503, "not_ready", "the server is still loading its engines; retry shortly",
                                      "server_error", headers={"Retry-After": "5"}))
    header = request.headers.get("Authorization", "")
    key = header[7:].strip() if header.lower().startswith("bearer ") else None
    principal = server.keys.authenticate(key)
    if principal is None:
        raise _Refused(error_response(401, "invalid_api_key",
                                      "missing, invalid or expired key: send 'Authorization: Bearer <key>'"))
    return principal


class _Refused(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


async def _index(request: web.Request) -> web.StreamResponse:
    page = WEB_DIR / "index.html"
    if not page.is_file():
        return error_response(404, "not_found", f"the demo page is missing: {page}")
    return web.FileResponse(page, headers={"Cache-Control": "no-cache"})


async def _healthz(request: web.Request) -> web.Response:
    server: Server = request.app[SERVER]
    body: dict[str, Any] = {"status": server.state}
    if server.stack is not None and server.state == "ready":
        body["profile"] = server.stack.profile.name
        body["webrtc_calls"] = len(server.calls)
    return web.json_response(body, status=200 if server.state == "ready" else 503)


async def _metrics(request: web.Request) -> web.Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _realtime_needs_upgrade(request: web.Request) -> web.Response:
    return error_response(426, "websocket_required", "/v1/realtime is a WebSocket endpoint",
                          headers={"Upgrade": "websocket"})


async def _client_secrets(request: web.Request) -> web.Response:
    principal = _auth(request)
    ttl = TOKEN_TTL_S
    if request.can_read_body:
        try:
            body = await request.json()
            seconds = ((body or {}).get("expires_after") or {}).get("seconds", ttl)
            if not isinstance(seconds, int) or isinstance(seconds, bool):
                raise ValueError("expires_after.seconds must be an integer")
            ttl = seconds
        except (json.JSONDecodeError, AttributeError, ValueError) as exc:
            return error_response(400, "invalid_body", f"expected JSON like {{\"expires_after\": {{\"seconds\": 600}}}}: {exc}")
    server: Server = request.app[SERVER]
    try:
        token, expires_at = server.keys.mint(principal, ttl)
    except ValueError as exc:
        return error_response(400, "invalid_expires_after", str(exc))
    return web.json_response({"value": token, "expires_at": expires_at})


async def _create_call(request: web.Request) -> web.Response:
    principal = _auth(request)
    if request.content_type != "application/sdp":
        return error_response(415, "unsupported_media_type",
                              f"send the SDP offer as the body with 'Content-Type: application/sdp' "
                              f"(got {request.content_type!r})")
    offer = await request.text()
    if "m=" not in offer:
        return error_response(400, "invalid_sdp", "the body is not an SDP offer (no media section)")
    server: Server = request.app[SERVER]
    try:
        call = await server.open_call(principal, offer, model=request.query.get("model"))
    except ProtocolError as err:
        status = getattr(err, "http_status", 400)
        return error_response(status, err.code, err.message, err.type)
    return web.Response(status=201, text=call.answer_sdp, content_type="application/sdp",
                        headers={"Location": f"/v1/realtime/calls/{call.id}"})


async def _hangup(request: web.Request) -> web.Response:
    principal = _auth(request)
    server: Server = request.app[SERVER]
    call = server.calls.get(request.match_info["call_id"])
    if call is None or call.principal.key_id != principal.key_id:
        return error_response(404, "call_not_found", f"no open call {request.match_info['call_id']!r}")
    await call.close("hung up by the client")
    return web.Response(status=200)
