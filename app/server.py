"""The HTTP/WebSocket front door (``websockets``): health, Prometheus metrics, and (from the
voice-turn work) the realtime endpoint. Thin I/O around the stack."""

from __future__ import annotations

import errno
import http
import json
import logging
from typing import Any

from app.errors import Sub250Error

log = logging.getLogger(__name__)


class Server:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.stack: Any = None
        self.state = "starting"
        self._server: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def listen(self) -> None:
        from websockets.asyncio.server import serve

        try:
            self._server = await serve(self._handler, self.host, self.port, process_request=self._http)
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

    def _http(self, connection: Any, request: Any) -> Any:
        path = request.path.split("?", 1)[0]
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

    @staticmethod
    def _json(connection: Any, code: http.HTTPStatus, body: dict) -> Any:
        resp = connection.respond(code, json.dumps(body) + "\n")
        resp.headers["Content-Type"] = "application/json"
        return resp

    async def _handler(self, ws: Any) -> None:  # pragma: no cover - every path is answered over HTTP for now
        await ws.close(1008, "no WebSocket endpoint here")

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
