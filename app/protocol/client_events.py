"""Client events: one text frame in, a validated ``ClientEvent`` or a ``ProtocolError`` out — nothing else.

The frame is bounded before and while it is decoded (``load_json``): nesting deeper than ``MAX_DEPTH`` is
refused by a linear pre-scan (so ``json`` never recurses far), integers beyond 2**53 by the decoder's
``parse_int`` hook (before ``int()`` sees the digits), non-finite numbers and ``NaN``/``Infinity`` by the
``parse_float``/``parse_constant`` hooks. Then every field the server uses is type- and range-checked
into the event's typed attributes (``ClientEvent.response``, ``.item``, ``.item_id`` ...): the session
never reads an unchecked value. ``session.update``'s ``session`` is checked by ``SessionConfig.updated``.

``input_audio_buffer.append`` is the hot path (tens a second per caller): it never takes the slow branch of
the depth scan (base64 has no brackets) and does one base64 decode.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from sub250.protocol import fields as f
from sub250.protocol import tools as t
from sub250.protocol.errors import ProtocolError
from sub250.protocol.fields import MAX_CONTENT_PARTS, MAX_DEPTH, MAX_INT, MAX_INT_DIGITS, MAX_TEXT_BYTES

#: Client events we implement (GA names). Anything else gets an ``error`` with code ``unknown_event_type``.
CLIENT_EVENT_TYPES = frozenset({
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "output_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.truncate",
    "conversation.item.delete",
    "conversation.item.retrieve",
    "response.create",
    "response.cancel",
})

#: Who a message is from (the parser allows no other).
Role = Literal["user", "assistant", "system"]
ROLES = ("user", "system", "assistant")
ITEM_TYPES = ("message", "function_call", "function_call_output")
#: Content part types a message may carry (text only; audio and images are refused).
TEXT_PART_TYPES = ("input_text", "text", "output_text")


# --- typed payloads ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResponseOptions:
    """``response.create``'s ``response``, validated. None: not given (the session's setting applies)."""

    instructions: str | None = None
    output_modalities: tuple[str, ...] | None = None
    #: 1..4096 (``"inf"`` arrives as 4096).
    max_output_tokens: int | None = None
    #: Up to 16 str -> str pairs, echoed back on the response.
    metadata: dict[str, str] | None = None
    #: ``"auto"`` (default), ``"none"`` (out of band) or a conversation id; not implemented yet.
    conversation: str | None = None
    #: The tools of this response only, and how to use them (checked against the effective tools by the session).
    tools: tuple[t.FunctionTool, ...] | None = None
    tool_choice: t.ToolChoice | None = None

    def overrides(self) -> dict[str, Any]:
        """The fields given, as a dict (``ClientEvent.data["response"]``)."""
        return {k: v for k, v in vars(self).items() if v is not None}


def _with_id(item: dict[str, Any], item_id: str | None) -> dict[str, Any]:
    """An item's plain dict, with the client's ``id`` when it gave one."""
    return item if item_id is None else {**item, "id": item_id}


@dataclass(frozen=True)
class TextPart:
    type: str  # one of TEXT_PART_TYPES
    text: str


@dataclass(frozen=True)
class MessageItem:
    """``conversation.item.create``'s ``item``, validated: a text message."""

    role: Role  # one of ROLES
    content: tuple[TextPart, ...]
    #: The client's id for the item, or None (the server makes one).
    id: str | None = None

    @property
    def text(self) -> str:
        """The parts' text joined by spaces (as ``item_text`` does)."""
        return " ".join(p.text for p in self.content).strip()

    def to_dict(self) -> dict[str, Any]:
        return _with_id({"type": "message", "role": self.role,
                         "content": [{"type": p.type, "text": p.text} for p in self.content]}, self.id)


@dataclass(frozen=True)
class FunctionCallOutputItem:
    """``conversation.item.create``'s ``item`` of type ``function_call_output``: a tool's result."""

    call_id: str
    output: str
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _with_id({"type": "function_call_output", "call_id": self.call_id, "output": self.output}, self.id)


@dataclass(frozen=True)
class FunctionCallItem:
    """``conversation.item.create``'s ``item`` of type ``function_call`` (a call the client adds to history)."""

    call_id: str
    name: str
    arguments: str
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _with_id({"type": "function_call", "call_id": self.call_id, "name": self.name,
                         "arguments": self.arguments}, self.id)


@dataclass(frozen=True)
class ClientEvent:
    """One validated client event. Only the attributes of its ``type`` are set:

    ============================== =====================================================================
    ``session.update``             ``session`` (a dict; ``SessionConfig.updated`` validates it)
    ``input_audio_buffer.append``  ``audio`` (the bytes, non-empty; the session checks them against its input format)
    ``conversation.item.create``   ``item``, ``previous_item_id``
    ``conversation.item.truncate`` ``item_id``, ``content_index``, ``audio_end_ms``
    ``conversation.item.delete``   ``item_id``
    ``conversation.item.retrieve`` ``item_id``
    ``response.create``            ``response`` (None when absent or null)
    ``response.cancel``            ``response_id`` (None when absent or null)
    ============================== =====================================================================

    ``data`` holds the same validated values as a dict (``session``, ``item`` as a plain dict,
    ``previous_item_id``, ``item_id``, ``content_index``, ``audio_end_ms``, ``response`` as the dict of the
    options given, ``response_id``) for code that reads them by key; never the raw frame.
    """

    type: str
    event_id: str | None
    data: dict[str, Any] = field(default_factory=dict)
    #: ``input_audio_buffer.append``: the decoded PCM16 bytes.
    audio: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] | None = None
    item: MessageItem | FunctionCallOutputItem | FunctionCallItem | None = None
    previous_item_id: str | None = None
    item_id: str | None = None
    content_index: int | None = None
    audio_end_ms: int | None = None
    response: ResponseOptions | None = None
    response_id: str | None = None


# --- bounded JSON -----------------------------------------------------------------------------------

#: bytes.translate table: "[" and "{" -> +1, "]" and "}" -> -1 (as int8), anything else -> 0.
_DEPTH_STEPS = bytes(1 if c in b"[{" else 255 if c in b"]}" else 0 for c in range(256))


def json_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """How deep ``text``'s arrays/objects nest outside strings, exactly when that is over ``limit``
    (otherwise some number <= ``limit``). Linear, in C (str methods, numpy): a frame with at most ``limit``
    brackets costs two ``str.count``\\s; about 0.1-0.7 ms per 100 KB otherwise.

    Strings are cut out without a tokenizer: drop escaped backslashes (pairs, left to right, as a run of
    backslashes in a string pairs up), then escaped quotes; every quote left opens or closes a string, so
    the even pieces of ``split('"')`` are what lies outside strings. For valid JSON this is exact; for
    invalid JSON it is exact up to where the decoder fails, so the result is never below the depth the
    decoder reaches (and ``json`` never recurses past the limit).
    """
    if text.count("[") + text.count("{") <= limit:
        return 0
    if '"' in text:
        if "\\" in text:
            text = text.replace("\\\\", "").replace('\\"', "")
        text = "".join(text.split('"')[0::2])
        if text.count("[") + text.count("{") <= limit:
            return 0
    steps = np.frombuffer(text.encode("utf-8", "surrogatepass").translate(_DEPTH_STEPS), dtype=np.int8)
    return int(np.cumsum(steps, dtype=np.int32).max())


def _parse_int(digits: str) -> int:
    if len(digits) - digits.startswith("-") > MAX_INT_DIGITS or abs(value := int(digits)) > MAX_INT:
        raise ProtocolError("invalid_value", "the message has an integer beyond ±2**53 (9007199254740992); "
                                             "integers must be exact as a double")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ProtocolError("invalid_value", "the message has a number too large for a double")
    return value


def _parse_constant(name: str) -> float:
    raise ProtocolError("invalid_json", "the message is not valid JSON (NaN and Infinity are not JSON numbers)")


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)


def load_json(raw: str | bytes) -> Any:
    """Decode one frame (str, or UTF-8 bytes) within the limits above; ProtocolError otherwise."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError("invalid_json", f"the message is not valid UTF-8 (at byte {exc.start})") from None
    else:
        text = raw
    if json_depth(text) > MAX_DEPTH:
        raise ProtocolError("invalid_json", f"the message nests arrays/objects more than {MAX_DEPTH} levels deep")
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError("invalid_json", f"the message is not valid JSON (at character {exc.pos})") from None


# --- events -----------------------------------------------------------------------------------------

def parse_client_event(raw: str | bytes) -> ClientEvent:
    """Parse and validate one client frame. Raises ProtocolError with the code, message and param."""
    data = load_json(raw)
    if not isinstance(data, dict):
        raise ProtocolError("invalid_event", "an event must be a JSON object")
    event_id = data.get("event_id")
    if event_id is not None:
        event_id = f.identifier(event_id, "event_id", None)
    etype = data.get("type")
    if not isinstance(etype, str):
        raise ProtocolError("missing_type", "the event has no 'type'", param="type", event_id=event_id)
    parse = _PARSERS.get(etype)
    if parse is None:
        raise ProtocolError("unknown_event_type", f"unknown event type {f.show(etype)}", param="type",
                            event_id=event_id)
    return parse(data, event_id)


_JSON_TYPE_NAMES = {str: "string", dict: "object", list: "array", int: "integer", float: "number", bool: "boolean"}


def _require(data: dict, key: str, typ: type | tuple[type, ...], event_id: str | None, where: str = "") -> Any:
    """``data[key]``, which must be of ``typ`` (a bool is not an int here)."""
    value = data.get(key)
    types = typ if isinstance(typ, tuple) else (typ,)
    if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
        kind = " or ".join(_JSON_TYPE_NAMES.get(t, t.__name__) for t in types)
        raise ProtocolError("invalid_value", f"'{where}{key}' must be a {kind}", param=f"{where}{key}",
                            event_id=event_id)
    return value


def _append(data: dict, event_id: str | None) -> ClientEvent:
    b64 = _require(data, "audio", str, event_id)
    try:
        audio = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("invalid_audio", "'audio' is not valid base64", param="audio",
                            event_id=event_id) from None
    if not audio:
        raise ProtocolError("invalid_audio", "'audio' is empty", param="audio", event_id=event_id)
    return ClientEvent("input_audio_buffer.append", event_id, audio=audio)


def _no_fields(etype: str) -> Callable[[dict, str | None], ClientEvent]:
    return lambda data, event_id: ClientEvent(etype, event_id)


def _session_update(data: dict, event_id: str | None) -> ClientEvent:
    session = _require(data, "session", dict, event_id)
    return ClientEvent("session.update", event_id, {"session": session}, session=session)


def _item_create(data: dict, event_id: str | None) -> ClientEvent:
    item = _validate_item(_require(data, "item", dict, event_id), event_id)
    previous = data.get("previous_item_id")
    if previous is not None:
        previous = f.identifier(previous, "previous_item_id", event_id)
    return ClientEvent("conversation.item.create", event_id, {"item": item.to_dict(), "previous_item_id": previous},
                       item=item, previous_item_id=previous)


def _item_truncate(data: dict, event_id: str | None) -> ClientEvent:
    item_id = f.identifier(data.get("item_id"), "item_id", event_id)
    index = f.integer(data.get("content_index"), "content_index", event_id, 0, MAX_CONTENT_PARTS - 1)
    end = f.integer(data.get("audio_end_ms"), "audio_end_ms", event_id, 0, f.MAX_AUDIO_END_MS)
    return ClientEvent("conversation.item.truncate", event_id,
                       {"item_id": item_id, "content_index": index, "audio_end_ms": end},
                       item_id=item_id, content_index=index, audio_end_ms=end)


def _item_delete(data: dict, event_id: str | None) -> ClientEvent:
    item_id = f.identifier(data.get("item_id"), "item_id", event_id)
    return ClientEvent("conversation.item.delete", event_id, {"item_id": item_id}, item_id=item_id)


def _item_retrieve(data: dict, event_id: str | None) -> ClientEvent:
    item_id = f.identifier(data.get("item_id"), "item_id", event_id)
    return ClientEvent("conversation.item.retrieve", event_id, {"item_id": item_id}, item_id=item_id)


def _response_create(data: dict, event_id: str | None) -> ClientEvent:
    raw = data.get("response")
    if raw is None:
        return ClientEvent("response.create", event_id)
    opts = parse_response_options(f.obj(raw, "response", event_id), event_id)
    return ClientEvent("response.create", event_id, {"response": opts.overrides()}, response=opts)


def _response_cancel(data: dict, event_id: str | None) -> ClientEvent:
    rid = data.get("response_id")
    if rid is None:
        return ClientEvent("response.cancel", event_id)
    rid = f.identifier(rid, "response_id", event_id)
    return ClientEvent("response.cancel", event_id, {"response_id": rid}, response_id=rid)


_PARSERS: dict[str, Callable[[dict, str | None], ClientEvent]] = {
    "session.update": _session_update,
    "input_audio_buffer.append": _append,
    "input_audio_buffer.commit": _no_fields("input_audio_buffer.commit"),
    "input_audio_buffer.clear": _no_fields("input_audio_buffer.clear"),
    "output_audio_buffer.clear": _no_fields("output_audio_buffer.clear"),
    "conversation.item.create": _item_create,
    "conversation.item.truncate": _item_truncate,
    "conversation.item.delete": _item_delete,
    "conversation.item.retrieve": _item_retrieve,
    "response.create": _response_create,
    "response.cancel": _response_cancel,
}
assert _PARSERS.keys() == CLIENT_EVENT_TYPES


def _metadata(value: Any, param: str, event_id: str | None) -> dict[str, str]:
    meta = f.obj(value, param, event_id)
    if len(meta) > f.MAX_METADATA_PAIRS:
        raise f.invalid(param, f"'metadata' has {len(meta)} keys; the limit is {f.MAX_METADATA_PAIRS}", event_id)
    for key, v in meta.items():
        f.string(key, f"{param} key", event_id, max_chars=f.MAX_METADATA_KEY_CHARS)
        f.string(v, f"{param}.{key[:f.MAX_METADATA_KEY_CHARS]}", event_id, max_chars=f.MAX_METADATA_VALUE_CHARS)
    return dict(meta)


#: ``response`` fields of the GA API used here beyond the shared ones.
_RESPONSE_FIELDS: dict[str, f.Check] = {"metadata": _metadata, "conversation": f.identifier}
#: ``response`` fields of the GA API accepted and ignored (not implemented), after a type check.
_RESPONSE_IGNORED: dict[str, f.Check] = {
    "audio": f.obj,
    "input": lambda v, p, e: f.array(v, p, e, of=f.obj),
}


def parse_response_options(response: dict[str, Any], event_id: str | None) -> ResponseOptions:
    """``response.create``'s ``response`` object -> ResponseOptions (unknown keys are ignored)."""
    f.checked(response, "response.", event_id, _RESPONSE_IGNORED)
    return ResponseOptions(**f.common_options(response, "response.", event_id),
                           **t.options(response, "response.", event_id),
                           **f.checked(response, "response.", event_id, _RESPONSE_FIELDS))


def _validate_item(item: dict, event_id: str | None) -> MessageItem | FunctionCallOutputItem | FunctionCallItem:
    """``conversation.item.create``'s ``item``: a text message with 1..64 text parts, 32 KiB of text in all, or
    a ``function_call_output`` (a tool's result) or ``function_call``."""
    itype = item.get("type")
    if itype is None:
        itype = "message"
    if itype not in ITEM_TYPES:
        raise ProtocolError("unsupported_item", f"item type {f.show(itype)} is not supported (only "
                            "'message', 'function_call' and 'function_call_output')", param="item.type",
                            event_id=event_id)
    item_id = item.get("id")
    if item_id is not None:
        item_id = f.identifier(item_id, "item.id", event_id)
    if itype == "function_call_output":
        return FunctionCallOutputItem(f.identifier(item.get("call_id"), "item.call_id", event_id),
                                      t.output_text(item.get("output"), "item.output", event_id), item_id)
    if itype == "function_call":
        return FunctionCallItem(f.identifier(item.get("call_id"), "item.call_id", event_id),
                                t.tool_name(item.get("name"), "item.name", event_id),
                                t.output_text(item.get("arguments"), "item.arguments", event_id), item_id)
    role = item.get("role")
    if role not in ROLES:  # a list or dict is never "in" a tuple of str; no hashing needed
        raise ProtocolError("invalid_value", "'item.role' must be user, system or assistant", param="item.role",
                            event_id=event_id)
    content = item.get("content")
    if not isinstance(content, list) or not content:
        raise ProtocolError("invalid_value", "'item.content' must be a non-empty list", param="item.content",
                            event_id=event_id)
    if len(content) > MAX_CONTENT_PARTS:
        raise ProtocolError("invalid_value", f"'item.content' has {len(content)} parts; the limit is "
                            f"{MAX_CONTENT_PARTS}", param="item.content", event_id=event_id)
    parts, size = [], 0
    for i, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in TEXT_PART_TYPES:
            raise ProtocolError("unsupported_content", "only text content parts are supported in items",
                                param=f"item.content[{i}].type", event_id=event_id)
        text = part.get("text")
        if not isinstance(text, str):
            raise ProtocolError("invalid_value", f"'item.content[{i}].text' must be a string",
                                param=f"item.content[{i}].text", event_id=event_id)
        size += f.utf8_len(text, f"item.content[{i}].text", event_id)
        if size > MAX_TEXT_BYTES:
            raise ProtocolError("invalid_value", f"the item's text is over {MAX_TEXT_BYTES} bytes (UTF-8)",
                                param=f"item.content[{i}].text", event_id=event_id)
        parts.append(TextPart(part["type"], text))
    return MessageItem(role, tuple(parts), item_id)
