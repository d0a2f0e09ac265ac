"""Transports: one ``aiohttp`` application serves the port (``http.py``): the WebSocket endpoint
``/v1/realtime`` (``websocket.py``), WebRTC calls (``webrtc.py``), the page and the HTTP endpoints. Thin I/O
around the session: read a frame, pass the gateway, parse (``app.protocol``), hand to the session; write
events from a bounded outbox in order, reporting when each was actually written."""
