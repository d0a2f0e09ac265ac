"""The wire protocol (sans-I/O): OpenAI Realtime API (GA) event shapes, parsed, validated, serialized.

Nothing here touches sockets or models: ``parse_client_event`` turns a text frame into a
``ClientEvent`` or raises ``ProtocolError`` (which ``error_event`` turns into the ``error`` event) —
for any input: the frame is bounded (``fields.MAX_DEPTH`` nesting, integers within 2**53, finite numbers)
and every field is checked into typed attributes (``ClientEvent.response``, ``.item`` ...).
``server_event`` builds outgoing events. Our own additions use the ``sub250.`` prefix.
"""

from sub250.protocol.client_events import (
    CLIENT_EVENT_TYPES,
    ClientEvent,
    MessageItem,
    ResponseOptions,
    TextPart,
    load_json,
    parse_client_event,
    parse_response_options,
)
from sub250.protocol.errors import ProtocolError
from sub250.protocol.events import error_event, new_id, server_event
from sub250.protocol.fields import (
    MAX_AUDIO_END_MS,
    MAX_CONTENT_PARTS,
    MAX_DEPTH,
    MAX_ID_CHARS,
    MAX_INT,
    MAX_OUTPUT_TOKENS,
    MAX_TEXT_BYTES,
)
from sub250.protocol.session_config import SessionConfig, TurnDetection

__all__ = [
    "CLIENT_EVENT_TYPES",
    "MAX_AUDIO_END_MS",
    "MAX_CONTENT_PARTS",
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "MAX_INT",
    "MAX_OUTPUT_TOKENS",
    "MAX_TEXT_BYTES",
    "ClientEvent",
    "MessageItem",
    "ProtocolError",
    "ResponseOptions",
    "SessionConfig",
    "TextPart",
    "TurnDetection",
    "error_event",
    "load_json",
    "new_id",
    "parse_client_event",
    "parse_response_options",
    "server_event",
]
