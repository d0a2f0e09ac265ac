"""The ``pjsua2`` classes of the SIP worker process (app/telephony/sip_worker.py): an account that takes INVITEs, a
call, and the audio port between a call's RTP and the server. They run on PJSIP's threads only - the worker's
SIP thread for the account's and the call's callbacks, the media clock for the port's - and tell the server
what happened over the worker's link (:meth:`~sub250.telephony.sip_worker.Worker.emit`).
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

import pjsua2 as pj

from sub250.metrics.timeline import now_ns
from sub250.telephony.sip_player import CLOCK_RATE, FRAME_MS, FramePlayer

if TYPE_CHECKING:
    from sub250.telephony.sip_worker import Worker

log = logging.getLogger(__name__)


def _op(code: int | None = None, reason: str = "") -> Any:
    op = pj.CallOpParam(True)
    if code is not None:
        op.statusCode = code
    if reason:
        op.reason = reason
    return op


class Account(pj.Account):
    """The worker's one account: no registrar (trunks and PBXs send INVITEs to its address)."""

    def __init__(self, worker: Worker) -> None:
        super().__init__()
        self.worker = worker
        self._keys = itertools.count(1)

    def open(self, media_address: str, port: int) -> None:
        settings = self.worker.settings
        cfg = pj.AccountConfig()
        cfg.idUri = f"sip:sub250@{media_address}:{port}"
        cfg.mediaConfig.transportConfig.boundAddress = settings.host
        if settings.media_address:
            cfg.mediaConfig.transportConfig.publicAddress = settings.media_address
        self.create(cfg, True)

    def onIncomingCall(self, prm: Any) -> None:
        key = next(self._keys)
        # Only this table holds a call's Python object, and only the SIP thread drops it, while PJSIP lives:
        # PJSIP asserts when one is destroyed on another thread or after the library.
        call = self.worker.calls[key] = Call(self.worker, self, prm.callId, key)
        source = prm.rdata.srcAddress
        if not self.worker.settings.allowed(source):
            log.warning("SIP: INVITE from %s refused: not in SUB250_SIP_ALLOW", source)
            call.refuse(403, "Forbidden")
            return
        call.answer(_op(180))
        self.worker.emit("invite", key=key, source=source, remote=call.getInfo().remoteUri)


class Call(pj.Call):
    def __init__(self, worker: Worker, account: Account, call_id: int, key: int) -> None:
        super().__init__(account, call_id)
        self.worker, self.key = worker, key
        self.player = FramePlayer()
        self.port: Port | None = None
        self.answered = False
        self.gone = False

    # --- the server's commands (on the SIP thread) -----------------------------------------------------

    def accept(self) -> None:
        if self.gone:  # cancelled while it rang: the server hears it ended
            self.worker.emit("ended", key=self.key, reason="cancelled before the answer")
            return
        self.answered = True
        self.answer(_op(200))

    def refuse(self, code: int, reason: str) -> None:
        if not self.gone:
            self.hangup(_op(code, reason))

    def bye(self) -> None:
        if not self.gone:
            self.hangup(_op())

    def transfer(self, target: str) -> None:
        """A blind transfer: REFER the caller's phone to ``target``; its progress comes as ``transfer`` messages."""
        if self.gone:
            return
        try:
            self.xfer(target, _op())
        except pj.Error as exc:
            self.worker.emit("transfer", key=self.key, code=500, reason=exc.reason or exc.info(), final=True)

    # --- PJSIP's callbacks (SIP thread) ----------------------------------------------------------------

    def onCallState(self, prm: Any) -> None:
        info = self.getInfo()
        if info.state == pj.PJSIP_INV_STATE_DISCONNECTED:
            self.gone = True
            self.worker.emit("ended", key=self.key, reason=f"{info.lastStatusCode} {info.lastReason}")
            self.worker.post(lambda: self.worker.forget(self.key))  # after this callback, on this thread

    def onCallMediaState(self, prm: Any) -> None:
        if not self.answered or self.gone:
            return
        info = self.getInfo()  # kept: its media vector lives as long as it does
        for i, media in enumerate(info.media):
            if media.type != pj.PJMEDIA_TYPE_AUDIO or media.status != pj.PJSUA_CALL_MEDIA_ACTIVE:
                continue
            audio = self.getAudioMedia(i)
            if self.port is None:
                fmt = pj.MediaFormatAudio()
                fmt.init(pj.PJMEDIA_FORMAT_PCM, CLOCK_RATE, 1, FRAME_MS * 1000, 16)
                self.port = Port(self.worker, self.key, self.player)
                self.port.createPort(f"sub250-{self.key}", fmt)
            audio.startTransmit(self.port)  # again after a re-INVITE (hold, resume): the media may be new
            self.port.startTransmit(audio)

    def onCallTransferStatus(self, prm: Any) -> None:
        """The REFER's answer, then the NOTIFYs of the caller's call to the target: once that is 2xx the caller
        is through and this leg hangs up (as pjsua does)."""
        code, final = int(prm.statusCode), bool(prm.finalNotify)
        self.worker.emit("transfer", key=self.key, code=code, reason=str(prm.reason), final=final)
        if final and 200 <= code < 300:
            prm.cont = False
            self.bye()

    def onDtmfDigit(self, prm: Any) -> None:
        if self.answered:
            self.worker.emit("dtmf", key=self.key, digit=prm.digit, t=now_ns())


class Port(pj.AudioMediaPort):
    """Between the call's RTP (decoded to PCM16 at the bridge's 8 kHz) and the server; on the media clock."""

    def __init__(self, worker: Worker, key: int, player: FramePlayer) -> None:
        super().__init__()
        self.worker, self.key, self.player = worker, key, player
        self.live = True

    def onFrameReceived(self, frame: Any) -> None:
        if self.live and frame.type == pj.PJMEDIA_FRAME_TYPE_AUDIO:
            self.worker.emit("audio", bytes(frame.buf), key=self.key, t=now_ns())

    def onFrameRequested(self, frame: Any) -> None:
        data, sent, idle = self.player.next_frame()
        frame.type = pj.PJMEDIA_FRAME_TYPE_AUDIO
        frame.buf = pj.ByteVector(data)
        frame.size = len(data)
        if self.live and sent is not None:
            self.worker.emit("sent", key=self.key, id=sent, t=now_ns())
        if self.live and idle is not None:
            self.worker.emit("idle", key=self.key, seq=idle)
