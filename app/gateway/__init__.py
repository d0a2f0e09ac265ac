"""The gateway: who may connect (Host, Origin, API keys), per-key limits (sessions, messages/s, audio
rate), event size. Synchronous, allocation-light checks: it sits on every message's path."""

from sub250.gateway.admission import Admission
from sub250.gateway.auth import ApiKeys, Principal, extract_key, select_subprotocol
from sub250.gateway.limits import GatewayLimits, KeyLimiter, Refusal

__all__ = ["Admission", "ApiKeys", "GatewayLimits", "KeyLimiter", "Principal", "Refusal", "extract_key",
           "select_subprotocol"]
