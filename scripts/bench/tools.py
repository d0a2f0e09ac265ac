"""The tool-call benchmark's pure side: the requests, scoring, and the table (``scripts/bench_tools.py`` runs it).

``tests/data/tools/requests.jsonl`` (see its README): 24 requests that need one of the example support tools
(the right ``tool`` and the ``arguments`` values that must come out exactly) and 16 that need none.

Scoring, all automatic, per request and configuration:
- **tool right**: the tool called is the expected one (none for a no-tool request);
- **args right**: the tool is right and every expected argument has exactly its value; every other required
  argument is a non-empty string (free text such as ``reason``) - a call always passed the tool's schema, or
  it is an **invalid** (``ToolArgumentsError``), which counts as wrong;
- **ms**: the decision's time (selector and the model's JSON), in this process.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sub250.protocol.tools import FunctionTool, tools as parse_tools

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "tools"


@dataclass(frozen=True)
class Request:
    text: str
    tool: str | None
    arguments: dict[str, Any]


def load_tools(path: Path = DATA / "support_tools.json") -> tuple[FunctionTool, ...]:
    return parse_tools(json.loads(path.read_text()), "tools", None)


def load_requests(path: Path = DATA / "requests.jsonl") -> list[Request]:
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(Request(d["text"], d.get("tool"), d.get("arguments") or {}))
    return out


def score(request: Request, called: str | None, arguments: str | None, tools: tuple[FunctionTool, ...],
          invalid: bool = False) -> dict[str, bool]:
    """``called``/``arguments``: the decision's tool name and JSON text (None: no call)."""
    tool_right = not invalid and called == request.tool
    args_right = False
    if tool_right and request.tool is None:
        args_right = True
    elif tool_right and arguments is not None:
        args = json.loads(arguments)
        tool = next(t for t in tools if t.name == called)
        required = tool.parameters.get("required", [])
        args_right = all(args.get(k) == v for k, v in request.arguments.items()) and all(
            isinstance(args.get(k), str) and args[k].strip() for k in required if k not in request.arguments)
    return {"tool_right": tool_right, "args_right": args_right, "invalid": invalid}


def _pct(rows: list[dict], key: str) -> float | None:
    return 100.0 * sum(r[key] for r in rows) / len(rows) if rows else None


def summarize(rows: list[dict]) -> dict[str, Any]:
    """One configuration's rows -> its figures."""
    needs = [r for r in rows if r["expected"] is not None]
    none = [r for r in rows if r["expected"] is None]
    ms = sorted(r["ms"] for r in rows)
    return {
        "requests": len(rows), "need_tool": len(needs), "need_none": len(none),
        "tool_right_pct": _pct(needs, "tool_right"), "args_right_pct": _pct(needs, "args_right"),
        "declined_pct": _pct(none, "tool_right"), "accuracy_pct": _pct(rows, "args_right"),
        "invalid": sum(r["invalid"] for r in rows),
        "ms_p50": statistics.median(ms) if ms else None,
        "ms_p95": ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))] if ms else None,
    }


def table(summaries: dict[str, dict[str, Any]]) -> str:
    def f(v: float | None, spec: str = ".1f") -> str:
        return "-" if v is None else format(v, spec)

    lines = [f"{'config':<22}{'tool right':>11}{'+ args':>8}{'no tool ok':>11}{'all right':>10}{'invalid':>8}"
             f"{'ms p50':>8}{'p95':>7}",
             f"{'':<22}{'(of 24)':>11}{'':>8}{'(of 16)':>11}"]
    for name, s in summaries.items():
        lines.append(f"{name:<22}{f(s['tool_right_pct']):>10}%{f(s['args_right_pct']):>7}%{f(s['declined_pct']):>10}%"
                     f"{f(s['accuracy_pct']):>9}%{s['invalid']:>8}{f(s['ms_p50'], '.0f'):>8}{f(s['ms_p95'], '.0f'):>7}")
    return "\n".join(lines)
