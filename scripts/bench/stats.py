"""Summary statistics of a replay run, from its JSON-lines turns (pure functions; unit-tested)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from sub250.metrics.timeline import BESIDE, SPANS

CLIENT = ("client_ttft_client", "client_voice_to_voice", "client_rtt", "client_audio_stall")


def percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """p50/p95/p99 per span, budget share, the stage that most often breaks it, WER, losses, clock check."""
    ok = [t for t in turns if t.get("status") == "completed" and t.get("latency")]
    failed = [t for t in turns if t.get("status") != "completed"]
    spans: dict[str, dict[str, float | None]] = {}
    for name in SPANS + BESIDE + CLIENT:
        vals = [v for t in ok if (v := _get(t, name)) is not None]
        spans[name] = {"n": len(vals), "p50": percentile(vals, 50), "p95": percentile(vals, 95),
                       "p99": percentile(vals, 99)}
    verdicts = [t["latency"].get("meets_budget") for t in ok if t["latency"].get("meets_budget") is not None]
    over = Counter(stage for t in ok for stage in t["latency"].get("over_budget", []))
    diffs_ttft = [abs(_get(t, "client_ttft_client") - _get(t, "ttft_client")) for t in ok
                  if _get(t, "client_ttft_client") is not None and _get(t, "ttft_client") is not None]
    diffs_v2v = [abs(_get(t, "client_voice_to_voice") - _get(t, "voice_to_voice")) for t in ok
                 if _get(t, "client_voice_to_voice") is not None and _get(t, "voice_to_voice") is not None]
    rtts = [v for t in ok if (v := _get(t, "network_rtt")) is not None]
    lookups = Counter(t["latency"].get("retrieval_cache") for t in ok if t["latency"].get("retrieval_cache"))
    asked = sum(lookups[r] for r in ("exact", "near", "miss"))
    prefix = [(t["latency"].get("prefix_cache") or {}) for t in ok]
    prompt_tok = sum(p.get("prompt_tokens") or 0 for p in prefix if p.get("cached_tokens") is not None)
    cached_tok = sum(p.get("cached_tokens") or 0 for p in prefix if p.get("cached_tokens") is not None)
    return {
        "turns": len(turns),
        "completed": len(ok),
        "failed": len(failed),
        "failures": Counter(t.get("status") or "lost" for t in failed),
        "spans": spans,
        "met_budget_share": (sum(verdicts) / len(verdicts)) if verdicts else None,
        "over_budget_by_stage": dict(over.most_common()),
        "most_often_over": over.most_common(1)[0][0] if over else None,
        "wer": wer(ok),
        "query_cache": {"lookups": dict(lookups), "hit_rate": (lookups["exact"] + lookups["near"]) / asked
                        if asked else None},
        "prefix_cache": {"prompt_tokens": prompt_tok, "cached_tokens": cached_tok,
                         "hit_rate": cached_tok / prompt_tok if prompt_tok else None},
        "clock_agreement": {
            "ttft_client_abs_diff_p50": percentile(diffs_ttft, 50),
            "voice_to_voice_abs_diff_p50": percentile(diffs_v2v, 50),
            "network_rtt_p50": percentile(rtts, 50),
        },
    }


def _get(turn: dict[str, Any], name: str) -> float | None:
    if name in CLIENT:
        return turn.get("client", {}).get(name[len("client_"):])
    lat = turn.get("latency") or {}
    v = (lat.get("spans") or {}).get(name)
    if v is None:
        v = (lat.get("beside") or {}).get(name)
    return v


def wer(turns: list[dict[str, Any]]) -> dict[str, float | None]:
    """Word error rate against references, per kind of audio and overall (Whisper's normalizer on both sides)."""
    import jiwer
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

    norm = EnglishTextNormalizer({})
    out: dict[str, float | None] = {}
    groups: dict[str, list[tuple[str, str]]] = {}
    for t in turns:
        if t.get("reference"):
            groups.setdefault(t.get("kind", "all"), []).append((norm(t["reference"]), norm(t.get("transcript", ""))))
    allpairs = [p for g in groups.values() for p in g]
    for kind, pairs in list(groups.items()) + [("all", allpairs)]:
        refs = [r for r, _ in pairs if r]
        hyps = [h for r, h in pairs if r]
        out[kind] = float(jiwer.wer(refs, hyps)) if refs else None
    return out


def format_table(summary: dict[str, Any], title: str = "") -> str:
    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [title] if title else []
    lines.append(f"{'span':<24}{'n':>5}{'p50':>9}{'p95':>9}{'p99':>9}")
    for name, s in summary["spans"].items():
        if s["n"]:
            lines.append(f"{name:<24}{s['n']:>5}{f(s['p50']):>9}{f(s['p95']):>9}{f(s['p99']):>9}")
    share = summary["met_budget_share"]
    lines.append(f"turns: {summary['turns']} ({summary['completed']} completed, {summary['failed']} failed/lost)")
    lines.append(f"met the 250 ms budget: {'-' if share is None else f'{share:.0%}'}; most often over: "
                 f"{summary['most_often_over'] or '-'} {summary['over_budget_by_stage'] or ''}")
    w = summary["wer"]
    lines.append("WER: " + ", ".join(f"{k} {v:.1%}" for k, v in w.items() if v is not None))
    q, pc = summary.get("query_cache") or {}, summary.get("prefix_cache") or {}
    if q.get("hit_rate") is not None or pc.get("hit_rate") is not None:
        qr = "-" if q.get("hit_rate") is None else f"{q['hit_rate']:.0%} {q.get('lookups')}"
        pr = "-" if pc.get("hit_rate") is None else f"{pc['hit_rate']:.0%} of {pc['prompt_tokens']} prompt tokens"
        lines.append(f"query cache hit rate: {qr}; prefix cache hit rate: {pr}")
    c = summary["clock_agreement"]
    lines.append(f"client vs server clocks: |ttft_client| diff p50 {f(c['ttft_client_abs_diff_p50'])} ms, "
                 f"|voice_to_voice| diff p50 {f(c['voice_to_voice_abs_diff_p50'])} ms "
                 f"(network_rtt p50 {f(c['network_rtt_p50'])} ms)")
    return "\n".join(lines)
