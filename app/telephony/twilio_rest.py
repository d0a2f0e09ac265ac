"""A Twilio call handed to a person: its TwiML becomes ``<Dial>`` the target, through Twilio's REST API (the
``twilio`` package's client, asynchronous: ``calls(sid).update_async(twiml=…)``).

Twilio then ends the media stream (``stop``) and dials the target on the caller's line; the session ends with
the stream. ``SUB250_TWILIO_API_URL`` points the client elsewhere than ``https://api.twilio.com`` (a test's
stand-in for Twilio, a proxy): the package's documented way, an HTTP client of our own that it sends through.
"""

from __future__ import annotations

import logging
from typing import Any

from sub250.telephony.phone_call import TransferRefused

log = logging.getLogger(__name__)

TWILIO_API = "https://api.twilio.com"
#: Seconds Twilio's API may take to answer the update.
REST_TIMEOUT_S = 10.0


def dial_twiml(target_uri: str) -> str:
    """``<Response><Dial><Sip>sip:…</Sip></Dial></Response>``, or ``<Number>`` for a ``tel:`` target."""
    from twilio.twiml.voice_response import Dial, VoiceResponse

    dial = Dial()
    if target_uri.startswith("tel:"):
        dial.number(target_uri[len("tel:"):])
    else:
        dial.sip(target_uri)
    response = VoiceResponse()
    response.append(dial)
    return str(response)


def _http_client(api_url: str) -> Any:
    from twilio.http.async_http_client import AsyncTwilioHttpClient

    class ApiAt(AsyncTwilioHttpClient):
        """Twilio's client, sending to ``api_url`` instead of api.twilio.com."""

        async def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if api_url and url.startswith(TWILIO_API):
                url = api_url.rstrip("/") + url[len(TWILIO_API):]
            return await super().request(method, url, *args, **kwargs)

    return ApiAt(timeout=REST_TIMEOUT_S)


async def dial(account_sid: str, auth_token: str, call_sid: str, target_uri: str, *, api_url: str = "") -> str:
    """Update the live call ``call_sid`` to dial ``target_uri``; returns the call's status as Twilio says it.
    :class:`TransferRefused` with Twilio's words when it refuses, or when it cannot be reached."""
    import aiohttp
    from twilio.base.exceptions import TwilioRestException
    from twilio.rest import Client

    http = _http_client(api_url)
    try:
        client = Client(account_sid, auth_token, http_client=http)
        call = await client.calls(call_sid).update_async(twiml=dial_twiml(target_uri))
    except TwilioRestException as exc:
        raise TransferRefused(f"Twilio answered {exc.status}: {exc.msg}") from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise TransferRefused(f"Twilio's API cannot be reached: {type(exc).__name__}: {exc}") from None
    finally:
        await http.close()
    return str(call.status)
