"""The server, one port served by ``aiohttp``: ``/v1/realtime`` over WebSocket, and over HTTP the demo page,
WebRTC signalling (``/v1/realtime/calls``), client secrets, ``/healthz`` and ``/metrics`` (see
``app/transport/http.py``). This module owns the lifecycle (listen, attach the engines, close); the
gateway decides who gets in, the transports do the I/O, the session does the work."""

from __future__ import annotations

import asyncio
import errno
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sub250 import native_memory
from sub250.errors import Sub250Error
from sub250.gateway import Admission, ApiKeys, GatewayLimits, KeyLimiter

if TYPE_CHECKING:
    from sub250.telephony.call_webhook import CallWebhook
    from sub250.telephony.sip_agent import SipSettings
    from sub250.telephony.twilio_routes import TwilioSettings

log = logging.getLogger(__name__)

#: Draining: the close code of every connection (RFC 6455 1001 "going away": connect again, elsewhere).
DRAIN_CLOSE_CODE = 1001
DRAIN_REASON = "server shutting down"
#: Draining: how often the open connections are looked at (one with nothing in flight is closed then).
DRAIN_POLL_S = 0.05


@dataclass
class DrainReport:
    """What a drain did: connections closed once idle, connections closed with a turn still in flight."""

    closed_idle: int = 0
    cut_short: int = 0
    seconds: float = 0.0


class Server:
    def __init__(self, host: str, port: int, *, keys: ApiKeys | None = None,
                 limits: GatewayLimits | None = None, ice_hosts: list[str] | None = None,
                 replica: str = "", twilio: TwilioSettings | None = None, sip: SipSettings | None = None,
                 call_webhook: CallWebhook | None = None) -> None:
        """``replica``: this server's name in a fleet (``/healthz`` and the ``X-Sub250-Replica`` header of every
        answer say it); empty: none is given."""
        self.host, self.port = host, port
        self.replica = replica
        self.keys = keys or ApiKeys([], allow_anonymous=True)
        self.limits = limits or GatewayLimits()
        self.limiter = KeyLimiter(self.limits)
        self.admission = Admission(self.keys, self.limits, bind_host=host)
        self.stack: Any = None
        self.shared: Any = None
        #: "starting" -> "ready" (attach) -> "draining" (drain: SIGTERM) or "failed" (fail: an engine died for good)
        self.state = "starting"
        self.failure: str | None = None
        self.calls: dict[str, Any] = {}  # open WebRTC calls by id
        self.ice_hosts = ice_hosts
        #: Phone calls through Twilio (app/telephony); None: off (its routes answer 404).
        self.twilio = twilio
        #: SIP calls (app/telephony/sip_call.py); None: off.
        self.sip_settings = sip
        #: Where each phone call that comes in is announced (app/telephony/call_webhook.py); None: nowhere.
        self.call_webhook = call_webhook
        self.sip: Any = None
        self._runner: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ready(self) -> bool:
        """Sessions may open: ``/readyz`` answers 200 (a load balancer sends callers here)."""
        return self.state == "ready"

    @property
    def live(self) -> bool:
        """The process serves (loading, ready or draining): ``/healthz`` answers 200; 503 once an engine died."""
        return self.state != "failed"

    def health(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.state}
        if self.replica:
            body["replica"] = self.replica
        if self.failure is not None:
            body["reason"] = self.failure
        if self.stack is not None and self.state in ("ready", "draining"):
            body["profile"] = self.stack.profile.name
            body["allocator"] = native_memory.allocator()
            body["webrtc_calls"] = len(self.calls)
        return body

    def attach(self, stack: Any) -> None:
        """The engines are loaded: sessions may open (each takes the stack itself)."""
        self.stack = stack
        self.shared = stack
        if self.state == "starting":  # not after a SIGTERM that came while the engines loaded
            self.state = "ready"

    def fail(self, reason: str) -> None:
        """An engine died for good: from now on ``/healthz`` answers 503 ``{"status": "failed", "reason"}``
        and new sessions and calls are refused (503 ``not_ready``); ``serve`` drains and exits."""
        self.state, self.failure = "failed", reason

    def stop_accepting(self) -> None:
        """From now on ``/readyz`` answers 503 and new sessions and calls are refused (``not_ready``)."""
        if self.state in ("starting", "ready"):
            self.state = "draining"

    async def drain(self, timeout_s: float, hurry: asyncio.Event | None = None) -> DrainReport:
        """Stop taking sessions (``/readyz`` 503 from now on, newcomers ``not_ready``), let the turns in flight
        finish, and close each connection with 1001 as soon as nothing of it is in flight; whatever is still busy
        after ``timeout_s`` (or once ``hurry`` is set: a second signal) is closed then, also with 1001."""
        self.stop_accepting()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        deadline = t0 + max(0.0, timeout_s)
        report = DrainReport()
        if self._runner is None:
            return report
        from sub250.transport.http import close_connections, close_idle_connections

        while True:
            closed, busy = close_idle_connections(self._runner.app, DRAIN_CLOSE_CODE, DRAIN_REASON)
            report.closed_idle += closed
            if not busy or loop.time() >= deadline or (hurry is not None and hurry.is_set()):
                break
            await asyncio.sleep(DRAIN_POLL_S)
        report.cut_short = busy
        await close_connections(self._runner.app, DRAIN_CLOSE_CODE, DRAIN_REASON)
        report.seconds = loop.time() - t0
        if busy:
            log.warning("drain: %d connection(s) still had a turn in flight after %.1f s; closed with %d",
                        busy, report.seconds, DRAIN_CLOSE_CODE)
        return report

    async def close_connections(self, code: int, reason: str) -> None:
        """Close every open realtime connection with ``code`` and hang up every WebRTC call; wait until done."""
        from sub250.transport.http import close_connections

        if self._runner is not None:
            await close_connections(self._runner.app, code, reason)

    async def listen(self) -> None:
        from aiohttp import web

        from sub250.telephony import twilio_routes
        from sub250.transport import call_routes
        from sub250.transport.http import build_app, runner_options
        from sub250.transport.webrtc import configure_ice_hosts

        log.info("WebRTC ICE host candidates: %s", ", ".join(configure_ice_hosts(self.ice_hosts)) or "none")
        app = build_app(self)
        call_routes.add_routes(app)
        twilio_routes.add_routes(app, self.twilio)
        runner = web.AppRunner(app, **runner_options())
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
        if self.sip_settings is not None:
            from sub250.telephony.sip_call import SipService

            self.sip = SipService(self.sip_settings, self)
            try:
                await self.sip.start()
            except Exception as exc:
                await runner.cleanup()
                self._runner = None
                raise Sub250Error(f"SIP cannot listen on {self.sip_settings.host}:{self.sip_settings.port}: {exc}",
                                  "choose another SUB250_SIP_LISTEN, or leave it empty") from None

    async def close(self) -> None:
        """Stop accepting, close open realtime connections (1001) and WebRTC calls, then stop."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self.sip is not None:
            sip, self.sip = self.sip, None
            await sip.stop()
