"""The front door, one port: ``/v1/realtime`` over WebSocket (``websockets``), and over HTTP
(``aiohttp``) the demo page, WebRTC signalling (``/v1/realtime/calls``), client secrets, ``/healthz`` and
``/metrics``. Thin I/O: the gateway decides, the session does the work."""

from __future__ import annotations

import asyncio
import errno
import http
import json
import logging
from typing import Any
from urllib.parse import urlsplit

from app.errors import Sub250Error
from app.gateway import ApiKeys, GatewayLimits, KeyLimiter, extract_key
from app.gateway.auth import SUBPROTOCOL_PREFIX

log = logging.getLogger(__name__)


class Server:
    def __init__(self, host: str, port: int, *, keys: ApiKeys | None = None,
                 limits: GatewayLimits | None = None, ice_hosts: list[str] | None = None) -> None:
        self.host, self.port = host, port
        self.keys = keys or ApiKeys([], allow_anonymous=True)
        self.limits = limits or GatewayLimits()
        self.limiter = KeyLimiter(self.limits)
        self.stack: Any = None
        self.shared: Any = None
        self.state = "starting"
        self.calls: dict[str, Any] = {}  # open WebRTC calls by id
        self.ice_hosts = ice_hosts
        self._server: Any = None
        self._http_runner: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def attach(self, stack: Any) -> None:
        from app.session.session import Shared

        self.stack = stack
        self.shared = Shared(stack)
        self.state = "ready"

    async def listen(self) -> None:
        from aiohttp import web
        from websockets.asyncio.server import serve

        from app.transport.frontdoor import split_connection
        from app.transport.http import build_app
        from app.transport.webrtc import configure_ice_hosts

        log.info("WebRTC ICE host candidates: %s", ", ".join(configure_ice_hosts(self.ice_hosts)) or "none")

        self._http_runner = web.AppRunner(build_app(self), access_log=None, handle_signals=False)
        await self._http_runner.setup()
        try:
            self._server = await serve(
                self._handler, self.host, self.port, process_request=self._http,
                select_subprotocol=self._select_subprotocol, max_size=self.limits.max_frame_bytes,
                ping_interval=20, ping_timeout=20, compression=None,
                create_connection=split_connection(self._http_runner.server),
            )
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise Sub250Error(
                    f"port {self.port} on {self.host} is already in use",
                    f"stop the other program, or choose another port: SUB250_PORT={self.port + 1}",
                ) from None
            raise Sub250Error(f"cannot listen on {self.host}:{self.port}: {exc}") from None
        sockets = self._server.sockets
        if sockets:
            self.port = sockets[0].getsockname()[1]

    # --- handshake ---------------------------------------------------------------------------------

    def origin_allowed(self, origin: str | None, host: str | None = None) -> bool:
        """Clients without an Origin (SDKs) and the page this server serves itself are always allowed;
        other browser origins only when listed in SUB250_ORIGINS (``*``: any)."""
        if origin is None or self.limits.origins is None:
            return True
        if host and urlsplit(origin).netloc == host:
            return True  # same origin: our own demo page
        if "*" in self.limits.origins:
            return True
        return origin in self.limits.origins

    def _http(self, connection: Any, request: Any) -> Any:
        path = urlsplit(request.path).path
        if path == "/v1/realtime":
            return self._realtime_handshake(connection, request)
        return self._json(connection, http.HTTPStatus.NOT_FOUND,
                          {"error": {"type": "invalid_request_error", "code": "not_found",
                                     "message": f"no WebSocket endpoint at {path}; use /v1/realtime"}})

    def _realtime_handshake(self, connection: Any, request: Any) -> Any:
        if self.state != "ready":
            return self._error(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, "not_ready",
                               "the server is still loading its engines; retry in a few seconds")
        if not self.origin_allowed(request.headers.get("Origin"), request.headers.get("Host")):
            return self._error(connection, http.HTTPStatus.FORBIDDEN, "origin_not_allowed",
                               f"Origin {request.headers.get('Origin')!r} is not allowed (SUB250_ORIGINS)")
        key, _proto = extract_key(request.headers, request.path)
        principal = self.keys.authenticate(key)
        if principal is None:
            return self._error(connection, http.HTTPStatus.UNAUTHORIZED, "invalid_api_key",
                               "missing or invalid API key: send 'Authorization: Bearer <key>'")
        connection.sub250_principal = principal
        return None

    @staticmethod
    def _select_subprotocol(connection: Any, subprotocols: Any) -> str | None:
        if "realtime" in subprotocols:
            return "realtime"
        for proto in subprotocols:
            if proto.startswith(SUBPROTOCOL_PREFIX):
                return proto
        return None

    @staticmethod
    def _json(connection: Any, code: http.HTTPStatus, body: dict) -> Any:
        resp = connection.respond(code, json.dumps(body) + "\n")
        resp.headers["Content-Type"] = "application/json"
        return resp

    def _error(self, connection: Any, code: http.HTTPStatus, err_code: str, message: str) -> Any:
        return self._json(connection, code, {"error": {"type": "invalid_request_error", "code": err_code,
                                                       "message": message}})

    async def _handler(self, ws: Any) -> None:
        from app.transport.websocket import serve_realtime

        await serve_realtime(ws, ws.sub250_principal, self.shared, self.limiter)

    async def open_call(self, principal: Any, offer_sdp: str, *, model: str | None = None) -> Any:
        from app.transport.webrtc import open_call

        call = await open_call(principal, offer_sdp=offer_sdp, shared=self.shared, limiter=self.limiter,
                               model=model, on_closed=lambda c: self.calls.pop(c.id, None))
        self.calls[call.id] = call
        return call

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self.calls:
            await asyncio.gather(*(call.close("server shutting down") for call in list(self.calls.values())),
                                 return_exceptions=True)
        if self._http_runner is not None:
            await self._http_runner.cleanup()
