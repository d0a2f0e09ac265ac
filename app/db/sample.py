"""The support tools' sample rows (``support.*``, migration 0003's tables): made-up customers and orders for
scripts/support_agent.py and the tool tests (the order numbers of tests/data/tools/requests.jsonl).

Sample data of a fresh install only: :func:`sub250.rag.sample.load_sample_if_empty` puts them in with the sample
knowledge base, and only when the database holds no documents; here they go in only when every ``support.*``
table is empty, so a deployment's own rows are never mixed with made-up ones.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

_D = dt.date.fromisoformat

#: (order_number, customer, item, status, carrier, ordered_on, estimated_delivery)
ORDERS: tuple[tuple[str, str, str, str, str | None, dt.date, dt.date | None], ...] = (
    ("48213", "Maya Lindqvist", "Aero 2 air purifier", "shipped", "DHL", _D("2026-11-26"), _D("2026-12-03")),
    ("55102", "Tomas Berg", "Aero 2 air purifier", "delivered", "UPS", _D("2026-11-02"), _D("2026-11-06")),
    ("77001", "Priya Natarajan", "Aero replacement filter, two-pack", "processing", None, _D("2026-11-30"),
     _D("2026-12-05")),
    ("90210", "Jonas Weber", "Aero Mini air purifier", "shipped", "DPD", _D("2026-11-27"), _D("2026-12-02")),
    ("31337", "Ana Sousa", "Aero 2 air purifier", "delivered", "DHL", _D("2026-10-14"), _D("2026-10-18")),
    ("62048", "Lea Fischer", "Aero replacement filter", "shipped", "UPS", _D("2026-11-28"), _D("2026-12-04")),
    ("10457", "Sam Okafor", "Aero Mini air purifier", "delivered", "DPD", _D("2026-09-21"), _D("2026-09-25")),
    ("88231", "Noor Haddad", "Aero 2 air purifier", "processing", None, _D("2026-12-01"), _D("2026-12-08")),
    ("40400", "Elena Rossi", "Aero wall mount", "cancelled", None, _D("2026-11-20"), None),
    ("12345", "Kai Tanaka", "Aero 2 air purifier", "shipped", "GLS", _D("2026-11-29"), _D("2026-12-04")),
)

_EMPTY = ("SELECT NOT EXISTS (SELECT 1 FROM support.orders) AND NOT EXISTS (SELECT 1 FROM support.warranty_claims)"
          " AND NOT EXISTS (SELECT 1 FROM support.handoffs)")


async def load_support_sample(conn: Any) -> int:
    """Insert :data:`ORDERS` on an asyncpg connection when the ``support.*`` tables are all empty; return the
    number of rows inserted (0: the tables hold rows already, none were added)."""
    async with conn.transaction():
        if not await conn.fetchval(_EMPTY):
            return 0
        await conn.executemany(
            "INSERT INTO support.orders (order_number, customer, item, status, carrier, ordered_on,"
            " estimated_delivery) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (order_number) DO NOTHING",
            ORDERS,
        )
    return len(ORDERS)
