"""The sub250 Python SDK: an async client of the realtime WebSocket API with typed events.

Importable without the server's engines (needs only websockets and numpy; ``send_wav`` also soundfile
and soxr). Example: ``scripts/ask.py``.
"""

from sub250.sdk.client import SUB250_EVENTS, RealtimeClient, TurnResult
from sub250.sdk.events import ServerEvent, Sources, TurnLatency

__all__ = ["SUB250_EVENTS", "RealtimeClient", "ServerEvent", "Sources", "TurnLatency", "TurnResult"]
