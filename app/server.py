"""The server, one port served by ``aiohttp``: ``/v1/realtime`` over WebSocket, and over HTTP the demo page,
WebRTC signalling (``/v1/realtime/calls``), client secrets, ``/healthz`` and ``/metrics`` (see
``app/transport/http.py``). This module owns the lifecycle (listen, attach the engines, close); the
gateway decides who gets in, the transports do the I/O, the session does the work."""

from __future__ import annotations

import errno
import logging
from typing import Any

from app import native_memory

from app.errors import Sub250Error
from app.gateway import Admission, ApiKeys, GatewayLimits, KeyLimiter

log = logging.getLogger(__name__)


class Server:
    def __init__(self, host: str, port: int, *, keys: ApiKeys | None = None,
                 limits: GatewayLimits | None = None, ice_hosts: list[str] | None = None) -> None:
        self.host, self.port = host, port
        self.keys = keys or ApiKeys([], allow_anonymous=True)
        self.limits = limits or GatewayLimits()
        self.limiter = KeyLimiter(self.limits)
        self.admission = Admission(self.keys, self.limits, bind_host=host)
        self.stack: Any = None
        self.shared: Any = None
        self.state = "starting"  # -> "ready" (attach) -> "failed" (fail: an engine died for good)
        self.failure: str | None = None
        self.calls: dict[str, Any] = {}  # open WebRTC calls by id
        self.ice_hosts = ice_hosts
        self._runner: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def health(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.state}
        if self.failure is not None:
            body["reason"] = self.failure
        if self.stack is not None and self.ready:
            body["profile"] = self.stack.profile.name
            body["allocator"] = native_memory.allocator()
            body["webrtc_calls"] = len(self.calls)
        return body

    def attach(self, stack: Any) -> None:
        """The engines are loaded: sessions may open (each takes the stack itself)."""
        self.stack = stack
        self.shared = stack
        self.state = "ready"

    def fail(self, reason: str) -> None:
        """An engine died for good: from now on ``/healthz`` answers 503 ``{"status": "failed", "reason"}``
        and new sessions and calls are refused (503 ``not_ready``); ``serve`` drains and exits."""
        self.state, self.failure = "failed", reason

    async def close_connections(self, code: int, reason: str) -> None:
        """Close every open realtime connection with ``code`` and hang up every WebRTC call; wait until done."""
        from app.transport.http import close_connections

        if self._runner is not None:
            await close_connections(self._runner.app, code, reason)

    async def listen(self) -> None:
        from aiohttp import web

        from app.transport.http import build_app, runner_options
        from app.transport.webrtc import configure_ice_hosts

        log.info("WebRTC ICE host candidates: %s", ", ".join(configure_ice_hosts(self.ice_hosts)) or "none")
        runner = web.AppRunner(build_app(self), **runner_options())
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except OSError as exc:
            await runner.cleanup()
            if exc.errno == errno.EADDRINUSE:
                raise Sub250Error(
                    f"port {self.port} on {self.host} is already in use",
                    f"stop the other program, or choose another port: SUB250_PORT={self.port + 1}",
                ) from None
            raise Sub250Error(f"cannot listen on {self.host}:{self.port}: {exc}") from None
        self._runner = runner
        addresses = runner.addresses
        if addresses:
            self.port = addresses[0][1]

    async def close(self) -> None:
        """Stop accepting, close open realtime connections (1001) and WebRTC calls, then stop."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
