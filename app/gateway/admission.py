"""Who may talk to this server, decided in one place for every entry point (the WebSocket handshake of
``/v1/realtime`` and the HTTP endpoints): the ``Host`` a request names, the browser ``Origin`` it comes
from, and the key it carries.

Host (DNS rebinding). A page on ``evil.example`` can make its name resolve to 127.0.0.1 and then talk to
this server as "same origin". The browser still sends ``Host: evil.example:PORT``, so a request is only
served when its Host names this server:

- the bind host (``SUB250_HOST``), ``localhost``, ``127.0.0.1`` and ``[::1]``;
- any IP literal: a browser sends ``Host: 192.0.2.7`` only when the page's own origin is that address,
  which no other site can claim, so rebinding is impossible through it;
- the names listed in ``SUB250_HOSTS`` (comma-separated, ports ignored; ``*``: any name).

A server bound to ``0.0.0.0``/``::`` cannot know the DNS names that reach it: list them (e.g. its public
name behind a proxy) in ``SUB250_HOSTS``. A request without a Host header (HTTP/1.0 tools) is not a
browser's and is served.

Origin. Clients that send none (SDKs) are allowed; the page this server serves itself is allowed ("same
origin": the Origin's host:port equals the Host header, and only when that Host is allowed); any other
only when listed in ``SUB250_ORIGINS`` (``*``: any).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

from sub250.gateway.auth import ApiKeys, Principal, extract_key, is_client_secret
from sub250.gateway.limits import GatewayLimits, Refusal

#: Always accepted in ``Host``.
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: Bind addresses that are not a name anybody can send in ``Host``.
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "*"})


def host_name(value: str | None) -> str | None:
    """The host part of a ``Host`` header or ``host:port`` entry, lower case, without brackets or a
    trailing dot: ``'Example.COM:8250'`` -> ``'example.com'``, ``'[::1]:8250'`` -> ``'::1'``."""
    if not value:
        return None
    value = value.strip().lower()
    if value.startswith("["):
        name, _, _rest = value[1:].partition("]")
    elif value.count(":") == 1:
        name = value.partition(":")[0]
    else:
        name = value  # a bare name, or a bare IPv6 address
    return name.rstrip(".") or None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Admission:
    """Host, Origin and key checks. Every refusal is a :class:`Refusal` with the HTTP status to answer."""

    def __init__(self, keys: ApiKeys, limits: GatewayLimits, bind_host: str) -> None:
        self.keys = keys
        self.limits = limits
        self.any_host = "*" in limits.hosts
        names = {host_name(h) for h in limits.hosts if h.strip() and h.strip() != "*"}
        if bind_host not in WILDCARD_BINDS:
            names.add(host_name(bind_host))
        self.hosts = LOCAL_HOSTS | {n for n in names if n}

    def host_allowed(self, host: str | None) -> bool:
        if host is None:
            return True  # no Host header: not a browser
        name = host_name(host)
        if name is None:
            return False
        return self.any_host or name in self.hosts or _is_ip(name)

    def origin_allowed(self, origin: str | None, host: str | None) -> bool:
        origins = self.limits.origins
        if origin is None or origins is None:
            return True
        if host and self.host_allowed(host) and urlsplit(origin).netloc.lower() == host.strip().lower():
            return True  # same origin: the page this server serves itself
        return "*" in origins or origin in origins

    def check_request(self, headers: Mapping[str, str]) -> Refusal | None:
        """Host and Origin: answered before anything else, for every path."""
        host = headers.get("Host")
        if not self.host_allowed(host):
            return Refusal("host_not_allowed", f"Host {host!r} is not a name of this server "
                                               f"(add it to SUB250_HOSTS)", 403, "invalid_request_error")
        origin = headers.get("Origin")
        if not self.origin_allowed(origin, host):
            return Refusal("origin_not_allowed", f"Origin {origin!r} is not allowed (SUB250_ORIGINS)", 403,
                           "invalid_request_error")
        return None

    def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str], *,
                     allow_client_secret: bool = True) -> Principal | Refusal:
        """The caller's principal from its key (see :func:`~app.gateway.auth.extract_key`), or a refusal."""
        key = extract_key(headers, query)
        if not allow_client_secret and is_client_secret(key):
            return Refusal("client_secret_not_allowed",
                           "a client secret cannot mint client secrets: use an API key", 403,
                           "invalid_request_error")
        principal = self.keys.authenticate(key)
        if principal is None:
            return Refusal("invalid_api_key", "missing, invalid or expired key: send 'Authorization: Bearer <key>'",
                           401, "invalid_request_error")
        return principal


__all__ = ["Admission", "LOCAL_HOSTS", "host_name"]
