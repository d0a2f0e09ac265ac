"""The HTTP/WebSocket front door (``websockets``): ``/v1/realtime`` (the voice API), ``/healthz``,
``/metrics`` (Prometheus). Thin I/O: the gateway decides, the session does the work."""

from __future__ import annotations

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
                 limits: GatewayLimits | None = None) -> None:
        self.host, self.port = host, port
        self.keys = keys or ApiKeys([], allow_anonymous=True)
        self.limits = limits or GatewayLimits()
        self.limiter = KeyLimiter(self.limits)
        self.stack: Any = None
        self.shared: Any = None
        self.state = "starting"
        self._server: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def attach(self, stack: Any) -> None:
        from app.session.session import Shared

        self.stack = stack
        self.shared = Shared(stack)
        self.state = "ready"

    async def listen(self) -> None:
        from websockets.asyncio.server import serve

        try:
            self._server = await serve(
                self._handler, self.host, self.port, process_request=self._http,
                select_subprotocol=self._select_subprotocol, max_size=self.limits.max_frame_bytes,
                ping_interval=20, ping_timeout=20, compression=None,
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

    def _origin_allowed(self, origin: str | None) -> bool:
        if origin is None or self.limits.origins is None:
            return True
        if "*" in self.limits.origins:
            return True
        return origin in self.limits.origins

    def _http(self, connection: Any, request: Any) -> Any:
        path = urlsplit(request.path).path
        if path == "/v1/realtime":
            return self._realtime_handshake(connection, request)
        if path == "/healthz":
            body = {"status": self.state}
            if self.stack is not None and self.state == "ready":
                body["profile"] = self.stack.profile.name
            code = http.HTTPStatus.OK if self.state == "ready" else http.HTTPStatus.SERVICE_UNAVAILABLE
            return self._json(connection, code, body)
        if path == "/metrics":
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

            resp = connection.respond(http.HTTPStatus.OK, generate_latest().decode())
            resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
            return resp
        return self._json(connection, http.HTTPStatus.NOT_FOUND, {"error": f"no such path: {path}"})

    def _realtime_handshake(self, connection: Any, request: Any) -> Any:
        if self.state != "ready":
            return self._error(connection, http.HTTPStatus.SERVICE_UNAVAILABLE, "not_ready",
                               "the server is still loading its engines; retry in a few seconds")
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return self._error(connection, http.HTTPStatus.UPGRADE_REQUIRED, "websocket_required",
                               "/v1/realtime is a WebSocket endpoint")
        if not self._origin_allowed(request.headers.get("Origin")):
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

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
