"""An app that follows and steers a phone call: ``GET /v1/realtime?call_id=…`` (the shape of OpenAI's side-band
connection to a SIP call).

The caller's audio and the reply's stay on the phone; the app's socket gets every event of the call's session
(``session.created`` at once, with the session as it is now; then transcripts, keys pressed, tool calls, latency
reports) and may send what a client sends, but audio: ``session.update`` (tools, instructions,
``sub250.keypad_tool``), ``conversation.item.create`` (a tool's output), ``response.create``, ``response.cancel``.
Its events reach the session through the call's inbox, in order with the caller's audio and keys. An event it
gets wrong gets an ``error`` on its own socket; the call goes on. When the call ends the socket is closed
(1000, "the call ended"); when the socket closes the call goes on without it. Several apps may follow one call.
Each gets the GA events, and our ``sub250.*`` additions only as its own ``session.include`` asks (a standard
client that asks for none gets none); the call's session keeps the additions the call itself needs
(``PHONE_INCLUDE``: each turn's ledger, for the log) whatever an app's ``include`` says.

Who may: any API key of the server, not a client secret (those are for browsers), as phone calls belong to no
key; the key is checked before the upgrade (app/transport/http.py).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from sub250.protocol import ProtocolError, error_event, extensions
from sub250.protocol.server_events import session_created

log = logging.getLogger(__name__)

#: The reason of the close an app's socket gets when the call ends.
CALL_ENDED = "the call ended"


def controllable(call: Any) -> bool:
    """Phone calls only: a WebRTC call's events go to its own data channel."""
    return call is not None and getattr(call, "listeners", None) is not None and not call.closing


class CallControl:
    """What an app's socket talks to (the session role of app/transport/websocket.py): the call's session, through
    the call's inbox."""

    def __init__(self, call: Any, transport: Any) -> None:
        self.call, self.transport = call, transport
        self._watch: asyncio.Task[None] | None = None
        #: The additions this app asked for (its ``session.include``); none until it asks.
        self.include: tuple[str, ...] = ()

    @property
    def in_flight(self) -> bool:
        return not self.call.idle

    def start(self) -> None:
        self.transport.send(session_created(replace(self.call.session.config, include=self.include)))
        self.call.listeners.add(self)
        self._watch = asyncio.ensure_future(self._until_ended())
        log.info("%s call %s: an app follows it (%d)", self.call.kind, self.call.id, len(self.call.listeners))

    async def _until_ended(self) -> None:
        await self.call.closed.wait()
        self.transport.close_soon(1000, CALL_ENDED)

    def send(self, event: dict[str, Any], *, tag: str | None = None) -> None:
        """One of the call's events, if this app asked for its kind."""
        if extensions.wanted(event["type"], self.include):
            self.transport.send(event, tag=tag)

    def error(self, err: ProtocolError) -> None:
        self.transport.send(error_event(err))

    def input_seconds(self, nbytes: int) -> float:
        return self.call.session.input_seconds(nbytes)

    async def handle(self, event: Any, received_ns: int) -> None:
        if event.audio:
            self.error(ProtocolError("audio_not_allowed", "the call's audio is the caller's: an app that follows a "
                                     "call sends no input audio", event_id=event.event_id))
            return
        if self.call.closing:
            self.error(ProtocolError("call_ended", f"call {self.call.id} has ended", event_id=event.event_id))
            return
        if event.type == "session.update" and event.session.get("include") is not None:
            try:
                event = self._own_include(event)
            except ProtocolError as err:  # refused whole, as the session would: nothing changes
                self.error(err)
                return
        await self.call.control(event, received_ns)

    def _own_include(self, event: Any) -> Any:
        """The app's ``include`` is its own; the session's keeps what the call needs besides."""
        asked = extensions.include(event.session["include"], "session.include", event.event_id)
        self.include = asked
        session = {**event.session, "include": list(dict.fromkeys((*asked, *self.call.own_include)))}
        return replace(event, data={**event.data, "session": session}, session=session)

    async def close(self) -> None:
        self.call.listeners.discard(self)
        if self._watch is not None:
            self._watch.cancel()
        log.info("%s call %s: an app stopped following it", self.call.kind, self.call.id)
