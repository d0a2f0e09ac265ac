"""Client event parsing/validation and server event construction."""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

#: Client events we implement (GA names). Anything else gets an ``error`` with code ``unknown_event_type``.
CLIENT_EVENT_TYPES = frozenset({
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.truncate",
    "conversation.item.delete",
    "response.create",
    "response.cancel",
})


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


class ProtocolError(Exception):
    """A client mistake; the session answers with an ``error`` event and carries on."""

    def __init__(self, code: str, message: str, *, param: str | None = None, event_id: str | None = None,
                 type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.code, self.message, self.param, self.event_id, self.type = code, message, param, event_id, type


@dataclass(frozen=True)
class ClientEvent:
    type: str
    event_id: str | None
    data: dict[str, Any]
    #: ``input_audio_buffer.append``: the decoded PCM16 bytes.
    audio: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)


def _require(data: dict, key: str, typ: type | tuple[type, ...], event_id: str | None, where: str = "") -> Any:
    value = data.get(key)
    if not isinstance(value, typ) or isinstance(value, bool) and typ in (int, float, (int, float)):
        kind = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise ProtocolError("invalid_value", f"'{where}{key}' must be a {kind}", param=f"{where}{key}",
                            event_id=event_id)
    return value


def parse_client_event(raw: str | bytes) -> ClientEvent:
    """Parse and validate one client frame. Raises ProtocolError with the code, message and param."""
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError("invalid_json", f"the message is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError("invalid_event", "an event must be a JSON object")
    event_id = data.get("event_id") if isinstance(data.get("event_id"), str) else None
    etype = data.get("type")
    if not isinstance(etype, str):
        raise ProtocolError("missing_type", "the event has no 'type'", param="type", event_id=event_id)
    if etype not in CLIENT_EVENT_TYPES:
        raise ProtocolError("unknown_event_type", f"unknown event type {etype!r}", param="type", event_id=event_id)

    if etype == "input_audio_buffer.append":
        b64 = _require(data, "audio", str, event_id)
        try:
            audio = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            raise ProtocolError("invalid_audio", "'audio' is not valid base64", param="audio",
                                event_id=event_id) from None
        if not audio:
            raise ProtocolError("invalid_audio", "'audio' is empty", param="audio", event_id=event_id)
        if len(audio) % 2:
            raise ProtocolError("invalid_audio", f"PCM16 audio needs an even number of bytes, got {len(audio)}",
                                param="audio", event_id=event_id)
        return ClientEvent(etype, event_id, {}, audio=audio)

    if etype == "session.update":
        _require(data, "session", dict, event_id)
    elif etype == "conversation.item.create":
        item = _require(data, "item", dict, event_id)
        _validate_item(item, event_id)
    elif etype == "conversation.item.truncate":
        _require(data, "item_id", str, event_id)
        _require(data, "content_index", int, event_id)
        end = _require(data, "audio_end_ms", int, event_id)
        if end < 0:
            raise ProtocolError("invalid_value", "'audio_end_ms' must be >= 0", param="audio_end_ms",
                                event_id=event_id)
    elif etype == "conversation.item.delete":
        _require(data, "item_id", str, event_id)
    elif etype == "response.create":
        if "response" in data and data["response"] is not None:
            _require(data, "response", dict, event_id)
    return ClientEvent(etype, event_id, data)


def _validate_item(item: dict, event_id: str | None) -> None:
    if item.get("type", "message") != "message":
        raise ProtocolError("unsupported_item", f"item type {item.get('type')!r} is not supported (only 'message')",
                            param="item.type", event_id=event_id)
    if item.get("role") not in ("user", "system", "assistant"):
        raise ProtocolError("invalid_value", "'item.role' must be user, system or assistant", param="item.role",
                            event_id=event_id)
    content = item.get("content")
    if not isinstance(content, list) or not content:
        raise ProtocolError("invalid_value", "'item.content' must be a non-empty list", param="item.content",
                            event_id=event_id)
    for i, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "text", "output_text"):
            raise ProtocolError("unsupported_content", "only text content parts are supported in items",
                                param=f"item.content[{i}].type", event_id=event_id)
        if not isinstance(part.get("text"), str):
            raise ProtocolError("invalid_value", f"'item.content[{i}].text' must be a string",
                                param=f"item.content[{i}].text", event_id=event_id)


def item_text(item: dict) -> str:
    return " ".join(p.get("text", "") for p in item.get("content", []) if isinstance(p, dict)).strip()


def server_event(type: str, **fields: Any) -> dict[str, Any]:
    return {"type": type, "event_id": new_id("event"), **fields}


def error_event(err: ProtocolError) -> dict[str, Any]:
    return server_event("error", error={
        "type": err.type, "code": err.code, "message": err.message, "param": err.param, "event_id": err.event_id,
    })


def encode_audio(pcm16: bytes | memoryview) -> str:
    return base64.b64encode(pcm16).decode("ascii")
