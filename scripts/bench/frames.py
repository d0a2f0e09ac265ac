"""Writing client frames that ``json.dumps`` alone cannot: a value may be :class:`Raw` JSON text put into the
frame as it is (a 5000-digit integer, ``NaN``), for the fuzz script and the parser's property tests."""

from __future__ import annotations

import json
from typing import Any


class Raw(str):
    """JSON text put into a frame as is (numbers ``json.dumps`` cannot write: 5000 digits, NaN)."""


def dumps(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value)  # str: non-ASCII and lone surrogates as \u escapes
