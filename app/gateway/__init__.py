"""The gateway: API keys, per-key limits (sessions, messages/s, audio rate), event size, Origin.
Synchronous, allocation-light checks: it sits on every message's path."""

from app.gateway.auth import ApiKeys, Principal, extract_key
from app.gateway.limits import GatewayLimits, KeyLimiter, Refusal

__all__ = ["ApiKeys", "GatewayLimits", "KeyLimiter", "Principal", "Refusal", "extract_key"]
