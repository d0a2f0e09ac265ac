"""How an app learns that a phone call came in: ``SUB250_CALL_WEBHOOK_URL`` gets a POST for each one (the shape of
OpenAI's ``realtime.call.incoming`` webhook), so it can follow and steer the call (app/telephony/control.py):

    {"type": "realtime.call.incoming", "id": "evt_…", "created_at": 1733600000,
     "data": {"call_id": "sip_…", "carrier": "sip", "from": "sip:caller@10.0.0.5"}}

The call does not wait for the app: it answers with the profile's session at once, and the app changes it as it
attaches. With ``SUB250_CALL_WEBHOOK_SECRET`` the body is signed, ``X-Sub250-Signature: sha256=<hex>`` (HMAC-SHA256
of the body with the secret), for the app to check. A webhook that fails or is slow is logged; the call goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from sub250.protocol import new_id

log = logging.getLogger(__name__)

#: Seconds the app's endpoint may take to answer.
TIMEOUT_S = 5.0
SIGNATURE_HEADER = "X-Sub250-Signature"


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class CallWebhook:
    url: str
    secret: str = ""

    @classmethod
    def of(cls, settings: Any) -> CallWebhook | None:
        """From ``SUB250_CALL_WEBHOOK_URL`` and ``SUB250_CALL_WEBHOOK_SECRET``; None (off) without a URL."""
        url = settings.call_webhook_url.strip()
        return cls(url, settings.call_webhook_secret.strip()) if url else None

    def body(self, call: Any, remote: str) -> bytes:
        return json.dumps({"type": "realtime.call.incoming", "id": new_id("evt"), "created_at": int(time.time()),
                           "data": {"call_id": call.id, "carrier": call.kind, "from": remote}}).encode()

    def announce(self, call: Any, remote: str) -> asyncio.Task[None]:
        """POST the call's arrival, in a task of the call's own (it stops with the call)."""
        return call.spawn(self._post(call, self.body(call, remote)))

    async def _post(self, call: Any, body: bytes) -> None:
        import aiohttp

        headers = {"Content-Type": "application/json"}
        if self.secret:
            headers[SIGNATURE_HEADER] = signature(self.secret, body)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as http, \
                    http.post(self.url, data=body, headers=headers) as resp:
                if resp.status >= 300:
                    log.warning("%s call %s: the call webhook answered %d", call.kind, call.id, resp.status)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("%s call %s: the call webhook %s failed: %s: %s", call.kind, call.id, self.url,
                        type(exc).__name__, exc)
