"""The ``pjsua2`` classes of the SIP agent (app/telephony/sip_agent.py): an account that takes INVITEs, a call,
and the audio port between a call's RTP and its session. They run on PJSIP's threads only - the SIP thread for
the account's and the call's callbacks, the media clock for the port's - and hand everything to the event loop.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

import pjsua2 as pj

from sub250.metrics.timeline import now_ns

if TYPE_CHECKING:
    from sub250.telephony.sip_agent import SipAgent, SipSettings

log = logging.getLogger(__name__)


def _op(code: int | None = None, reason: str = "") -> Any:
    op = pj.CallOpParam(True)
    if code is not None:
        op.statusCode = code
    if reason:
        op.reason = reason
    return op


class Account(pj.Account):
    """The agent's one account: no registrar (trunks and PBXs send INVITEs to its address)."""

    def __init__(self, agent: SipAgent, settings: SipSettings, calls: dict[int, Any]) -> None:
        super().__init__()
        self.agent, self.settings, self.calls = agent, settings, calls
        self._keys = itertools.count(1)

    def open(self, media_address: str, port: int) -> None:
        cfg = pj.AccountConfig()
        cfg.idUri = f"sip:sub250@{media_address}:{port}"
        cfg.mediaConfig.transportConfig.boundAddress = self.settings.host
        if self.settings.media_address:
            cfg.mediaConfig.transportConfig.publicAddress = self.settings.media_address
        self.create(cfg, True)

    def onIncomingCall(self, prm: Any) -> None:
        from sub250.telephony.sip_agent import Invite

        key = next(self._keys)
        # Only this table holds a call's Python object, and only the SIP thread drops it, while PJSIP lives:
        # PJSIP asserts when one is destroyed on another thread or after the library.
        call = self.calls[key] = Call(self.agent, self, prm.callId, key)
        source = prm.rdata.srcAddress
        if not self.settings.allowed(source):
            log.warning("SIP: INVITE from %s refused: not in SUB250_SIP_ALLOW", source)
            call.refuse(403, "Forbidden")
            return
        call.answer(_op(180))
        agent = self.agent
        invite = Invite(source=source, remote=call.getInfo().remoteUri, key=key,
                        answer=lambda session_call: agent.post(lambda: agent.on_call(key, "accept", session_call)),
                        refuse=lambda code, reason: agent.post(lambda: agent.on_call(key, "refuse", code, reason)))
        agent.to_loop(agent.on_invite, invite)


class Call(pj.Call):
    def __init__(self, agent: SipAgent, account: Account, call_id: int, key: int) -> None:
        super().__init__(account, call_id)
        self.agent, self.key = agent, key
        self.session_call: Any = None  # app/telephony/sip_call.SipCall, once answered
        self.port: Port | None = None
        self.gone = False

    # --- from the event loop (posted) ----------------------------------------------------------------

    def accept(self, session_call: Any) -> None:
        self.session_call = session_call
        if self.gone:  # cancelled while it rang
            self.agent.to_loop(session_call.remote_ended, "cancelled before the answer")
            return
        self.answer(_op(200))

    def refuse(self, code: int, reason: str) -> None:
        if not self.gone:
            self.hangup(_op(code, reason))

    def bye(self) -> None:
        if not self.gone:
            self.hangup(_op())

    # --- PJSIP's callbacks (SIP thread) ----------------------------------------------------------------

    def onCallState(self, prm: Any) -> None:
        info = self.getInfo()
        if info.state == pj.PJSIP_INV_STATE_DISCONNECTED:
            self.gone = True
            if self.session_call is not None:
                self.agent.to_loop(self.session_call.remote_ended, f"{info.lastStatusCode} {info.lastReason}")
            self.session_call = None
            self.agent.post(lambda: self.agent.forget(self.key))  # after this callback, on this thread

    def onCallMediaState(self, prm: Any) -> None:
        if self.session_call is None:
            return
        info = self.getInfo()  # kept: its media vector lives as long as it does
        for i, media in enumerate(info.media):
            if media.type != pj.PJMEDIA_TYPE_AUDIO or media.status != pj.PJSUA_CALL_MEDIA_ACTIVE:
                continue
            audio = self.getAudioMedia(i)
            if self.port is None:
                from sub250.telephony.sip_agent import CLOCK_RATE, FRAME_MS

                fmt = pj.MediaFormatAudio()
                fmt.init(pj.PJMEDIA_FORMAT_PCM, CLOCK_RATE, 1, FRAME_MS * 1000, 16)
                self.port = Port(self.agent, self.session_call)
                self.port.createPort(f"sub250-{self.session_call.id}", fmt)
            audio.startTransmit(self.port)  # again after a re-INVITE (hold, resume): the media may be new
            self.port.startTransmit(audio)

    def onDtmfDigit(self, prm: Any) -> None:
        if self.session_call is not None:
            self.agent.to_loop(self.session_call.pressed, prm.digit, now_ns())

class Port(pj.AudioMediaPort):
    """Between the call's RTP (decoded to PCM16 at the bridge's 8 kHz) and its session; on the media clock."""

    def __init__(self, agent: SipAgent, session_call: Any) -> None:
        super().__init__()
        self.agent, self.session_call = agent, session_call

    def onFrameReceived(self, frame: Any) -> None:
        if frame.type == pj.PJMEDIA_FRAME_TYPE_AUDIO:
            self.agent.to_loop(self.session_call.frame_in, bytes(frame.buf), now_ns())

    def onFrameRequested(self, frame: Any) -> None:
        data, on_sent = self.session_call.player.next_frame()
        frame.type = pj.PJMEDIA_FRAME_TYPE_AUDIO
        frame.buf = pj.ByteVector(data)
        frame.size = len(data)
        if on_sent is not None:
            self.agent.to_loop(on_sent, now_ns())
