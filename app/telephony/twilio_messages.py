"""Twilio Media Streams' messages, as Twilio documents them: parsed in, built out; no I/O here.

In (JSON text frames from Twilio): ``connected``, ``start`` (the stream's id, the call's, the media format and the
``customParameters`` of the TwiML ``<Stream>``), ``media`` (base64 μ-law, 8 kHz, 20 ms a frame), ``dtmf``, ``mark``
(one of ours, echoed when the audio before it has played) and ``stop``. Out: ``media`` (base64 μ-law), ``mark``
and ``clear`` (drop the audio Twilio has buffered), each with the ``streamSid``.

:func:`parse` turns one frame into one of the dataclasses below or raises :class:`StreamError` with what was
wrong; it never trusts a field's type. The other direction is :func:`media`, :func:`mark` and :func:`clear`.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

#: The only media format a bidirectional stream carries.
ENCODING = "audio/x-mulaw"
SAMPLE_RATE = 8000
#: Longest name of a mark, a parameter, or an id we keep (Twilio's ids are 34 characters).
MAX_NAME_CHARS = 256
#: Custom parameters kept from ``start`` (TwiML allows a handful).
MAX_PARAMETERS = 32
DIGITS = frozenset("0123456789*#ABCD")


class StreamError(ValueError):
    """A frame that is not a Twilio Media Streams message we can use: what was wrong with it."""


@dataclass(frozen=True)
class Connected:
    protocol: str


@dataclass(frozen=True)
class Start:
    stream_sid: str
    call_sid: str
    account_sid: str
    tracks: tuple[str, ...]
    encoding: str
    sample_rate: int
    channels: int
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Media:
    track: str
    payload: bytes  # μ-law, one byte a sample


@dataclass(frozen=True)
class Dtmf:
    digit: str


@dataclass(frozen=True)
class Mark:
    name: str


@dataclass(frozen=True)
class Stop:
    call_sid: str


Message = Connected | Start | Media | Dtmf | Mark | Stop


def parse(raw: str | bytes) -> Message:
    """One frame from Twilio -> its message, or :class:`StreamError`."""
    if not isinstance(raw, str):
        raise StreamError("a binary frame: Twilio sends JSON text")
    try:
        msg = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise StreamError(f"not JSON: {exc}") from None
    if not isinstance(msg, dict):
        raise StreamError(f"a JSON {type(msg).__name__}, not an object")
    event = msg.get("event")
    if event == "media":
        body = _object(msg, "media")
        payload = _text(body, "payload", limit=None)
        try:
            audio = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise StreamError("media.payload is not base64") from None
        return Media(track=_text(body, "track", default="inbound"), payload=audio)
    if event == "connected":
        return Connected(protocol=_text(msg, "protocol", default=""))
    if event == "start":
        body = _object(msg, "start")
        fmt = _object(body, "mediaFormat")
        tracks = body.get("tracks", ["inbound"])
        if not isinstance(tracks, list) or not all(isinstance(t, str) for t in tracks):
            raise StreamError("start.tracks must be a list of strings")
        params = body.get("customParameters") or {}
        if not isinstance(params, dict) or len(params) > MAX_PARAMETERS or \
                not all(isinstance(k, str) and isinstance(v, str) and len(k) <= MAX_NAME_CHARS
                        and len(v) <= MAX_NAME_CHARS for k, v in params.items()):
            raise StreamError(f"start.customParameters must map at most {MAX_PARAMETERS} names to strings")
        return Start(stream_sid=_text(body, "streamSid", default=msg.get("streamSid")),
                     call_sid=_text(body, "callSid"), account_sid=_text(body, "accountSid", default=""),
                     tracks=tuple(tracks), encoding=_text(fmt, "encoding"),
                     sample_rate=_integer(fmt, "sampleRate"), channels=_integer(fmt, "channels", default=1),
                     parameters=dict(params))
    if event == "dtmf":
        digit = _text(_object(msg, "dtmf"), "digit")
        if digit not in DIGITS:
            raise StreamError(f"dtmf.digit {digit[:8]!r} is not a key of a phone")
        return Dtmf(digit=digit)
    if event == "mark":
        return Mark(name=_text(_object(msg, "mark"), "name"))
    if event == "stop":
        stop = msg.get("stop")
        return Stop(call_sid=_text(stop, "callSid", default="") if isinstance(stop, dict) else "")
    shown = event[:40] if isinstance(event, str) else type(event).__name__
    raise StreamError(f"unknown event {shown!r}")


def media(stream_sid: str, mu_law: bytes | memoryview) -> str:
    return json.dumps({"event": "media", "streamSid": stream_sid,
                       "media": {"payload": base64.b64encode(mu_law).decode("ascii")}})


def mark(stream_sid: str, name: str) -> str:
    return json.dumps({"event": "mark", "streamSid": stream_sid, "mark": {"name": name}})


def clear(stream_sid: str) -> str:
    return json.dumps({"event": "clear", "streamSid": stream_sid})


def _object(msg: Any, key: str) -> dict[str, Any]:
    value = msg.get(key)
    if not isinstance(value, dict):
        raise StreamError(f"{key} must be an object")
    return value


_MISSING = object()


def _text(msg: dict[str, Any], key: str, *, default: Any = _MISSING, limit: int | None = MAX_NAME_CHARS) -> str:
    value = msg.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING or default is None:
            raise StreamError(f"{key} is missing")
        return str(default)
    if not isinstance(value, str):
        raise StreamError(f"{key} must be a string, not {type(value).__name__}")
    if limit is not None and len(value) > limit:
        raise StreamError(f"{key} is over {limit} characters")
    return value


def _integer(msg: dict[str, Any], key: str, *, default: int | None = None) -> int:
    value = msg.get(key, default)
    if isinstance(value, str) and value.isdigit():  # Twilio's own numbers travel as strings in places
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 1_000_000:
        raise StreamError(f"{key} must be a positive whole number")
    return value
