"""One SIP call as a session's transport, and the service that admits calls (:class:`SipService`).

Caller audio comes from the call's audio port (app/telephony/sip_pj.py) as PCM16 at 8 kHz, 20 ms a frame, and
goes through the session's rates path like any other rate. The reply (PCM16 at 24 kHz from the session) is
resampled to 8 kHz, one stream resampler per reply, and queued in 20 ms frames that the media clock takes one at
a time (:class:`FramePlayer`): the clock paces it, barge-in drops what is queued at once, a paused reply waits in
the queue, and the latency ledger's ``first_audio_sent`` is when the first frame went to RTP. Keys (RFC 4733),
the ledger and the end are app/telephony/phone_call.py's; the call ends at the caller's BYE or CANCEL, or when
the server ends it (drain, shutdown, ``/v1/realtime/calls/{id}/hangup``: a BYE).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from sub250.audio.pcm import StreamResampler, float32_to_pcm16, pcm16_to_float32
from sub250.audio.rates import OUTPUT_RATE
from sub250.gateway import Principal
from sub250.telephony.phone_call import PhoneCall
from sub250.telephony.sip_agent import CLOCK_RATE, FRAME_BYTES, Invite, SipAgent, SipSettings

log = logging.getLogger(__name__)

#: The principal every SIP call runs as (its limits are one key's).
SIP = Principal(key_id="sip")
SILENCE = bytes(FRAME_BYTES)


class FramePlayer:
    """Reply frames, tagged by response, taken one at a time by the media clock (another thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frames: deque[list[Any]] = deque()  # [tag, 20 ms of PCM16, on_sent | None]
        self._paused: set[str] = set()
        self._tail: dict[str, tuple[bytes, Any]] = {}  # a reply's last bytes under a frame, and their on_sent

    def push(self, tag: str, pcm16: bytes, on_sent: Callable[[int], None] | None) -> None:
        with self._lock:
            rest, waiting = self._tail.pop(tag, (b"", None))
            data, on_sent = rest + pcm16, waiting or on_sent
            whole = len(data) - len(data) % FRAME_BYTES
            for i in range(0, whole, FRAME_BYTES):
                self._frames.append([tag, data[i:i + FRAME_BYTES], on_sent])
                on_sent = None
            if whole < len(data) or on_sent is not None:
                self._tail[tag] = (data[whole:], on_sent)

    def finish(self, tag: str) -> None:
        """The reply's last frame, padded with silence."""
        with self._lock:
            rest, on_sent = self._tail.pop(tag, (b"", None))
            if rest:
                self._frames.append([tag, rest + bytes(FRAME_BYTES - len(rest)), on_sent])

    def drop(self, tag: str | None) -> int:
        with self._lock:
            before = len(self._frames)
            self._frames = deque(f for f in self._frames if tag is not None and f[0] != tag)
            if tag is None:
                self._tail.clear()
                self._paused.clear()
            else:
                self._tail.pop(tag, None)
                self._paused.discard(tag)
            return before - len(self._frames)

    def pause(self, tag: str, paused: bool) -> None:
        with self._lock:
            if paused:
                self._paused.add(tag)
            else:
                self._paused.discard(tag)

    @property
    def queued(self) -> int:
        return len(self._frames)

    def next_frame(self) -> tuple[bytes, Callable[[int], None] | None]:
        """The media clock's next 20 ms: the oldest frame of a reply that is not paused, else silence."""
        with self._lock:
            for i, frame in enumerate(self._frames):
                if frame[0] not in self._paused:
                    del self._frames[i]
                    return frame[1], frame[2]
        return SILENCE, None


class SipCall(PhoneCall):
    """The session's transport for one SIP call (the ``Transport`` of app/session/output.py)."""

    audio_in_events = False  # PCM16 at 24 kHz from the session; resampled here for the 8 kHz bridge

    def __init__(self, agent: SipAgent, invite: Invite, shared: Any, limiter: Any, *,
                 on_closed: Callable[[SipCall], None] | None = None) -> None:
        self.agent, self.key = agent, invite.key  # the call on the SIP thread (never its pjsua2 object here)
        self.source, self.remote = invite.source, invite.remote
        self.player = FramePlayer()
        self._resamplers: dict[str, StreamResampler] = {}
        self.ended_by_caller = False
        super().__init__("sip", SIP, shared, limiter, session={}, on_closed=on_closed)

    # --- the session's transport ---------------------------------------------------------------------

    def send_audio(self, pcm16: bytes | memoryview, *, response_id: str, item_id: str,
                   on_sent: Callable[[int], None] | None = None) -> None:
        rs = self._resamplers.get(response_id)
        if rs is None:
            rs = self._resamplers[response_id] = StreamResampler(OUTPUT_RATE, CLOCK_RATE)
        narrow = float32_to_pcm16(rs.process(pcm16_to_float32(pcm16)))
        self.player.push(response_id, narrow, on_sent)

    def audio_done(self, response_id: str) -> None:
        rs = self._resamplers.pop(response_id, None)
        if rs is not None:
            self.player.push(response_id, float32_to_pcm16(rs.process(np.zeros(0, np.float32), last=True)), None)
        self.player.finish(response_id)

    def purge(self, tag: str) -> int:
        self._resamplers.pop(tag, None)
        return self.player.drop(tag)

    def pause_audio(self, response_id: str, paused: bool) -> None:
        self.player.pause(response_id, paused)

    def clear_audio(self, response_id: str | None) -> bool:
        if response_id is None:
            self._resamplers.clear()
        else:
            self._resamplers.pop(response_id, None)
        self.player.drop(response_id)
        return True

    @property
    def playing(self) -> bool:
        return self.player.queued > 0

    # --- from PJSIP's threads (on the event loop) -------------------------------------------------------

    def frame_in(self, pcm16: bytes, received_ns: int) -> None:
        if not self.closing and not self.heard_nowait(pcm16, CLOCK_RATE, received_ns):
            log.warning("sip call %s: the session is behind: 20 ms of the caller's audio dropped", self.id)

    def remote_ended(self, reason: str) -> None:
        self.ended_by_caller = True
        self.close_soon(f"the caller hung up ({reason})")

    async def hang_up(self) -> None:
        if not self.ended_by_caller:
            key = self.key
            self.agent.post(lambda: self.agent.on_call(key, "bye"))


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
