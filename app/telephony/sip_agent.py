"""The server's SIP user agent, on PJSIP (``pjsua2``, a real SIP stack): it answers INVITEs, one call a session.

PJSIP does the SIP (UDP and TCP, INVITE / CANCEL / BYE, re-INVITE hold), the SDP, the RTP with G.711 μ-law and
A-law, and RFC 4733 keys. It runs on a thread of its own (:class:`SipAgent`): every ``pjsua2`` call is made on it
(:meth:`SipAgent.post`), its callbacks come on it, and the media clock calls the audio ports from its own
thread - each hands what it has to the event loop (``call_soon_threadsafe``), never the other way round.

Who may call: INVITEs from addresses outside ``SUB250_SIP_ALLOW`` (a trunk's or a PBX's addresses, networks
allowed) are refused ``403 Forbidden`` before anything opens; over ``SUB250_MAX_SESSIONS_PER_KEY`` calls at once
(the key ``sip``), ``486 Busy Here``. An admitted call rings, gets its session (app/telephony/sip_call.py) and
is answered ``200 OK``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sub250.errors import Sub250Error

log = logging.getLogger(__name__)

#: The conference bridge's rate: G.711's own, so nothing is resampled between the codec and the session's
#: rates path (which feeds VAD and Whisper at 16 kHz and resamples the reply down).
CLOCK_RATE = 8000
FRAME_MS = 20
FRAME_BYTES = CLOCK_RATE * FRAME_MS // 1000 * 2  # PCM16
#: How long one pass of the SIP thread waits for network events before it looks at the posted work.
POLL_MS = 10
#: How long an ended call's objects are kept before they are freed (see :meth:`SipAgent.forget`).
LINGER_S = 0.5


@dataclass(frozen=True)
class SipSettings:
    #: Where the agent listens (UDP and TCP), ``host:port``; port 0: any free port (tests).
    host: str = "127.0.0.1"
    port: int = 5060
    #: Addresses and networks whose INVITEs are answered.
    allow: tuple[str, ...] = ("127.0.0.1",)
    #: The address put into SDP for RTP (empty: ``host``); behind NAT, the public one.
    media_address: str = ""
    #: PJSIP's own log level on the server's log (0: none, 3: its info).
    log_level: int = 1
    networks: tuple[Any, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        nets = []
        for entry in self.allow:
            try:
                nets.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                raise Sub250Error(f"SUB250_SIP_ALLOW: {entry!r} is not an address or a network",
                                  "list addresses and networks, comma-separated: 127.0.0.1,203.0.113.0/24") from None
        object.__setattr__(self, "networks", tuple(nets))

    @classmethod
    def of(cls, settings: Any) -> SipSettings | None:
        """From ``SUB250_SIP_LISTEN`` (``host:port``; empty: off) and ``SUB250_SIP_ALLOW``."""
        listen = settings.sip_listen.strip()
        if not listen:
            return None
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit():
            raise Sub250Error(f"SUB250_SIP_LISTEN={listen!r} is not host:port", "e.g. SUB250_SIP_LISTEN=0.0.0.0:5060")
        allow = tuple(a.strip() for a in settings.sip_allow.split(",") if a.strip())
        return cls(host=host, port=int(port), allow=allow)

    def allowed(self, source: str) -> bool:
        """``source``: ``ip:port`` as PJSIP gives it (``[v6]:port`` for IPv6)."""
        host = source.rsplit(":", 1)[0].strip("[]")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in net for net in self.networks)


class SipAgent:
    """PJSIP on its thread. ``on_invite(invite)`` runs on the event loop for each admitted INVITE (an
    :class:`Invite`); it answers or refuses it."""

    def __init__(self, settings: SipSettings, on_invite: Callable[[Invite], None]) -> None:
        self.settings, self.on_invite = settings, on_invite
        self.port = settings.port
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._ready: asyncio.Future[int] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        #: The pjsua2 calls by key: their only holder (see sip_pj.Account.onIncomingCall); SIP thread only.
        self._calls: dict[int, Any] = {}
        self._dying: deque[tuple[float, Any]] = deque()  # (when to free, a call that ended)

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._ready = self.loop.create_future()
        self._thread = threading.Thread(target=self._run, name="sub250-sip", daemon=True)
        self._thread.start()
        self.port = await self._ready

    def post(self, work: Callable[[], None]) -> None:
        """Run ``work`` on the SIP thread (every ``pjsua2`` call must)."""
        self._work.put(work)

    async def stop(self) -> None:
        if self._thread is not None:
            self._work.put(None)
            await asyncio.to_thread(self._thread.join, 10)
            self._thread = None

    def on_call(self, key: int, action: str, *args: Any) -> None:
        """On the SIP thread: ``action`` (``accept``, ``refuse``, ``bye``) on the call ``key``, if it is still there."""
        call = self._calls.get(key)
        if call is not None:
            getattr(call, action)(*args)

    def forget(self, key: int) -> None:
        """On the SIP thread, after the call's last callback: its Python objects go - :data:`LINGER_S` later,
        once the media clock has surely stopped calling its audio port (a port freed under a frame in flight
        crashes the process)."""
        call = self._calls.pop(key, None)
        if call is not None:
            call.session_call = None
            if call.port is not None:
                call.port.session_call = None
            self._dying.append((time.monotonic() + LINGER_S, call))

    def _bury(self, everything: bool = False) -> None:
        now = time.monotonic()
        while self._dying and (everything or self._dying[0][0] <= now):
            self._dying.popleft()

    def to_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        """From the SIP or media thread: ``fn(*args)`` on the event loop."""
        assert self.loop is not None
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the server is gone
            pass

    # --- the SIP thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        import pjsua2 as pj

        from sub250.telephony import sip_pj

        ep = pj.Endpoint()
        try:
            ep.libCreate()
            cfg = pj.EpConfig()
            cfg.uaConfig.threadCnt = 0  # events are handled here, in libHandleEvents
            cfg.uaConfig.mainThreadOnly = False
            cfg.uaConfig.userAgent = "sub250"
            cfg.logConfig.level = self.settings.log_level
            cfg.logConfig.consoleLevel = self.settings.log_level
            cfg.medConfig.clockRate = CLOCK_RATE
            cfg.medConfig.sndClockRate = CLOCK_RATE
            cfg.medConfig.audioFramePtime = FRAME_MS
            cfg.medConfig.noVad = True  # the session's VAD decides, on every frame
            ep.libInit(cfg)
            tc = pj.TransportConfig()
            tc.port, tc.boundAddress = self.settings.port, self.settings.host
            udp = ep.transportCreate(pj.PJSIP_TRANSPORT_UDP, tc)
            port = int(ep.transportGetInfo(udp).localName.rsplit(":", 1)[1])
            tc.port = port
            ep.transportCreate(pj.PJSIP_TRANSPORT_TCP, tc)
            ep.libStart()
            ep.audDevManager().setNullDev()  # no sound card: the media clock runs on its own
            for codec in ep.codecEnum2():  # G.711 only: what a phone network carries
                keep = codec.codecId.split("/")[0] in ("PCMU", "PCMA", "telephone-event")
                ep.codecSetPriority(codec.codecId, 255 if codec.codecId.startswith("PCMU") else 254 if keep else 0)
            account = sip_pj.Account(self, self.settings, self._calls)
            account.open(self.settings.media_address or self.settings.host, port)
        except Exception as exc:
            log.error("the SIP agent could not start: %s", exc)
            self.to_loop(self._started, None, exc)
            ep.libDestroy()
            return
        self.to_loop(self._started, port, None)
        log.info("SIP: answering on %s:%d (UDP, TCP), from %s", self.settings.host, port,
                 ", ".join(self.settings.allow) or "no one")
        try:
            while True:
                ep.libHandleEvents(POLL_MS)
                self._bury()
                stop = False
                while not self._work.empty():
                    work = self._work.get()
                    if work is None:
                        stop = True
                        break
                    try:
                        work()
                    except Exception:
                        log.exception("SIP: posted work failed")
                    del work
                if stop:
                    break
        finally:
            try:
                ep.hangupAllCalls()
                self._pump(ep, LINGER_S)  # the BYEs go
                for key in list(self._calls):
                    self.forget(key)
                self._pump(ep, LINGER_S)  # the ended calls' ports go quiet
            finally:
                self._bury(everything=True)
                del account
                ep.libDestroy()

    def _pump(self, ep: Any, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ep.libHandleEvents(POLL_MS)
            while not self._work.empty():
                work = self._work.get()
                if work is not None:
                    try:
                        work()
                    except Exception:
                        log.exception("SIP: posted work failed")
                del work

    def _started(self, port: int | None, exc: BaseException | None) -> None:
        if self._ready is not None and not self._ready.done():
            if exc is not None:
                self._ready.set_exception(exc)
            else:
                assert port is not None
                self._ready.set_result(port)


@dataclass
class Invite:
    """An admitted INVITE, on the event loop: ``answer(call)`` with the session's call, or ``refuse(code)``."""

    source: str
    remote: str
    #: The call's key on the SIP thread (:meth:`SipAgent.on_call`).
    key: int
    answer: Callable[[Any], None]
    refuse: Callable[[int, str], None]
