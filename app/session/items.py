"""The conversation item events: ``conversation.item.create`` / ``delete`` / ``retrieve`` / ``truncate``.

Each handler applies one client event to the :class:`~sub250.session.conversation.Conversation` and returns the
server events that answer it (the session sends them); a client mistake is a ProtocolError, and then nothing
changed.
"""

from __future__ import annotations

from typing import Any

from sub250.protocol import server_events as ev
from sub250.protocol.client_events import FunctionCallItem, FunctionCallOutputItem
from sub250.protocol.events import ClientEvent, ProtocolError, new_id
from sub250.session.conversation import ROOT, AnyItem, Conversation, FunctionCall, FunctionOutput, Item

Events = list[dict[str, Any]]


def create(conversation: Conversation, event: ClientEvent, received_ns: int) -> Events:
    src = event.item
    if isinstance(src, FunctionCallOutputItem):
        call = conversation.call(src.call_id)
        if call is None:
            raise ProtocolError("function_call_not_found", f"no function call {src.call_id!r} in the "
                                "conversation for this output", param="item.call_id")
        item: AnyItem = FunctionOutput(src.id or new_id("item"), src.call_id, src.output,
                                       tool_ms=(received_ns - call.sent_ns) / 1e6 if call.sent_ns else None)
    elif isinstance(src, FunctionCallItem):
        item = FunctionCall(src.id or new_id("item"), src.call_id, src.name, src.arguments)
    elif src is not None:
        item = Item(src.id or new_id("item"), src.role, "input_text", src.text)
    else:
        raise ProtocolError("invalid_event", "conversation.item.create needs an 'item'", param="item")
    after = event.previous_item_id
    if after is not None and after != ROOT and conversation.get(after) is None:
        raise ProtocolError("item_not_found", f"no item {after!r} to insert after", param="previous_item_id")
    previous = conversation.add(item, after=after)
    return [ev.item_added(item.to_wire(), previous), ev.item_done(item.to_wire(), previous)]


def delete(conversation: Conversation, event: ClientEvent, received_ns: int) -> Events:
    item_id = event.item_id or ""
    if not conversation.delete(item_id):
        raise ProtocolError("item_not_found", f"no item {item_id!r} in the conversation", param="item_id")
    return [ev.item_deleted(item_id)]


def retrieve(conversation: Conversation, event: ClientEvent, received_ns: int) -> Events:
    item = conversation.get(event.item_id or "")
    if item is None:
        raise ProtocolError("item_not_found", f"no item {event.item_id!r} in the conversation", param="item_id")
    return [ev.item_retrieved(item.to_wire())]


def truncate(conversation: Conversation, event: ClientEvent, received_ns: int) -> Events:
    """The client says how much of an assistant item's audio was played: cut the text to match."""
    item_id, end_ms = event.item_id or "", event.audio_end_ms or 0
    if conversation.truncate(item_id, end_ms) is None:
        raise ProtocolError("item_not_found", f"no assistant item {item_id!r} to truncate", param="item_id")
    return [ev.item_truncated(item_id, event.content_index or 0, end_ms)]
