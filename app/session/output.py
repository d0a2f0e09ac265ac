"""The session's view of its transport, and a reply's way out through it.

:class:`Transport` is what a transport (WebSocket, WebRTC) gives the session: server events and reply audio
(PCM16 at 24 kHz, or the client's G.711 where audio travels in events: :class:`AsConfigured`), purge by tag
(barge-in), and the round trip to the client. :class:`ReplyOutput` tags a reply's events and audio with its
id, holds them while the reply is speculative (nothing reaches the client before the commit), releases them
in order when it is adopted, and drops them once it is discarded. A live reply can also be paused (a suspected interruption,
``app/session/interruption.py``): what it produces is held, the transport stops playing its audio, and
``resume`` lets both go on where they stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sub250.audio.formats import PCM_OUT, ReplyEncoder
from sub250.protocol.extensions import wanted
from sub250.protocol.session_config import SessionConfig

OnSent = Callable[[int], None]


class Transport(Protocol):
    #: Reply audio travels in events (``response.output_audio.delta``: WebSocket), in the session's output
    #: format; False: on a media track, whose codec the connection negotiated (WebRTC).
    @property
    def audio_in_events(self) -> bool: ...

    def send(self, event: dict[str, Any], *, tag: str | None = None, on_sent: OnSent | None = None) -> None:
        """Queue an event for the client; ``on_sent(ns)`` runs once it is written to the socket."""

    def send_audio(self, pcm16: bytes | memoryview, *, response_id: str, item_id: str,
                   on_sent: OnSent | None = None) -> None:
        """Queue reply audio (PCM16 mono at :data:`~app.audio.rates.OUTPUT_RATE`), tagged ``response_id``;
        ``on_sent(ns)`` runs when it leaves (on a media track: when its first frame does)."""

    def audio_done(self, response_id: str) -> None:
        """No more audio will come for ``response_id``."""

    def purge(self, tag: str) -> int:
        """Drop queued, unsent events and audio carrying ``tag``; return how many."""

    def pause_audio(self, response_id: str, paused: bool) -> None:
        """Stop (``paused``) or resume playing the reply audio already queued for ``response_id``, keeping
        it; a transport without a server-side playback buffer (WebSocket) has nothing to do."""

    def clear_audio(self, response_id: str | None) -> bool:
        """The client's ``output_audio_buffer.clear``: stop playing the reply audio queued for ``response_id``
        (all queued reply audio when None) and say ``output_audio_buffer.cleared``. False: this transport
        has no server-side playback buffer (WebSocket: the client holds the audio it plays)."""

    async def measure_rtt(self) -> float | None:
        """Round trip to the client in ms, or None when it cannot be measured."""


class AsConfigured:
    """A session's transport as its client configured the session: the ``sub250.*`` events the client did not
    ask for (``session.include``) are left out, and reply audio goes out in ``audio.output.format`` where it
    travels in events (WebSocket; a media track has its own codec) - G.711 resampled to 8 kHz and encoded,
    with one stream resampler per reply. The config is read at each call: a ``session.update`` applies at once."""

    def __init__(self, transport: Transport, config: Callable[[], SessionConfig]) -> None:
        self.inner, self._config = transport, config
        self._encoders: dict[str, ReplyEncoder] = {}

    @property
    def audio_in_events(self) -> bool:
        return self.inner.audio_in_events

    def send(self, event: dict[str, Any], *, tag: str | None = None, on_sent: OnSent | None = None) -> None:
        if event["type"] == "response.output_audio.done":  # the reply's last audio: what the resampler holds
            encoder = self._encoders.pop(event["response_id"], None)
            tail = encoder.flush() if encoder is not None else b""
            if tail:
                self.inner.send_audio(tail, response_id=event["response_id"], item_id=event["item_id"])
        if wanted(event["type"], self._config().include):
            self.inner.send(event, tag=tag, on_sent=on_sent)

    def send_audio(self, pcm16: bytes | memoryview, *, response_id: str, item_id: str,
                   on_sent: OnSent | None = None) -> None:
        fmt = self._config().output_format
        if fmt != PCM_OUT and self.inner.audio_in_events:
            encoder = self._encoders.get(response_id)
            if encoder is None or encoder.format != fmt:
                encoder = self._encoders[response_id] = ReplyEncoder(fmt)
            pcm16 = encoder.encode(pcm16)
        self.inner.send_audio(pcm16, response_id=response_id, item_id=item_id, on_sent=on_sent)

    def audio_done(self, response_id: str) -> None:
        self._encoders.pop(response_id, None)
        self.inner.audio_done(response_id)

    def purge(self, tag: str) -> int:
        self._encoders.pop(tag, None)
        return self.inner.purge(tag)

    def pause_audio(self, response_id: str, paused: bool) -> None:
        self.inner.pause_audio(response_id, paused)

    def clear_audio(self, response_id: str | None) -> bool:
        return self.inner.clear_audio(response_id)

    async def measure_rtt(self) -> float | None:
        return await self.inner.measure_rtt()


class ReplyOutput:
    def __init__(self, transport: Transport, response_id: str, item_id: str, *, held: bool = False) -> None:
        self.transport = transport
        self.response_id, self.item_id = response_id, item_id
        #: While held: what the reply sent, in order (an event, or PCM for ``send_audio``).
        self._held: list[tuple[dict[str, Any] | bytes | memoryview, OnSent | None, bool]] | None = [] if held else None
        self._dropped = False
        self._stopped = False  # cancelled: only lifecycle events (keep=True) still go out
        self._paused = False  # live, but held for now (a suspected interruption)

    @property
    def held(self) -> bool:
        """Speculative: nothing of it has been released yet."""
        return self._held is not None and not self._paused

    @property
    def paused(self) -> bool:
        return self._paused

    def pause(self) -> None:
        """Hold what the live reply produces from now on, and stop playing what is queued (WebRTC)."""
        if self._paused or self._held is not None or self._dropped:
            return
        self._paused = True
        self._held = []
        self.transport.pause_audio(self.response_id, True)

    def resume(self) -> int:
        """Play on: the queued audio first, then what was held while paused, in order. Returns the count."""
        if not self._paused:
            return 0
        self._paused = False
        self.transport.pause_audio(self.response_id, False)
        return self.release()

    def send(self, event: dict[str, Any], on_sent: OnSent | None = None, *, keep: bool = False) -> None:
        """``keep``: a lifecycle event (``response.created``, the transcript, ``response.done``…) that a
        barge-in must not purge."""
        if self._dropped or (self._stopped and not keep):
            return
        if self._held is not None:
            self._held.append((event, on_sent, keep))
            return
        self.transport.send(event, tag=None if keep else self.response_id, on_sent=on_sent)

    def send_audio(self, pcm16: bytes | memoryview, on_sent: OnSent | None = None) -> None:
        if self._dropped or self._stopped:
            return
        if self._held is not None:
            self._held.append((pcm16, on_sent, False))
            return
        self.transport.send_audio(pcm16, response_id=self.response_id, item_id=self.item_id, on_sent=on_sent)

    def audio_done(self) -> None:
        if not self._dropped:
            self.transport.audio_done(self.response_id)

    def release(self) -> int:
        """Send everything held, in the order it was produced; from now on, send at once. Returns the count."""
        held, self._held = self._held or [], None
        for what, on_sent, keep in held:
            if isinstance(what, dict):
                self.send(what, on_sent, keep=keep)
            else:
                self.send_audio(what, on_sent)
        return len(held)

    def stop(self) -> int:
        """The reply is cancelled: drop what is queued and not yet sent, and whatever its stages still produce
        while they wind down; lifecycle events (``keep``) still go out. Returns how many were dropped."""
        self._stopped = True
        dropped = self.purge()
        if self._paused:  # what a barge-in keeps (lifecycle events) goes out now
            self._paused = False
            self.transport.pause_audio(self.response_id, False)
            self.release()
        return dropped

    def purge(self) -> int:
        """Drop what is queued and not yet sent (held, or in the transport); lifecycle events stay."""
        dropped = 0
        if self._held is not None:
            kept = [entry for entry in self._held if entry[2]]
            dropped, self._held = len(self._held) - len(kept), kept
            if not self._paused:  # speculative: nothing of it reached the transport
                return dropped
        return dropped + self.transport.purge(self.response_id)

    def discard(self) -> None:
        """The reply is thrown away before it was ever released: nothing of it will reach the client."""
        self._dropped = True
        self._paused = False
        self._held = []
