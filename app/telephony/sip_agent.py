"""The server's SIP user agent: PJSIP (``pjsua2``, a real SIP stack) answering INVITEs, one call a session.

PJSIP runs in a worker process of its own (app/telephony/sip_worker.py): a fault in it ends the SIP calls in flight,
never the server (journal §46). :class:`SipAgent` starts the worker, speaks to it over a local socket
(app/telephony/sip_wire.py), hands each admitted INVITE to the event loop as an :class:`Invite`, and each call's
audio, keys and end to its :class:`~sub250.telephony.sip_call.SipCall`. When the worker dies, every SIP call ends
(``the SIP worker stopped``) and a new worker is started on the same port.

Who may call: INVITEs from addresses outside ``SUB250_SIP_ALLOW`` (a trunk's or a PBX's addresses, networks
allowed) are refused ``403 Forbidden`` by the worker before anything opens; over ``SUB250_MAX_SESSIONS_PER_KEY``
calls at once (the key ``sip``), ``486 Busy Here``. An admitted call rings, gets its session
(app/telephony/sip_call.py) and is answered ``200 OK``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
import logging
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sub250.errors import Sub250Error
from sub250.metrics import prometheus
from sub250.tasks import TaskSet
from sub250.telephony.sip_wire import Decoder, WireError, encode

log = logging.getLogger(__name__)

#: How long the worker may take to load PJSIP and listen.
START_TIMEOUT_S = 30.0
#: How long the worker may take to hang up its calls and exit at ``stop``, before it is killed.
STOP_TIMEOUT_S = 5.0
#: The wait before a worker that died is started again.
RESTART_DELAY_S = 1.0


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
    """The SIP worker process and the link to it. ``on_invite(invite)`` runs on the event loop for each admitted
    INVITE (an :class:`Invite`), which it answers or refuses; then the call's messages go to the ``SipCall`` it
    answered with (``frame_in``, ``pressed``, ``frame_sent``, ``queue_idle``, ``remote_ended``)."""

    def __init__(self, settings: SipSettings, on_invite: Callable[[Invite], None]) -> None:
        self.settings, self.on_invite = settings, on_invite
        self.port = settings.port
        #: Answered calls by their key in the worker.
        self.calls: dict[int, Any] = {}
        #: How many times the worker has died and been started again.
        self.restarts = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._tasks = TaskSet(on_error=lambda exc: log.error("SIP agent: a task failed", exc_info=exc))
        self._ready: asyncio.Future[int] | None = None
        self._stopping = False
        #: A worker is up and answering INVITEs.
        self.listening = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def start(self) -> None:
        """Start the worker and wait until it listens (raises what it could not do)."""
        self._stopping = False
        await self._spawn()

    async def _spawn(self) -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        raw = {f.name: getattr(self.settings, f.name) for f in dataclasses.fields(self.settings) if f.init}
        raw["port"] = self.port  # after a restart: the port the first worker got
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "sub250.telephony.sip_worker", str(theirs.fileno()), json.dumps(raw),
                pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True)  # Ctrl-C is the server's to handle
        finally:
            theirs.close()
        reader, self._writer = await asyncio.open_unix_connection(sock=ours)
        self._ready = loop.create_future()
        proc = self._proc
        self._tasks.spawn(self._logs(proc))
        self._tasks.spawn(self._receive(reader, proc))
        try:
            self.port = await asyncio.wait_for(asyncio.shield(self._ready), START_TIMEOUT_S)
        except BaseException:
            await self._kill(proc)
            raise
        self.listening = True
        log.info("SIP: answering on %s:%d (UDP, TCP), from %s (worker pid %d)", self.settings.host, self.port,
                 ", ".join(self.settings.allow) or "no one", proc.pid)

    async def stop(self) -> None:
        """Hang up every call, stop the worker."""
        self._stopping = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            self.command("stop")
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                log.warning("SIP: the worker did not stop in %.0f s: killed", STOP_TIMEOUT_S)
                await self._kill(proc)
        await self._tasks.cancel_all()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def command(self, op: str, payload: bytes = b"", **fields: Any) -> None:
        """A command to the worker (dropped while there is none: its calls are ending)."""
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(encode(op, payload, **fields))

    async def _kill(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is None:
            try:
                proc.kill()
            except ProcessLookupError:  # it exited after the check, before asyncio saw it
                pass
            await proc.wait()

    async def _logs(self, proc: asyncio.subprocess.Process) -> None:
        """The worker's own log and PJSIP's, into the server's."""
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            if line:
                level = logging.WARNING if line.startswith(("WARNING", "ERROR", "CRITICAL")) else logging.INFO
                log.log(level, "sip worker %d: %s", proc.pid, line)

    async def _receive(self, reader: asyncio.StreamReader, proc: asyncio.subprocess.Process) -> None:
        decoder = Decoder()
        try:
            while data := await reader.read(256 * 1024):
                for fields, payload in decoder.feed(data):
                    try:
                        self._message(fields, payload)
                    except Exception:
                        log.exception("SIP: the worker's %s message failed", fields.get("op"))
        except (WireError, ConnectionError) as exc:
            log.error("SIP: the link to the worker broke: %s", exc)
        await self._kill(proc)
        self._worker_gone(proc)

    def _message(self, fields: dict[str, Any], payload: bytes) -> None:
        op, key = fields["op"], int(fields.get("key", 0))
        if op in ("audio", "sent", "idle", "dtmf", "transfer", "ended"):
            call = self.calls.pop(key, None) if op == "ended" else self.calls.get(key)
            if call is None:
                return  # ended here meanwhile (hung up, server stopping)
            if op == "audio":
                call.frame_in(payload, int(fields["t"]))
            elif op == "sent":
                call.frame_sent(int(fields["id"]), int(fields["t"]))
            elif op == "idle":
                call.queue_idle(int(fields["seq"]))
            elif op == "dtmf":
                call.pressed(str(fields["digit"]), int(fields["t"]))
            elif op == "transfer":
                call.transfer_status(int(fields["code"]), str(fields["reason"]), bool(fields["final"]))
            else:
                call.remote_ended(str(fields.get("reason", "")))
        elif op == "invite":
            self.on_invite(Invite(agent=self, key=key, source=str(fields["source"]), remote=str(fields["remote"])))
        elif op in ("ready", "failed"):
            if self._ready is not None and not self._ready.done():
                if op == "ready":
                    self._ready.set_result(int(fields["port"]))
                else:
                    self._ready.set_exception(OSError(str(fields.get("error"))))
        else:
            log.warning("SIP: unknown message %r from the worker", op)

    def _worker_gone(self, proc: asyncio.subprocess.Process) -> None:
        """The worker exited (asked to, or not): its calls end; if it was not asked to, a new one starts."""
        if proc is not self._proc:
            return
        self._writer = None
        self.listening = False
        calls, self.calls = self.calls, {}
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(OSError(f"the SIP worker exited ({proc.returncode}) before it listened"))
            return
        if self._stopping:
            for call in calls.values():
                call.remote_ended("the server stopped")
            return
        log.error("SIP: the worker (pid %d) died (exit %s); %d call(s) ended; a new worker starts in %.0f s",
                  proc.pid, proc.returncode, len(calls), RESTART_DELAY_S)
        prometheus.TELEPHONY_WORKER_RESTARTS.inc()
        for call in calls.values():
            call.remote_ended("the SIP worker stopped")
        self.restarts += 1
        self._tasks.spawn(self._restart())

    async def _restart(self) -> None:
        while not self._stopping:
            await asyncio.sleep(RESTART_DELAY_S)
            try:
                await self._spawn()
                return
            except Exception as exc:
                log.error("SIP: the worker could not start again: %s; next try in %.0f s", exc, RESTART_DELAY_S)


@dataclass
class Invite:
    """An admitted INVITE, on the event loop: :meth:`answer` it with the session's call, or :meth:`refuse` it."""

    agent: SipAgent
    #: The call's key in the worker.
    key: int
    source: str
    remote: str

    def answer(self, call: Any) -> None:
        self.agent.calls[self.key] = call
        self.agent.command("answer", key=self.key)

    def refuse(self, code: int, reason: str) -> None:
        self.agent.command("refuse", key=self.key, code=code, reason=reason)
