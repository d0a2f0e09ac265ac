#!/usr/bin/env python
"""Measure the cosine threshold at which a cached retrieval may be reused for another question.

For every corpus question (the final transcript) it builds what the pipeline sees before the commit —
partial transcripts (the question without its last 1-3 words) and a filler-word variant — and pairs every
question with every other (distinct questions). For each pair it measures the embedding cosine and whether
the two top-k passage sets are the same. A threshold is safe when no pair at or above it has different
passages; the script prints, per threshold, how many pairs would be reused and how many of those wrongly,
and recommends the lowest safe threshold (plus a margin), written with every pair to a JSON report.

    .venv/bin/python docs/lab/probes/measure_query_reuse.py [--k 3] [--out reports/query_reuse.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))


def variants(question: str) -> list[tuple[str, str]]:
    words = question.rstrip("?.! ").split()
    out = []
    for drop in (1, 2, 3):
        if len(words) - drop >= 4:
            out.append((f"partial-{drop}", " ".join(words[:-drop])))
    out.append(("filler", "um, so " + question[0].lower() + question[1:]))
    return out


async def measure(k: int) -> dict:
    from sub250.config import Settings
    from sub250.stack import Stack

    stack = Stack.from_settings(Settings.from_env())
    await stack.start(("db", "embedder"))
    try:
        questions = [q["text"] for q in json.loads((REPO / "scripts/corpus/questions.json").read_text())]
        texts = list(questions)
        kinds: list[tuple[str, int]] = [("final", i) for i in range(len(questions))]
        for i, q in enumerate(questions):
            for kind, text in variants(q):
                texts.append(text)
                kinds.append((kind, i))
        vecs = await asyncio.to_thread(stack.embedder.embed, texts)
        tops, firsts = [], []
        for v in vecs:
            found = await stack.store.search(v, k)
            tops.append(frozenset(p.chunk_id for p in found))
            firsts.append(found[0].chunk_id if found else None)
    finally:
        await stack.close()
    n = len(questions)
    pairs = []
    for j in range(n, len(texts)):  # a variant vs its own final question
        kind, i = kinds[j]
        pairs.append({"kind": kind, "a": texts[j], "b": texts[i], "cos": float(vecs[j] @ vecs[i]),
                      "same": tops[j] == tops[i], "same_top1": firsts[j] == firsts[i]})
    for i in range(n):  # distinct questions
        for j in range(i + 1, n):
            pairs.append({"kind": "distinct", "a": texts[i], "b": texts[j], "cos": float(vecs[i] @ vecs[j]),
                          "same": tops[i] == tops[j], "same_top1": firsts[i] == firsts[j]})
    grid = [round(t, 2) for t in np.arange(0.70, 1.0001, 0.01)]
    table = []
    for t in grid:
        reused = [p for p in pairs if p["cos"] >= t]
        wrong = [p for p in reused if not p["same"]]
        partial = [p for p in pairs if p["kind"].startswith("partial")]
        table.append({"threshold": t, "reused": len(reused), "wrong": len(wrong),
                      "wrong_top1": sum(1 for p in reused if not p["same_top1"]),
                      "partials_reused": sum(1 for p in partial if p["cos"] >= t), "partials": len(partial)})
    safe = [row["threshold"] for row in table if row["wrong"] == 0]
    lowest_safe = min(safe) if safe else None
    worst_wrong = max((p["cos"] for p in pairs if not p["same"]), default=None)
    recommended = None if lowest_safe is None else min(0.99, round(lowest_safe + 0.02, 2))
    return {"k": k, "questions": n, "pairs": pairs, "table": table, "lowest_safe": lowest_safe,
            "highest_cos_with_different_passages": worst_wrong, "recommended": recommended}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "reports" / "query_reuse.json"))
    args = ap.parse_args()
    result = asyncio.run(measure(args.k))
    print(f"{'threshold':>9} {'reused':>7} {'wrong top-k':>12} {'wrong top-1':>12} {'partials reused':>16}")
    for row in result["table"]:
        if row["threshold"] >= 0.8:
            print(f"{row['threshold']:>9.2f} {row['reused']:>7} {row['wrong']:>12} {row['wrong_top1']:>12} "
                  f"{row['partials_reused']:>8}/{row['partials']}")
    print(f"highest cosine between questions with different top-{args.k} passages: "
          f"{result['highest_cos_with_different_passages']:.4f}")
    print(f"lowest safe threshold: {result['lowest_safe']}; recommended (+0.02 margin): {result['recommended']}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
