"""Client event parsing/validation and server event construction.

The parse side lives in ``app.protocol.client_events`` (re-exported here); this module keeps the helpers
that build server events.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

from sub250.protocol.client_events import (  # noqa: F401  (re-exported: app.protocol.events is their old home)
    CLIENT_EVENT_TYPES,
    ClientEvent,
    MessageItem,
    ResponseOptions,
    _require,
    _validate_item,
    parse_client_event,
)
from sub250.protocol.errors import ProtocolError  # noqa: F401


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


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
