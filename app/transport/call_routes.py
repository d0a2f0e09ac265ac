"""What an app does to a running call over HTTP (the shape of OpenAI's call endpoints):

- ``POST /v1/realtime/calls/{id}/hangup``: end it;
- ``POST /v1/realtime/calls/{id}/refer`` with ``{"target_uri": "sip:…" | "tel:+…"}``: hand the caller to a person
  (a SIP REFER; on Twilio the call's TwiML becomes a ``<Dial>``). It answers 200 ``{"status": …}`` once the
  carrier took the transfer, 409 ``transfer_refused`` with the carrier's words when it did not; the call ends
  when the caller is through, as a hang-up.

A WebRTC call is its own key's; a phone call any API key's (not a client secret's: those are for browsers), as
phone calls belong to no key.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from aiohttp import web

from sub250.protocol import ProtocolError, load_json
from sub250.telephony import control
from sub250.telephony.phone_call import TransferRefused
from sub250.transport.http import BACKEND, admit, error_response

log = logging.getLogger(__name__)

#: The targets a call may be handed to: a SIP URI or a telephone number (RFC 3966), bounded.
TARGET = re.compile(r"^(?:sips?:[^\s<>\"]{1,250}|tel:\+?[0-9][0-9\-.()]{1,31})$")
#: What the refer body must look like (said in each 400).
REFER_EXAMPLE = 'expected JSON like {"target_uri": "sip:support@pbx.example.com"} or {"target_uri": "tel:+15551234567"}'


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/realtime/calls/{call_id}/hangup", _hangup)
    app.router.add_post("/v1/realtime/calls/{call_id}/refer", _refer)


def _call_of(request: web.Request) -> Any | web.Response:
    """The call the path names, if the caller's key may act on it; else the 404 (a call of another key is not
    told apart from none)."""
    call_id = request.match_info["call_id"]
    call = request.app[BACKEND].calls.get(call_id)
    phone = control.controllable(call)
    principal = admit(request, allow_client_secret=not phone)
    if call is None or not (phone or call.principal.key_id == principal.key_id):
        return error_response(404, "call_not_found", f"no open call {call_id[:64]!r}")
    return call


async def _hangup(request: web.Request) -> web.Response:
    call = _call_of(request)
    if isinstance(call, web.Response):
        return call
    await call.close("hung up by the client")
    return web.Response(status=200)


async def _refer(request: web.Request) -> web.Response:
    call = _call_of(request)
    if isinstance(call, web.Response):
        return call
    if not control.controllable(call):
        return error_response(400, "transfer_unsupported", "only phone calls can be transferred")
    try:
        body = load_json(await request.read())
    except ProtocolError as err:
        return error_response(400, "invalid_body", f"{err.message}; {REFER_EXAMPLE}")
    target = body.get("target_uri") if isinstance(body, dict) else None
    if not isinstance(target, str) or not TARGET.match(target):
        return error_response(400, "invalid_value", f"'target_uri' must be a sip: URI or a tel: number; {REFER_EXAMPLE}")
    try:
        status = await call.refer(target)
    except TransferRefused as exc:
        log.warning("%s call %s: transfer to %s refused: %s", call.kind, call.id, target, exc)
        return error_response(409, "transfer_refused", str(exc))
    log.info("%s call %s: transferring to %s (%s)", call.kind, call.id, target, status)
    return web.json_response({"status": status})
