"""Tools on the phone, end to end on the real engines and PostgreSQL: Debian's baresip calls the server over SIP;
the call webhook tells an app (the SDK with scripts/support_agent.py's tools) the call's id; the app follows the
call (``/v1/realtime?call_id=``). The order number keyed in on the phone calls ``lookup_order`` (its
``keypad_tool``), the tool reads support.orders, and the answer speaks the status; then ``transfer_to_human``
hands the caller to a person: a real REFER, the caller's phone calls the person (a second baresip that answers),
and the server's leg of the call ends."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import pytest_asyncio
from aiohttp import web

from scripts.bench import softphone
from tests.e2e.helpers import TEST_KEY, server_over, until
from tests.e2e.test_tools import support_agent

pytestmark = pytest.mark.engines


@pytest.fixture(scope="module", autouse=True)
def _baresip():
    if (why := softphone.available()) is not None:
        pytest.fail(f"{why}: make test installs it (scripts/install-phone-tools.sh)")


@pytest_asyncio.fixture(loop_scope="session")
async def hooks():
    """The app's webhook endpoint: the calls announced to it, as they come."""
    calls: asyncio.Queue[dict] = asyncio.Queue()

    async def incoming(request: web.Request) -> web.Response:
        await calls.put(json.loads(await request.read()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hooks/call", incoming)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    calls.url = f"http://127.0.0.1:{runner.addresses[0][1]}/hooks/call"  # type: ignore[attr-defined]
    yield calls
    await runner.cleanup()


@pytest_asyncio.fixture(loop_scope="session")
async def sip_server(server, hooks):
    from sub250.telephony.call_webhook import CallWebhook
    from sub250.telephony.sip_agent import SipSettings

    async with server_over(server.stack, sip=SipSettings(host="127.0.0.1", port=0),
                           call_webhook=CallWebhook(hooks.url)) as srv:
        yield srv


async def test_keys_reach_a_tool_and_transfer_to_human_refers_the_caller(sip_server, hooks, server, tmp_path):
    import asyncpg

    from sub250.sdk import RealtimeClient
    from sub250.sdk.client import ConnectionLost

    quiet = softphone.caller_wav(tmp_path / "quiet.wav", np.zeros(800, np.float32), 8000, tail_s=90)
    pool = await asyncpg.create_pool(server.stack.dsn, min_size=1, max_size=2)
    transfers: list[str] = []
    try:
        async with softphone.Softphone(tmp_path / "person", quiet, user="person", answer=True) as person, \
                softphone.Softphone(tmp_path / "caller", quiet) as phone:
            await phone.dial(f"sip:sub250@127.0.0.1:{sip_server.sip.port}")
            await phone.wait_for("CALL_ESTABLISHED", 10)
            announced = await asyncio.wait_for(hooks.get(), 10)
            assert announced["type"] == "realtime.call.incoming" and announced["data"]["carrier"] == "sip"
            call_id = announced["data"]["call_id"]
            call = sip_server.calls[call_id]
            client = RealtimeClient(f"ws://127.0.0.1:{sip_server.port}/v1/realtime", TEST_KEY, call_id=call_id)

            async def transfer(reason: str) -> str:
                transfers.append(reason)
                return await client.refer(person.uri)

            support_agent().register(client, pool, keypad=True, transfer=transfer)
            async with client:  # session.created, then session.update with the tools and the keypad tool
                assert call.session.config.keypad_tool == "lookup_order"
                await phone.keys("12345#")
                keyed = await client.collect_turn(timeout=120)
                (run,) = keyed.tool_runs
                assert run.name == "lookup_order" and json.loads(run.arguments) == {"order_number": "12345"}, run
                assert run.ok and json.loads(run.output)["status"] == "shipped"  # the row in support.orders
                assert "shipped" in keyed.reply.lower(), keyed.reply
                assert keyed.status == "completed" and not keyed.errors
                tool_lat, lat = keyed.tool_latency.raw, keyed.latency.raw
                assert tool_lat["tool"]["called"] == "lookup_order" and tool_lat["tool"]["read"]  # no model: the digits
                assert lat["answer"]["path"] == "tool_result"
                print(f"\nKEYPAD TOOL over SIP: arguments {tool_lat['beside']['tool_choice']:.0f} ms, tool at the app "
                      f"{lat['beside']['tool']:.0f} ms, answer ttft {lat['spans']['ttft']:.0f} ms; {keyed.reply!r}")
                await until(lambda: not call.playing, 60, "the answer played out")
                # The caller asks for a person (typed here: what a spoken turn would add is the ASR's, tested
                # elsewhere); the tool's answer goes to a call that is ending, so the socket may close first.
                await client.send({"type": "conversation.item.create", "item": {
                    "type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "Please transfer me to a human support agent."}]}})
                await client.send({"type": "response.create", "response": {
                    "tool_choice": {"type": "function", "name": "transfer_to_human"}}})
                try:
                    await client.collect_turn(timeout=120)
                except ConnectionLost:
                    pass
            assert len(transfers) == 1
            through = await person.wait_for("CALL_ESTABLISHED", 20)
            assert through.get("peeruri", "").startswith("sip:caller@"), through
            await until(lambda: call_id not in sip_server.calls, 20, "the server's leg ended")
    finally:
        await pool.close()
