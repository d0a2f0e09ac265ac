"""Shared by the end-to-end tests."""

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any

from scripts.bench.sounds import hum  # noqa: F401  (a wordless sound over the reply)
from tests.conftest import TEST_KEY, TEST_ORIGIN

#: A persona of the client's own.
GENERATIVE_INSTRUCTIONS = ("You are the voice support agent of Halden Labs. Answer the caller's question from the "
                           "facts in the context.")
#: ``session`` fields that get the LLM's free answer (grounding turned off explicitly: no gate, no extract), for
#: tests that need a long, streamed, generated reply; instructions alone keep the profile's grounded answer.
LLM_ANSWERS = {"instructions": GENERATIVE_INSTRUCTIONS, "sub250": {"grounding": False}}



@asynccontextmanager
async def server_over(stack: Any, **server_args: Any):
    """A second listening server over ``stack`` (the test server's engines: no second load), with the test
    server's key and origin; ``server_args`` go to ``Server`` (``twilio=...``)."""
    from sub250.gateway import ApiKeys, GatewayLimits
    from sub250.server import Server

    srv = Server("127.0.0.1", 0, keys=ApiKeys([TEST_KEY]), limits=GatewayLimits(origins=(TEST_ORIGIN,)), **server_args)
    await srv.listen()
    srv.attach(stack)
    try:
        yield srv
    finally:
        await srv.close()


async def until(predicate: Any, timeout: float, what: str) -> None:
    """Wait for ``predicate()`` to hold, failing with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.05)
