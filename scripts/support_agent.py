#!/usr/bin/env python
"""An example support agent on the SDK: three client tools over the support tables in PostgreSQL.

    .venv/bin/python scripts/support_agent.py (--wav QUESTION.wav | --text "Where is my order 48213?")
        [--url ws://127.0.0.1:8250/v1/realtime] [--key KEY] [--database DSN] [--json]

The tools - ``lookup_order(order_number)``, ``open_warranty_claim(order_number, problem)``,
``transfer_to_human(reason)`` - are plain async functions registered with ``client.tool``; the SDK sends their
schemas with ``session.update``, runs them when the model calls one, sends the result back and waits for the
spoken answer. They query ``support.orders`` / write ``support.warranty_claims`` and ``support.handoffs``
(migration 0003; the sample rows of a fresh install: app/db/sample.py) with asyncpg. The database: --database,
else $DATABASE_URL, else the embedded PostgreSQL of a local ``serve`` (attached, as ``ingest`` does). Prints the
transcript, each tool call with its result and time, the reply and the latency table (--json: one JSON object
instead). The API key defaults to $SUB250_API_KEY, else the local key ``serve`` created.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench.options import default_key  # noqa: E402
from sub250.sdk import RealtimeClient  # noqa: E402
from pydantic import Field  # noqa: E402

#: The arguments' types: what the model must write (the schema's pattern guides its decoding) and what the
#: embedding selector reads about them.
OrderNumber = Annotated[str, Field(pattern=r"^[0-9]{4,8}$", description="the order number, digits only")]
Problem = Annotated[str, Field(max_length=120, description="what is wrong with the product")]
Reason = Annotated[str, Field(max_length=80, description="why the caller wants a person")]


def register(target: Any, pool: Any, *, keypad: bool = False,
             transfer: Callable[[str], Awaitable[str]] | None = None) -> None:
    """Register the support tools on a client (or an ``sub250.sdk.tools.ToolSet``), querying ``pool``. On a phone
    call: ``keypad``, an order number keyed in calls ``lookup_order``; ``transfer(reason)`` hands the caller to a
    person (``RealtimeClient.refer``), after ``transfer_to_human`` logged the handoff."""

    async def lookup_order(order_number: OrderNumber) -> dict[str, Any]:
        """Look up where a customer's order is: its status, carrier and delivery date, by the order number."""
        row = await pool.fetchrow(
            "SELECT order_number, item, status, carrier, estimated_delivery FROM support.orders"
            " WHERE order_number = $1", order_number.strip())
        if row is None:
            return {"order_number": order_number, "found": False}
        out = {"order_number": row["order_number"], "item": row["item"], "status": row["status"]}
        if row["carrier"]:
            out["carrier"] = row["carrier"]
        if row["estimated_delivery"] is not None and row["status"] != "delivered":
            out["estimated_delivery"] = row["estimated_delivery"].strftime("%-d %B")
        return out

    async def open_warranty_claim(order_number: OrderNumber, problem: Problem) -> dict[str, Any]:
        """Open a warranty claim when a product the customer bought is broken, faulty or damaged."""
        if await pool.fetchval("SELECT 1 FROM support.orders WHERE order_number = $1", order_number.strip()) is None:
            return {"order_number": order_number, "claim_opened": False, "reason": "no such order"}
        claim = await pool.fetchval("INSERT INTO support.warranty_claims (order_number, problem) VALUES ($1, $2)"
                                    " RETURNING id", order_number.strip(), problem.strip() or "not said")
        return {"claim_number": f"WC-{claim}", "order_number": order_number, "status": "open"}

    async def transfer_to_human(reason: Reason) -> dict[str, Any]:
        """Transfer the caller to a human support agent when they ask to speak to a person."""
        handoff = await pool.fetchval("INSERT INTO support.handoffs (reason) VALUES ($1) RETURNING id",
                                      reason.strip() or "caller asked for a person")
        waiting = await pool.fetchval("SELECT count(*) FROM support.handoffs WHERE requested_at > now() - interval '1 hour'")
        out: dict[str, Any] = {"transferred": True, "ticket": f"H-{handoff}", "callers_waiting": int(waiting)}
        if transfer is not None:
            out["status"] = await transfer(reason)
        return out

    target.tool(lookup_order, timeout_s=5.0, keypad=keypad)
    for fn in (open_warranty_claim, transfer_to_human):
        target.tool(fn, timeout_s=5.0)


async def open_pool(dsn: str | None) -> tuple[Any, Any]:
    """(asyncpg pool, the embedded server handle to release or None)."""
    import asyncpg

    from sub250.config import Settings

    embedded = None
    if not dsn:
        settings = Settings.from_env()
        dsn = settings.database_url
        if not dsn:
            from sub250.db.embedded import EmbeddedPostgres

            embedded = EmbeddedPostgres(settings.pgdata_dir)
            dsn = await asyncio.to_thread(embedded.start)
    return await asyncpg.create_pool(dsn, min_size=1, max_size=2), embedded


async def main(args: argparse.Namespace) -> int:
    pool, embedded = await open_pool(args.database)
    try:
        async with RealtimeClient(args.url, args.key or default_key()) as client:
            register(client, pool)
            await client.update_session(output_modalities=["audio"])
            if args.text:
                await client.send_text(args.text)
            else:
                await client.send_wav(args.wav, realtime=True)
            result = await client.collect_turn(timeout=args.timeout)
    finally:
        await pool.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
    calls = [{"name": r.name, "arguments": json.loads(r.arguments), "output": json.loads(r.output), "ok": r.ok,
              "ms": round(r.ms, 1)} for r in result.tool_runs]
    if args.json:
        print(json.dumps({"transcript": result.transcript, "tool_calls": calls, "reply": result.reply,
                          "status": result.status, "audio_s": round(result.audio_seconds, 2),
                          "errors": [e.data.get("error") for e in result.errors],
                          "tool_latency": result.tool_latency.raw if result.tool_latency else None,
                          "latency": result.latency.raw if result.latency else None}))
    else:
        print(f"caller : {result.transcript or args.text}")
        for c in calls:
            print(f"tool   : {c['name']}({json.dumps(c['arguments'])}) -> {json.dumps(c['output'])}  [{c['ms']} ms]")
        print(f"reply  : {result.reply}  ({result.audio_seconds:.1f} s of audio, {result.status})")
        for e in result.errors:
            print(f"error  : {e.data.get('error')}")
        if result.latency:
            print(result.latency.table())
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="ws://127.0.0.1:8250/v1/realtime")
    p.add_argument("--key", default=None)
    p.add_argument("--database", default=None, help="PostgreSQL DSN (default: $DATABASE_URL, else the embedded one)")
    q = p.add_mutually_exclusive_group(required=True)
    q.add_argument("--wav", help="a spoken question (any rate)")
    q.add_argument("--text", help="a typed question instead")
    p.add_argument("--timeout", type=float, default=90.0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    raise SystemExit(asyncio.run(main(p.parse_args())))
