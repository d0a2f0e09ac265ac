#!/usr/bin/env python
"""Tool-call accuracy: the right tool with valid arguments, and no tool when none is needed (issue #14).

    .venv/bin/python scripts/bench_tools.py [--configs llm,embedding@0.45,embedding@0.5] [--out reports/tools]
    SUB250_PROFILE=cpu-gemma .venv/bin/python scripts/bench_tools.py ...   # another profile's model

Loads the profile's embedder and LLM once, then asks every request of tests/data/tools/requests.jsonl (24 that
need one of the example support tools, 16 that need none; see its README) through the server's own
ToolCaller, every configuration in turn for each request (interleaved, so they share the machine's state).
A configuration is ``llm`` (the model picks the tool and writes the call under a JSON schema of every tool)
or ``embedding@T`` (the question's MiniLM vector - retrieval's, as in the server - against the tools' texts
picks, at cosine >= T; the model writes only the arguments), ``embedding@T/M`` (the same, and the tool must
come within M of the best knowledge-base passage's cosine). ``profile`` is whatever the profile's ``[tools]``
says. ``+written`` after any of them: the model writes every argument, none is read from the question
(``[tools] read_arguments = false``). Needs the knowledge base ingested (``serve`` does it on its first run). Prints the table,
writes rows.jsonl and summary.json under --out. Scoring: scripts/bench/tools.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench.tools import load_requests, load_tools, score, summarize, table  # noqa: E402


def policy_of(name: str, base):
    if name.endswith("+written"):  # the same, with every argument written by the model (no reading)
        return replace(policy_of(name.removesuffix("+written"), base), read_arguments=False)
    if name == "profile":
        return base
    if name == "llm":
        return replace(base, selector="llm")
    if name.startswith("embedding@"):
        floor, _, margin = name.split("@", 1)[1].partition("/")
        return replace(base, selector="embedding", min_score=float(floor), kb_margin=float(margin) if margin else None)
    raise SystemExit(f"bench_tools: unknown config {name!r} (llm, embedding@T, embedding@T/M, profile; +written)")


async def main(args: argparse.Namespace) -> int:
    from sub250.config import Settings
    from sub250.protocol.tools import ToolChoice
    from sub250.session.tuning import PipelineTuning
    from sub250.stack import Stack
    from sub250.tools import ToolArgumentsError, ToolCaller

    settings = Settings.from_env()
    stack = Stack.from_settings(settings)
    tools, requests = load_tools(), load_requests()
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    await stack.start(("db", "embedder", "llm"), progress=lambda s: print(f"loading {s}…", file=sys.stderr))
    try:
        base = PipelineTuning.from_profile(stack.profile).tools
        callers = {n: ToolCaller(policy_of(n, base), stack.llm.stream, stack.tool_selector) for n in names}
        rows: list[dict] = []
        for i, req in enumerate(requests):
            found = await stack.retriever.retrieve(req.text)
            vector = found.vector
            kb = 1.0 - found.passages[0].distance if found.passages else None
            for name, caller in callers.items():
                t0 = time.perf_counter()
                invalid, called, arguments, detail = False, None, None, None
                try:
                    d = await caller.decide(req.text, vector, tools, ToolChoice(), f"bench-{i}-{name}", kb_score=kb)
                    if d.call is not None:
                        called, arguments = d.call.name, d.call.arguments
                    detail = d.report()
                except ToolArgumentsError as exc:
                    invalid, detail = True, {"error": str(exc)}
                ms = (time.perf_counter() - t0) * 1000
                row = {"config": name, "text": req.text, "expected": req.tool, "called": called,
                       "arguments": arguments, "ms": ms, "decision": detail,
                       **score(req, called, arguments, tools, invalid)}
                rows.append(row)
                mark = "ok " if row["args_right"] else "BAD"
                print(f"{mark} {name:<16} {ms:6.0f} ms  {req.text[:48]!r:<52} -> {called} {arguments or ''}",
                      file=sys.stderr)
        summaries = {n: summarize([r for r in rows if r["config"] == n]) for n in names}
    finally:
        await stack.close()
    (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "summary.json").write_text(json.dumps({"command": " ".join(sys.argv), "profile": stack.profile.name,
                                                  "summaries": summaries}, indent=2))
    print(f"profile {stack.profile.name}, {len(requests)} requests\n{table(summaries)}\nreport: {out}")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="llm,embedding@0.2,embedding@0.3,embedding@0.2/0.05,embedding@0.2/0.1,profile")
    p.add_argument("--out", default="reports/tools")
    raise SystemExit(asyncio.run(main(p.parse_args())))
