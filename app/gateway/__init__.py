"""The gateway: who may connect (Host, Origin, API keys), per-key limits (sessions, messages/s, audio
rate), event size. Synchronous, allocation-light checks: it sits on every message's path."""

from app.gateway.admission import Admission
from app.gateway.auth import ApiKeys, Principal, extract_key, select_subprotocol
from app.gateway.limits import GatewayLimits, KeyLimiter, Refusal

__all__ = ["Admission", "ApiKeys", "GatewayLimits", "KeyLimiter", "Principal", "Refusal", "extract_key",
           "select_subprotocol"]
