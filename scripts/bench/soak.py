"""The soak benchmark's report (``scripts/soak.py``): turns and server samples folded into intervals, the
totals, and the growth of the server's RSS, open FDs and asyncio tasks; a table and a plot. Pure functions
of the turn records (as ``scripts/bench/replay.py`` writes them) and the probe's samples (``scripts/bench/probe.py``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from scripts.bench.probe import mib
from scripts.bench.stats import _get, percentile

#: Sample figures carried into each interval's row.
SAMPLED = ("rss_bytes", "rss_anon_bytes", "rss_file_bytes", "threads", "open_fds", "asyncio_tasks", "sessions_open")


def _pcts(values: list[float]) -> tuple[float | None, float | None]:
    return percentile(values, 50), percentile(values, 95)


def error_codes(turns: list[dict[str, Any]]) -> dict[str, int]:
    """``error`` events the sessions got during their turns, by code (e.g. ``rate_limit_exceeded``: every
    session of one key shares its message rate), whether or not the turn completed."""
    return dict(Counter(e.get("code") or e.get("message") or "?" for t in turns for e in t.get("errors") or []))


def interval_rows(turns: list[dict[str, Any]], samples: list[dict[str, Any]], *, start_wall: float,
                  interval_s: float, count: int,
                  rss_trace: list[tuple[float, float]] | None = None,
                  anon_trace: list[tuple[float, float]] | None = None) -> list[dict[str, Any]]:
    """One row per interval of ``interval_s`` from ``start_wall`` (``time.time()``): the turns that started in
    it (sent, completed, failed; ttft and voice_to_voice p50/p95 from the server's final latency reports)
    and the server sample taken at its end (``sample["interval"] == k``; missing if the run stopped first).
    Turns that started after the last interval's end (none, unless the clock is off) count in the last.
    ``rss_trace``: ``(seconds since start, RSS bytes)`` read every few seconds; each row gets the median and
    the highest RSS of its interval (``rss_median``, ``rss_max``): the RSS of a loaded server swings by
    hundreds of MiB within a minute, so one sample at an interval's end says little about growth.
    ``anon_trace``: the same for ``RssAnon`` (the heap and stacks, without mapped files): ``anon_median``."""
    rows = []
    by_interval = {s["interval"]: s for s in samples if isinstance(s.get("interval"), int)}
    for k in range(count):
        lo, hi = k * interval_s, (k + 1) * interval_s
        sel = [t for t in turns if lo <= t["started_at"] - start_wall < hi
               or (k == count - 1 and t["started_at"] - start_wall >= hi)
               or (k == 0 and t["started_at"] - start_wall < 0)]
        ok = [t for t in sel if t.get("status") == "completed"]
        ttft = [v for t in ok if (v := _get(t, "ttft")) is not None]
        v2v = [v for t in ok if (v := _get(t, "voice_to_voice")) is not None]
        row: dict[str, Any] = {"interval": k, "t_end_s": round(hi, 3), "sent": len(sel), "completed": len(ok),
                               "failed": len(sel) - len(ok), "errors": error_codes(sel)}
        row["ttft_p50"], row["ttft_p95"] = _pcts(ttft)
        row["v2v_p50"], row["v2v_p95"] = _pcts(v2v)
        sample = by_interval.get(k)
        for key in SAMPLED:
            row[key] = None if sample is None else sample.get(key)
        inside = sorted(v for t, v in rss_trace or [] if lo <= t < hi)
        row["rss_median"] = percentile(inside, 50) if inside else None
        row["rss_max"] = inside[-1] if inside else None
        anon = sorted(v for t, v in anon_trace or [] if lo <= t < hi)
        row["anon_median"] = percentile(anon, 50) if anon else None
        rows.append(row)
    return rows


def totals(turns: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [t for t in turns if t.get("status") == "completed"]
    failures = Counter(t.get("status") or "lost" for t in turns if t.get("status") != "completed")
    ttft = [v for t in ok if (v := _get(t, "ttft")) is not None]
    v2v = [v for t in ok if (v := _get(t, "voice_to_voice")) is not None]
    out: dict[str, Any] = {"sent": len(turns), "completed": len(ok), "lost": len(turns) - len(ok),
                           "failures": dict(failures), "errors": error_codes(turns)}
    out["ttft_p50"], out["ttft_p95"] = _pcts(ttft)
    out["v2v_p50"], out["v2v_p95"] = _pcts(v2v)
    return out


def _delta(a: dict[str, Any] | None, b: dict[str, Any] | None, key: str) -> float | None:
    if a is None or b is None or a.get(key) is None or b.get(key) is None:
        return None
    return b[key] - a[key]


def growth(rows: list[dict[str, Any]], baseline: dict[str, Any] | None,
           after: dict[str, Any] | None) -> dict[str, Any]:
    """From the end of the first interval (warm: engines used, sessions open) to the end of the last: RSS in %
    and bytes, FDs and tasks in counts; and what is left once every session closed, against the baseline
    taken before the first (``after_vs_baseline``: a leak shows as sessions, tasks or FDs that stay)."""
    sampled = [r for r in rows if r.get("rss_bytes") is not None]
    first, last = (sampled[0], sampled[-1]) if len(sampled) >= 2 else (None, None)
    rss = _delta(first, last, "rss_bytes")
    traced = [r for r in rows if r.get("rss_max") is not None]
    t_first, t_last = (traced[0], traced[-1]) if len(traced) >= 2 else (None, None)

    def pct(key: str) -> float | None:
        d = _delta(t_first, t_last, key)
        return None if d is None else d / t_first[key] * 100

    def sample_pct(key: str) -> float | None:
        d = _delta(first, last, key)
        return None if d is None else d / first[key] * 100

    return {
        # the first interval's median / highest RSS against the last one's (the trace)
        "rss_median_pct": pct("rss_median"),
        "rss_max_pct": pct("rss_max"),
        # the heap and stacks alone (RssAnon), on the trace's medians; the mapped files' pages (RssFile) at the
        # intervals' ends
        "anon_median_pct": pct("anon_median"),
        "rss_file_pct": sample_pct("rss_file_bytes"),
        "rss_file_bytes": _delta(first, last, "rss_file_bytes"),
        "threads": _delta(first, last, "threads"),
        "from_interval": None if first is None else first["interval"],
        "to_interval": None if last is None else last["interval"],
        "rss_pct": None if rss is None else rss / first["rss_bytes"] * 100,
        "rss_bytes": rss,
        "open_fds": _delta(first, last, "open_fds"),
        "asyncio_tasks": _delta(first, last, "asyncio_tasks"),
        "after_vs_baseline": {key: _delta(baseline, after, key) for key in SAMPLED},
    }


def _f(v: float | None, spec: str = ".0f") -> str:
    return "-" if v is None else format(v, spec)


def format_table(report: dict[str, Any]) -> str:
    lines = [f"{'interval end':>12}{'sent':>6}{'ok':>5}{'fail':>6}{'ttft p50':>10}{'p95':>7}{'v2v p50':>9}{'p95':>7}"
             f"{'RSS MiB':>10}{'median':>8}{'max':>8}{'anon':>7}{'file':>6}{'thr':>5}{'FDs':>6}{'tasks':>7}"
             f"{'sessions':>9}{'errors':>8}"]
    for r in report["intervals"]:
        lines.append(f"{r['t_end_s']:>11.0f}s{r['sent']:>6}{r['completed']:>5}{r['failed']:>6}{_f(r['ttft_p50']):>10}"
                     f"{_f(r['ttft_p95']):>7}{_f(r['v2v_p50']):>9}{_f(r['v2v_p95']):>7}{mib(r['rss_bytes']):>10}"
                     f"{mib(r.get('rss_median')):>8}{mib(r.get('rss_max')):>8}{mib(r.get('anon_median')):>7}"
                     f"{mib(r.get('rss_file_bytes')):>6}{_f(r.get('threads')):>5}"
                     f"{_f(r['open_fds']):>6}{_f(r['asyncio_tasks']):>7}{_f(r['sessions_open']):>9}"
                     f"{sum(r['errors'].values()):>8}")
    t, g = report["totals"], report["growth"]
    failures = f" {t['failures']}" if t["failures"] else ""
    lines.append(f"turns: {t['completed']} completed of {t['sent']} sent, {t['lost']} lost{failures}; "
                 f"ttft p50 {_f(t['ttft_p50'])} / p95 {_f(t['ttft_p95'])} ms, voice_to_voice p50 "
                 f"{_f(t['v2v_p50'])} / p95 {_f(t['v2v_p95'])} ms")
    if t["errors"]:
        lines.append(f"error events during turns: {t['errors']}")
    if g["rss_pct"] is None:
        lines.append("growth: fewer than two sampled intervals")
    else:
        lines.append(f"growth from interval {g['from_interval'] + 1} to {g['to_interval'] + 1}: RSS "
                     f"{g['rss_pct']:+.1f}% ({g['rss_bytes'] / (1 << 20):+.1f} MiB), open FDs {_f(g['open_fds'], '+.0f')}, "
                     f"asyncio tasks {_f(g['asyncio_tasks'], '+.0f')}")
    if g.get("rss_max_pct") is not None:
        lines.append(f"RSS over the trace, first interval against the last: median {g['rss_median_pct']:+.1f}%, "
                     f"highest {g['rss_max_pct']:+.1f}%")
    if g.get("anon_median_pct") is not None:
        lines.append(f"its parts: the heap and stacks (RssAnon, median) {g['anon_median_pct']:+.1f}%, the mapped "
                     f"files (RssFile, interval ends) {_f(g.get('rss_file_pct'), '+.1f')}%; threads "
                     f"{_f(g.get('threads'), '+.0f')}")
    a = g["after_vs_baseline"]
    rss_after = "-" if a["rss_bytes"] is None else f"{a['rss_bytes'] / (1 << 20):+.1f} MiB"
    lines.append(f"after every session closed, against before the first: RSS {rss_after}, open FDs "
                 f"{_f(a['open_fds'], '+.0f')}, asyncio tasks {_f(a['asyncio_tasks'], '+.0f')}, sessions open "
                 f"{_f(a['sessions_open'], '+.0f')}")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> Path:
    """RSS, FDs and tasks over time (every sample), and ttft / voice_to_voice percentiles per interval."""
    from scripts.bench.report import _plt, _save

    plt = _plt()
    samples = [s for s in report["samples"] if s.get("rss_bytes") is not None]
    rows = report["intervals"]
    fig, (ax_mem, ax_lat) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    ts = [s["t"] for s in samples]
    ax_mem.plot(ts, [s["rss_bytes"] / (1 << 20) for s in samples], marker="o", color="C0", label="RSS (MiB)")
    ax_mem.set_ylabel("RSS (MiB)")
    ax_mem.grid(alpha=0.3)
    ax_n = ax_mem.twinx()
    for key, color in (("open_fds", "C1"), ("asyncio_tasks", "C2"), ("sessions_open", "C3")):
        pts = [(s["t"], s[key]) for s in samples if s.get(key) is not None]
        if pts:
            ax_n.plot(*zip(*pts), marker=".", linestyle="--", color=color, label=key.replace("_", " "))
    ax_n.set_ylabel("count")
    handles = ax_mem.get_legend_handles_labels()[0] + ax_n.get_legend_handles_labels()[0]
    ax_mem.legend(handles, [h.get_label() for h in handles], fontsize=8, loc="upper left")
    ax_mem.set_title(f"Soak: {report['config']['sessions']} sessions, {report['config']['minutes']} min "
                     f"(server process)")
    ends = [r["t_end_s"] for r in rows]
    for key, style, label in (("ttft_p50", "-o", "ttft p50"), ("ttft_p95", "--^", "ttft p95"),
                              ("v2v_p50", "-s", "voice_to_voice p50"), ("v2v_p95", "--v", "voice_to_voice p95")):
        pts = [(t, r[key]) for t, r in zip(ends, rows) if r[key] is not None]
        if pts:
            ax_lat.plot(*zip(*pts), style, label=label)
    ax_lat.set_xlabel("seconds since start (latency: turns started in the interval ending there)")
    ax_lat.set_ylabel("ms")
    ax_lat.grid(alpha=0.3)
    ax_lat.legend(fontsize=8, loc="upper left")
    return _save(fig, path)
