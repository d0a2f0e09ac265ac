"""One SIP call as a session's transport, and the service that admits calls (:class:`SipService`).

The call itself lives in the SIP worker process (app/telephony/sip_worker.py); here it is its key there. Caller
audio comes from the worker as PCM16 at 8 kHz, 20 ms a frame, and goes through the session's rates path like any
other rate. The reply (PCM16 at 24 kHz from the session) is resampled to 8 kHz, one stream resampler per reply,
and sent to the worker, where the media clock takes it 20 ms at a time (app/telephony/sip_player.py): the clock
paces it, barge-in drops what is queued at once, a paused reply waits in the queue, and the latency ledger's
``first_audio_sent`` is when the reply's first frame went to RTP (the worker says when). Keys (RFC 4733), the
ledger and the end are app/telephony/phone_call.py's; the call ends at the caller's BYE or CANCEL, when the
worker dies, when the server ends it (drain, shutdown: a BYE), or once a transfer (:meth:`SipCall.refer`, a
REFER to the caller's phone) has put the caller through to the target.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from sub250.audio.pcm import StreamResampler, float32_to_pcm16, pcm16_to_float32
from sub250.audio.rates import OUTPUT_RATE
from sub250.gateway import Principal
from sub250.telephony.phone_call import PhoneCall, TransferRefused
from sub250.telephony.sip_agent import Invite, SipAgent, SipSettings
from sub250.telephony.sip_player import CLOCK_RATE

log = logging.getLogger(__name__)

#: The principal every SIP call runs as (its limits are one key's).
SIP = Principal(key_id="sip")
#: How long :meth:`SipCall.refer` waits for the caller's phone to answer the REFER.
REFER_TIMEOUT_S = 10.0


class SipCall(PhoneCall):
    """The session's transport for one SIP call (the ``Transport`` of app/session/output.py)."""

    audio_in_events = False  # PCM16 at 24 kHz from the session; resampled here for the 8 kHz bridge

    def __init__(self, agent: SipAgent, invite: Invite, shared: Any, limiter: Any, *,
                 on_closed: Callable[[SipCall], None] | None = None) -> None:
        self.agent, self.key = agent, invite.key  # the call in the worker (never its pjsua2 object here)
        self.source, self.remote = invite.source, invite.remote
        self._resamplers: dict[str, StreamResampler] = {}
        self._seq = 0  # the last command sent to the worker
        self._queued_seq = 0  # the last command that may have queued frames there
        self._idle_seq = 0  # the worker's queue was empty after this command
        self._sent_ids = itertools.count(1)
        self._on_sent: dict[int, tuple[str, Callable[[int], None]]] = {}  # sent id -> (reply, callback)
        self.ended_by_caller = False
        #: The transfer under way: its target, and the REFER's first answer (:meth:`refer` waits for it).
        self._transfer: tuple[str, asyncio.Future[tuple[int, str]]] | None = None
        super().__init__("sip", SIP, shared, limiter, session={}, on_closed=on_closed)

    def _command(self, op: str, payload: bytes = b"", **fields: Any) -> int:
        self._seq += 1
        self.agent.command(op, payload, key=self.key, seq=self._seq, **fields)
        return self._seq

    # --- the session's transport ---------------------------------------------------------------------

    def send_audio(self, pcm16: bytes | memoryview, *, response_id: str, item_id: str,
                   on_sent: Callable[[int], None] | None = None) -> None:
        rs = self._resamplers.get(response_id)
        if rs is None:
            rs = self._resamplers[response_id] = StreamResampler(OUTPUT_RATE, CLOCK_RATE)
        self._play(response_id, float32_to_pcm16(rs.process(pcm16_to_float32(pcm16))), on_sent)

    def _play(self, tag: str, narrow: bytes, on_sent: Callable[[int], None] | None) -> None:
        sent = None
        if on_sent is not None:
            sent = next(self._sent_ids)
            self._on_sent[sent] = (tag, on_sent)
        if narrow or sent is not None:
            self._queued_seq = self._command("play", narrow, tag=tag, sent=sent)

    def audio_done(self, response_id: str) -> None:
        rs = self._resamplers.pop(response_id, None)
        if rs is not None:
            self._play(response_id, float32_to_pcm16(rs.process(np.zeros(0, np.float32), last=True)), None)
        self._queued_seq = self._command("finish", tag=response_id)

    def purge(self, tag: str) -> int:
        """Barge-in: the reply's frames go in the worker (how many is not known here: 0)."""
        self._forget(tag)
        self._command("drop", tag=tag)
        return 0

    def pause_audio(self, response_id: str, paused: bool) -> None:
        self._command("pause", tag=response_id, paused=paused)

    def clear_audio(self, response_id: str | None) -> bool:
        self._forget(response_id)
        self._command("drop", tag=response_id)
        return True

    def _forget(self, tag: str | None) -> None:
        if tag is None:
            self._resamplers.clear()
            self._on_sent.clear()
        else:
            self._resamplers.pop(tag, None)
            for sent in [k for k, (t, _) in self._on_sent.items() if t == tag]:
                del self._on_sent[sent]

    @property
    def playing(self) -> bool:
        """Reply frames may still be queued in the worker (it has not said its queue emptied since)."""
        return self._idle_seq < self._queued_seq

    # --- from the worker (app/telephony/sip_agent.py) -----------------------------------------------------

    def frame_in(self, pcm16: bytes, received_ns: int) -> None:
        if not self.closing and not self.heard_nowait(pcm16, CLOCK_RATE, received_ns):
            log.warning("sip call %s: the session is behind: 20 ms of the caller's audio dropped", self.id)

    def frame_sent(self, sent: int, at_ns: int) -> None:
        entry = self._on_sent.pop(sent, None)
        if entry is not None:
            entry[1](at_ns)

    def queue_idle(self, seq: int) -> None:
        self._idle_seq = max(self._idle_seq, seq)

    async def refer(self, target_uri: str) -> str:
        """A REFER to the caller's phone (a blind transfer): the status once its phone took it (``202 Accepted``,
        or the first NOTIFY); :class:`TransferRefused` if it answered 3xx-6xx or nothing in :data:`REFER_TIMEOUT_S`.
        The call ends once the phone says its call to the target is up."""
        if self._transfer is not None and not self._transfer[1].done():
            raise TransferRefused(f"a transfer to {self._transfer[0]} is under way")
        answer: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        self._transfer = (target_uri, answer)
        self._command("refer", target=target_uri)
        try:
            code, reason = await asyncio.wait_for(asyncio.shield(answer), REFER_TIMEOUT_S)
        except TimeoutError:
            raise TransferRefused(f"the caller's phone did not answer the REFER in {REFER_TIMEOUT_S:.0f} s") from None
        if code >= 300:
            raise TransferRefused(f"the caller's phone answered {code} {reason}")
        return f"{code} {reason}"

    def transfer_status(self, code: int, reason: str, final: bool) -> None:
        """The worker's word on the transfer: the REFER's answer, then the caller's call to the target."""
        if self._transfer is None:
            return
        target, answer = self._transfer
        if not answer.done():
            answer.set_result((code, reason))
        log.info("sip call %s: transfer to %s: %d %s%s", self.id, target, code, reason, " (final)" if final else "")
        if final and 200 <= code < 300:
            self.ended_by_caller = True  # the worker hangs up its leg itself
            self.close_soon(f"transferred to {target}")
        elif final and code >= 300:
            log.warning("sip call %s: the transfer to %s failed (%d %s): the call stays here", self.id, target,
                        code, reason)

    def remote_ended(self, reason: str) -> None:
        self.ended_by_caller = True
        self.close_soon(f"the caller hung up ({reason})")

    async def hang_up(self) -> None:
        if not self.ended_by_caller:
            self.agent.command("bye", key=self.key)


class SipService:
    """The server's SIP side: the agent, and one admitted call a session."""

    def __init__(self, settings: SipSettings, backend: Any) -> None:
        self.settings, self.backend = settings, backend
        self.agent = SipAgent(settings, self._invited)

    @property
    def port(self) -> int:
        return self.agent.port

    async def start(self) -> None:
        await self.agent.start()

    async def stop(self) -> None:
        await self.agent.stop()

    def _invited(self, invite: Invite) -> None:
        backend = self.backend
        if not backend.ready:
            invite.refuse(503, "Service Unavailable")
            return
        refusal = backend.limiter.open_session(SIP.key_id)
        if refusal is not None:
            log.warning("SIP: call from %s refused: %s", invite.source, refusal.message)
            invite.refuse(486, "Busy Here")
            return

        def closed(call: SipCall) -> None:
            backend.calls.pop(call.id, None)
            backend.limiter.close_session(SIP.key_id)

        try:
            call = SipCall(self.agent, invite, backend.shared, backend.limiter, on_closed=closed)
        except BaseException:
            backend.limiter.close_session(SIP.key_id)
            invite.refuse(500, "Server Internal Error")
            raise
        backend.calls[call.id] = call
        log.info("SIP: call %s from %s (%s)", call.id, invite.remote, invite.source)
        call.start()
        invite.answer(call)
        if backend.call_webhook is not None:
            backend.call_webhook.announce(call, invite.remote)
