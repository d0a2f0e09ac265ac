"""How a reply ends: what the conversation keeps of it, the events that close its output item, and what a failure
tells the client. Functions that return decisions; the reply adds the item and sends the events."""

from __future__ import annotations

import logging
from typing import Any

from sub250.protocol import server_events as ev
from sub250.protocol.events import ProtocolError, new_id
from sub250.session.conversation import FunctionCall, Item
from sub250.session.delivery import Delivery
from sub250.tools import ToolArgumentsError

log = logging.getLogger("sub250.session.reply")


def message(response_id: str, item_id: str, delivery: Delivery, *, completed: bool,
            announced: bool) -> tuple[Item | None, dict[str, Any], list[dict[str, Any]]]:
    """A spoken or written reply: (the item the conversation keeps, or None; its wire item; the closing events).
    The conversation keeps what the caller actually got: everything on completion; otherwise the words whose
    audio left (a media track: was played) or, for a written reply, the text sent. ``announced``: its output
    item was announced (a reply to silence has none)."""
    text = delivery.text
    kept = text if completed else delivery.heard()
    part: ev.PartType = "output_audio" if delivery.audio else "output_text"
    item = Item(item_id, "assistant", part, kept, status="completed" if completed else "incomplete",
                audio_ms=delivery.audio_sent_ms)
    wire_item = item.to_wire()
    events: list[dict[str, Any]] = []
    if completed and announced and (text or delivery.audio):
        events += ev.content_done(response_id, item_id, text, audio=delivery.audio)
        events += [ev.content_part_done(response_id, item_id, ev.content_part(part, text)),
                   ev.output_item_done(response_id, wire_item), ev.item_done(wire_item)]
    return (item if announced and (bool(kept) or completed) else None), wire_item, events


def call(response_id: str, fc: FunctionCall, *, completed: bool) -> list[dict[str, Any]]:
    """A tool call: completed, it joins the conversation (its output will name it) and these events close it; a
    cancelled one is dropped (no events)."""
    fc.status = "completed" if completed else "incomplete"
    if not completed:
        return []
    return [ev.output_item_done(response_id, fc.to_wire()), ev.item_done(fc.to_wire())]


def failure(response_id: str, error: BaseException | None) -> ProtocolError:
    """The ``error`` a failed reply tells the client, logged under an error id the client sees: the model's
    mistake with a tool's arguments is said as such; any other fault is ours (no exception text goes out)."""
    error_id = new_id("err")
    if isinstance(error, ToolArgumentsError):
        log.warning("reply %s: %s (error id %s)", response_id, error, error_id)
        return ProtocolError("tool_arguments_invalid", f"{error} (error id {error_id})", type="server_error")
    log.error("reply %s failed (error id %s)", response_id, error_id, exc_info=error)
    return ProtocolError("response_failed", f"the response failed (error id {error_id})", type="server_error")
