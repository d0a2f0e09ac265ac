"""The messages between the server and its SIP worker process (app/telephony/sip_worker.py), on a local socket.

One message: a header ``<II`` (the JSON's length, the payload's length), a JSON object (``op`` says what it is,
``key`` which call) and raw bytes (20 ms of PCM16 at 8 kHz for ``audio`` and ``play``; empty otherwise). No I/O
here: :func:`encode` makes the bytes of one message, a :class:`Decoder` is fed what the socket gave and returns
the whole messages in it.

The worker sends ``ready`` (its SIP port) or ``failed``; per call ``invite`` (an admitted INVITE: ``source``,
``remote``), ``audio`` (the caller, with ``t``: when the frame came), ``dtmf``, ``sent`` (a reply frame went to
RTP at ``t``), ``idle`` (the call's reply queue is empty after the server's command ``seq``) and ``ended``.
The server sends ``answer``, ``refuse`` (``code``, ``reason``), ``bye``, ``play`` (a reply's PCM16, ``tag``,
and ``sent``: an id the worker reports when the first of it goes out), ``finish`` (a reply's last bytes),
``drop`` (``tag``, or every reply), ``pause`` (``tag``, ``paused``) and ``stop``; each call command carries a
``seq``.
"""

from __future__ import annotations

import json
import struct
from typing import Any

HEADER = struct.Struct("<II")
#: A larger message is not one of ours: the stream is broken.
MAX_JSON = 64 * 1024
MAX_PAYLOAD = 4 * 1024 * 1024


class WireError(Exception):
    """The other side sent something that is not a message: the link cannot be trusted any more."""


def encode(op: str, payload: bytes = b"", **fields: Any) -> bytes:
    head = json.dumps({"op": op, **fields}, separators=(",", ":")).encode()
    return HEADER.pack(len(head), len(payload)) + head + payload


class Decoder:
    """Whole messages out of a byte stream: ``feed(data)`` returns ``[(fields, payload), …]``."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[dict[str, Any], bytes]]:
        self._buf += data
        out = []
        while len(self._buf) >= HEADER.size:
            n_json, n_payload = HEADER.unpack_from(self._buf)
            if n_json > MAX_JSON or n_payload > MAX_PAYLOAD:
                raise WireError(f"a message of {n_json} + {n_payload} bytes")
            end = HEADER.size + n_json + n_payload
            if len(self._buf) < end:
                break
            try:
                fields = json.loads(bytes(self._buf[HEADER.size:HEADER.size + n_json]))
            except ValueError as exc:
                raise WireError(f"a header that is not JSON: {exc}") from None
            if not isinstance(fields, dict) or not isinstance(fields.get("op"), str):
                raise WireError(f"a header without an op: {fields!r}"[:200])
            out.append((fields, bytes(self._buf[HEADER.size + n_json:end])))
            del self._buf[:end]
        return out
