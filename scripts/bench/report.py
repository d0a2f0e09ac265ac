"""Pictures and the HTML report of a replay run (matplotlib, Agg): per-turn waterfalls against the
budget, CDFs of ttft and voice_to_voice per concurrency, and latency/throughput against N."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from scripts.bench.stats import _get, format_table, summarize
from sub250.metrics.timeline import BUDGET_MS, CEILINGS

STACK = ("gateway", "asr_finalize", "retrieval", "prompt", "prefill")
COLORS = {"gateway": "#8da0cb", "asr_finalize": "#fc8d62", "retrieval": "#66c2a5", "prompt": "#e78ac3",
          "prefill": "#a6d854", "other": "#d9d9d9", "network_rtt": "#b3b3b3"}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def waterfall(turns: list[dict], path: Path, sample: int = 12) -> Path:
    plt = _plt()
    ok = [t for t in turns if t.get("latency") and _get(t, "ttft") is not None][:sample]
    fig, ax = plt.subplots(figsize=(10, 0.45 * max(3, len(ok)) + 1.2))
    for row, t in enumerate(ok):
        left = 0.0
        parts = [(name, _get(t, name) or 0.0) for name in ("network_rtt",) + STACK]
        ttft = _get(t, "ttft") or 0.0
        other = max(0.0, ttft - sum(v for n, v in parts if n != "network_rtt" and n != "gateway"))
        for name, value in parts + [("other", other)]:
            over = name in CEILINGS and value > CEILINGS[name]
            ax.barh(row, value, left=left, color=COLORS[name], edgecolor="red" if over else "white",
                    linewidth=1.5 if over else 0.5, label=name if row == 0 else None)
            left += value
        ax.text(left + 3, row, f"{left:.0f} ms", va="center", fontsize=8)
    ax.axvline(BUDGET_MS, color="red", linestyle="--", label="250 ms budget")
    ax.set_yticks(range(len(ok)), [f"{t['label']} s{t['session']} t{t['turn']} {t['utterance']}" for t in ok],
                  fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms (ttft_client = network_rtt + server ttft; red edge: over its ceiling)")
    ax.set_title("Per-turn waterfall against the 250 ms budget")
    ax.legend(fontsize=7, loc="lower right", ncols=4)
    return _save(fig, path)


def cdfs(turns: list[dict], path: Path) -> Path:
    import numpy as np

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    groups = sorted({(t["label"], t["sessions"]) for t in turns})
    for ax, metric in zip(axes, ("ttft", "voice_to_voice")):
        for label, n in groups:
            vals = np.sort([v for t in turns if t["label"] == label and t["sessions"] == n
                            and (v := _get(t, metric)) is not None])
            if vals.size:
                ax.step(vals, np.arange(1, vals.size + 1) / vals.size, where="post", label=f"{label} N={n}")
        if metric == "ttft":
            ax.axvline(BUDGET_MS, color="red", linestyle="--", linewidth=1)
        ax.set_xlabel(f"{metric} (ms)")
        ax.set_ylabel("share of turns")
        ax.set_title(f"CDF of {metric}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


def sweep(turns: list[dict], path: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax2 = ax.twinx()
    for i, label in enumerate(sorted({t["label"] for t in turns})):
        color = f"C{i}"
        ns = sorted({t["sessions"] for t in turns if t["label"] == label})
        p50, p95, tput = [], [], []
        for n in ns:
            sel = [t for t in turns if t["label"] == label and t["sessions"] == n]
            s = summarize(sel)["spans"]["ttft"]
            p50.append(s["p50"])
            p95.append(s["p95"])
            times = [t["started_at"] for t in sel]
            span = (max(times) - min(times)) if len(times) > 1 else 0
            tput.append((len(sel) - 1) / span * 60 if span else 0)
        ax.plot(ns, p50, marker="o", color=color, label=f"{label} ttft p50")
        ax.plot(ns, p95, marker="^", linestyle="--", color=color, label=f"{label} ttft p95")
        ax2.plot(ns, tput, marker="s", linestyle=":", color=color, alpha=0.6, label=f"{label} turns/min")
    ax.axhline(BUDGET_MS, color="red", linestyle=":", linewidth=1)
    ax.set_xlabel("concurrent sessions N")
    ax.set_ylabel("ttft (ms)")
    ax2.set_ylabel("turns per minute")
    ax.set_title("Latency and throughput against concurrency")
    ax.legend(fontsize=7, loc="upper left")
    ax2.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def html_report(title: str, tables: list[str], images: list[Path], path: Path, command: str) -> Path:
    parts = [f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>",
             "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto}"
             "pre{background:#f6f6f6;padding:1em;overflow:auto}img{max-width:100%}</style>",
             f"<h1>{html.escape(title)}</h1><p>Command: <code>{html.escape(command)}</code></p>"]
    for t in tables:
        parts.append(f"<pre>{html.escape(t)}</pre>")
    for img in images:
        data = base64.b64encode(img.read_bytes()).decode()
        parts.append(f"<h2>{html.escape(img.stem)}</h2><img alt='{img.stem}' src='data:image/png;base64,{data}'>")
    path.write_text("\n".join(parts))
    return path


def comparison_table(normal: dict[str, Any], baseline: dict[str, Any], label: str = "baseline") -> str:
    lines = [f"{'span (p50 ms)':<24}{'normal':>10}{label[:16]:>17}{'ratio':>8}"]
    for name, s in normal["spans"].items():
        b = baseline["spans"].get(name, {})
        if s["p50"] is None or not b or b.get("p50") is None:
            continue
        ratio = s["p50"] / b["p50"] if b["p50"] else float("nan")
        lines.append(f"{name:<24}{s['p50']:>10.1f}{b['p50']:>17.1f}{ratio:>8.2f}")
    return "\n".join(lines)


__all__ = ["cdfs", "comparison_table", "format_table", "html_report", "sweep", "waterfall"]
