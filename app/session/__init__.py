"""One conversation: the turn loop, cancellation (barge-in), history. Knows nothing of wire formats
beyond the event dicts of ``app.protocol``; the transport hands it parsed events."""

from app.session.session import RealtimeSession, Transport

__all__ = ["RealtimeSession", "Transport"]
