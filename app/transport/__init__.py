"""Transports: the WebSocket endpoint ``/v1/realtime`` (and, later, WebRTC). Thin I/O around the
session: read a frame, pass the gateway, parse (``app.protocol``), hand to the session; write events
from an outbox in order, reporting when each was actually written."""
