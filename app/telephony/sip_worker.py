"""The SIP worker: PJSIP in a process of its own, so that a fault in it ends the SIP calls in flight and nothing
else (journal §46: in the server's process PJSIP once corrupted the heap and took every session down).

The server starts it (app/telephony/sip_agent.py) as ``python -m sub250.telephony.sip_worker FD SETTINGS``: FD is
its end of a local socket, SETTINGS the :class:`~sub250.telephony.sip_agent.SipSettings` as JSON. Everything
between them is a message of app/telephony/sip_wire.py. Here PJSIP does the SIP (UDP and TCP, INVITE / CANCEL /
BYE, re-INVITE hold), the SDP, the RTP with G.711 and RFC 4733 keys, and the reply's pacing: each call's frames
wait in a :class:`~sub250.telephony.sip_player.FramePlayer` that the media clock empties in real time.

One thread (this module's loop) makes every ``pjsua2`` call and gets the SIP callbacks; the media clock calls the
audio ports from its own. Both write to the socket, one message at a time. The worker ends at ``stop``, or when
the server's end of the socket closes (the server is gone): it hangs up every call first.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from sub250.telephony.sip_agent import SipSettings
from sub250.telephony.sip_player import CLOCK_RATE, FRAME_MS
from sub250.telephony.sip_wire import Decoder, WireError, encode

log = logging.getLogger("sub250.telephony.sip_worker")

#: How long one pass waits for network events before it reads the server's commands.
POLL_MS = 5
#: How long an ended call's objects are kept before they are freed (see :meth:`Worker.forget`).
LINGER_S = 0.5


class Worker:
    def __init__(self, settings: SipSettings, sock: socket.socket) -> None:
        self.settings, self.sock = settings, sock
        #: The pjsua2 calls by key: their only holder (see sip_pj.Account.onIncomingCall); SIP thread only.
        self.calls: dict[int, Any] = {}
        self._send_lock = threading.Lock()
        self._work: deque[Callable[[], None]] = deque()
        self._dying: deque[tuple[float, Any]] = deque()  # (when to free, a call that ended)
        self._decoder = Decoder()
        self._running = True

    def emit(self, op: str, payload: bytes = b"", **fields: Any) -> None:
        """One message to the server; from the SIP thread or the media clock."""
        data = encode(op, payload, **fields)
        with self._send_lock:
            try:
                self.sock.sendall(data)
            except OSError:  # the server is gone: the loop sees it and ends
                self._running = False

    def post(self, work: Callable[[], None]) -> None:
        """``work`` on the SIP thread, after the callback that posts it."""
        self._work.append(work)

    def forget(self, key: int) -> None:
        """After the call's last callback: its Python objects go :data:`LINGER_S` later, once the media clock has
        surely stopped calling its audio port (a port freed under a frame in flight crashes the process)."""
        call = self.calls.pop(key, None)
        if call is not None:
            if call.port is not None:
                call.port.live = False
            self._dying.append((time.monotonic() + LINGER_S, call))

    def _bury(self, everything: bool = False) -> None:
        now = time.monotonic()
        while self._dying and (everything or self._dying[0][0] <= now):
            self._dying.popleft()

    # --- the server's commands -------------------------------------------------------------------------

    def _read(self) -> None:
        while self._running and select.select([self.sock], [], [], 0)[0]:
            try:
                data = self.sock.recv(256 * 1024)
            except OSError:
                data = b""
            if not data:
                log.info("the server closed the link: the SIP worker stops")
                self._running = False
                return
            try:
                messages = self._decoder.feed(data)
            except WireError as exc:
                log.error("the server's link is broken (%s): the SIP worker stops", exc)
                self._running = False
                return
            for fields, payload in messages:
                try:
                    self._command(fields, payload)
                except Exception:
                    log.exception("SIP worker: the command %s failed", fields.get("op"))

    def _command(self, fields: dict[str, Any], payload: bytes) -> None:
        op = fields["op"]
        if op == "stop":
            self._running = False
            return
        call = self.calls.get(int(fields.get("key", 0)))
        if call is None:
            return  # ended meanwhile: its ``ended`` is on its way to the server
        seq = int(fields.get("seq", 0))
        if op == "play":
            call.player.push(str(fields["tag"]), payload, fields.get("sent"), seq)
        elif op == "finish":
            call.player.finish(str(fields["tag"]), seq)
        elif op == "drop":
            call.player.drop(fields.get("tag"), seq)
        elif op == "pause":
            call.player.pause(str(fields["tag"]), bool(fields["paused"]), seq)
        elif op == "answer":
            call.accept()
        elif op == "refuse":
            call.refuse(int(fields["code"]), str(fields["reason"]))
        elif op == "bye":
            call.bye()
        elif op == "refer":
            call.transfer(str(fields["target"]))
        else:
            log.warning("SIP worker: unknown command %r", op)
            return
        if op in ("play", "finish", "drop", "pause"):
            idle = call.player.idle_after()
            if idle is not None:
                self.emit("idle", key=call.key, seq=idle)

    # --- the loop ------------------------------------------------------------------------------------------

    def run(self) -> int:
        import pjsua2 as pj

        from sub250.telephony import sip_pj

        ep = pj.Endpoint()
        account = None
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
            account = sip_pj.Account(self)
            account.open(self.settings.media_address or self.settings.host, port)
        except Exception as exc:
            self.emit("failed", error=str(exc))
            ep.libDestroy()
            return 2
        self.emit("ready", port=port)
        try:
            while self._running:
                ep.libHandleEvents(POLL_MS)
                self._bury()
                while self._work:
                    self._work.popleft()()
                self._read()
        finally:
            try:
                ep.hangupAllCalls()
                self._pump(ep, LINGER_S)  # the BYEs go
                for key in list(self.calls):
                    self.forget(key)
                self._pump(ep, LINGER_S)  # the ended calls' ports go quiet
            finally:
                self._bury(everything=True)
                del account
                ep.libDestroy()
        return 0

    def _pump(self, ep: Any, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ep.libHandleEvents(POLL_MS)
            while self._work:
                self._work.popleft()()


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    fd, raw = int(argv[0]), json.loads(argv[1])
    settings = SipSettings(**{**raw, "allow": tuple(raw["allow"])})
    sock = socket.socket(fileno=fd)
    try:
        return Worker(settings, sock).run()
    finally:
        sock.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
