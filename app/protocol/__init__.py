"""The wire protocol (sans-I/O): OpenAI Realtime API (GA) event shapes, parsed, validated, serialized.

Nothing here touches sockets or models: ``parse_client_event`` turns a text frame into a
``ClientEvent`` or raises ``ProtocolError`` (which ``error_event`` turns into the ``error`` event);
``server_event`` builds outgoing events. Our own additions use the ``sub250.`` prefix.
"""

from app.protocol.events import (
    CLIENT_EVENT_TYPES,
    ClientEvent,
    ProtocolError,
    error_event,
    new_id,
    parse_client_event,
    server_event,
)
from app.protocol.session_config import SessionConfig, TurnDetection

__all__ = [
    "CLIENT_EVENT_TYPES",
    "ClientEvent",
    "ProtocolError",
    "SessionConfig",
    "TurnDetection",
    "error_event",
    "new_id",
    "parse_client_event",
    "server_event",
]
