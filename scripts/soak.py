#!/usr/bin/env python
"""Soak benchmark: N concurrent sessions replaying speech for a while; does the server stay bounded?

    .venv/bin/python scripts/soak.py [--url ws://127.0.0.1:8250/v1/realtime] [--key KEY] [--pid SERVER_PID]
        [--sessions 8] [--minutes 10] [--sample-s 60] [--rss-every-s 5] [--corpus all] [--out reports/soak-...]

Each session replays the corpus (the replay benchmark's runner: real-time pace, one turn after another,
the server's final ``sub250.turn.latency`` reports kept), for ``--minutes`` (fractions allowed). Every
``--sample-s`` seconds the server is sampled: RSS and open FDs (from ``/proc/<pid>`` with ``--pid``, else
``process_resident_memory_bytes`` / ``process_open_fds`` from ``/metrics``; with ``--pid`` also the RSS's
parts, ``RssAnon`` the heap and stacks and ``RssFile`` the mapped files' pages, and the threads), asyncio
tasks and sessions open (``/metrics``); and every ``--rss-every-s`` seconds the RSS (and RssAnon) alone,
for each interval's median and highest. Per interval: turns sent / completed / failed, ttft and
voice_to_voice p50/p95; at the end the totals (lost turns), RSS growth after the first interval in %, FD and task growth, and what
is left once every session closed. Writes soak.json, turns.jsonl, table.txt and soak.png under --out.

Bounded: at most 32 sessions and 120 minutes, loopback servers only; sessions stop starting turns at the
deadline, turns in flight get --timeout more, then whatever is left is cancelled. Ctrl-C: finish the turns
in flight and write the report (twice: stop now). Exit status 1 when a turn was lost, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench import soak  # noqa: E402
from scripts.bench.options import add_server_options, corpus, default_key  # noqa: E402
from scripts.bench.probe import Probe, mib, require_loopback  # noqa: E402
from scripts.bench.replay import ReplayConfig, run_replay, write_jsonl  # noqa: E402
from scripts.bench.stats import _get, percentile  # noqa: E402

MAX_SESSIONS = 32
MAX_MINUTES = 120.0
#: After the last sessions ended: how long to let the server settle before the "after" sample.
SETTLE_S = 3.0


async def main(args: argparse.Namespace) -> int:
    require_loopback(args.url)
    if not 1 <= args.sessions <= MAX_SESSIONS:
        raise SystemExit(f"soak: --sessions must be 1..{MAX_SESSIONS}")
    if not 0 < args.minutes <= MAX_MINUTES:
        raise SystemExit(f"soak: --minutes must be in (0, {MAX_MINUTES:.0f}]")
    if args.rss_every_s <= 0:
        raise SystemExit("soak: --rss-every-s must be positive")
    if args.sample_s <= 0:
        raise SystemExit("soak: --sample-s must be positive")
    utts = corpus(args.corpus)
    duration = args.minutes * 60
    count = max(1, math.ceil(duration / args.sample_s - 1e-9))
    out = Path(args.out or f"reports/soak-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    key = None if args.no_key else args.key or default_key()
    turns: list[dict] = []
    samples: list[dict] = []
    rss_trace: list[tuple[float, float]] = []
    anon_trace: list[tuple[float, float]] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    running: list[asyncio.Task] = []
    cancelled = False

    def interrupt() -> None:
        nonlocal cancelled
        if stop.is_set():
            cancelled = True
            for task in running:
                task.cancel()
        else:
            print("\nstopping after the turns in flight (Ctrl-C again to stop now)…", file=sys.stderr)
            stop.set()

    loop.add_signal_handler(signal.SIGINT, interrupt)
    (out / "turns.jsonl").write_text("")

    async with Probe(args.url, args.pid) as probe:
        start_wall = time.time() - (time.monotonic() - probe.t0)

        def sink(record: dict) -> None:
            turns.append(record)
            with (out / "turns.jsonl").open("a") as f:
                f.write(json.dumps(record) + "\n")

        async def sampler() -> None:
            for k in range(count):
                await asyncio.sleep(max(0.0, probe.t0 + (k + 1) * args.sample_s - time.monotonic()))
                s = await probe.sample()
                s["interval"] = k
                samples.append(s)
                done = [t for t in turns if t["started_at"] - start_wall < (k + 1) * args.sample_s]
                ttft = [v for t in done if t.get("status") == "completed" and (v := _get(t, "ttft")) is not None]
                p50 = percentile(ttft, 50)
                print(f"[{s['t']:.0f} s] {len(turns)} turns ({sum(t.get('status') != 'completed' for t in turns)} "
                      f"failed), ttft p50 {'-' if p50 is None else f'{p50:.0f}'} ms, RSS "
                      f"{mib(s.get('rss_bytes'))} MiB, FDs {s.get('open_fds')}, tasks {s.get('asyncio_tasks')}, "
                      f"sessions {s.get('sessions_open')}", file=sys.stderr)

        async def rss_tracer() -> None:
            while True:
                await asyncio.sleep(args.rss_every_s)
                s = await probe.sample()
                if s.get("rss_bytes") is not None:
                    rss_trace.append((time.time() - start_wall, s["rss_bytes"]))
                if s.get("rss_anon_bytes") is not None:
                    anon_trace.append((time.time() - start_wall, s["rss_anon_bytes"]))

        baseline = await probe.sample()
        baseline["interval"] = "baseline"
        samples.append(baseline)
        cfg = ReplayConfig(url=args.url, key=key, label="soak", sessions=args.sessions, duration_s=duration,
                           timeout_s=args.timeout)
        sampling = asyncio.ensure_future(sampler())
        tracing = asyncio.ensure_future(rss_tracer())
        replay = asyncio.ensure_future(run_replay(cfg, utts, sink, stop))
        running[:] = [replay, sampling]
        error: BaseException | None = None
        try:
            # bounded: the deadline, then each session's turn in flight (--timeout), then a margin
            await asyncio.wait_for(replay, duration + args.timeout + 30)
        except asyncio.TimeoutError:
            print("soak: sessions still running past the deadline + timeout: cancelled", file=sys.stderr)
            cancelled = True
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():
                raise  # this script itself is being cancelled, not just the sessions (second Ctrl-C)
            cancelled = True
        except Exception as exc:  # reported below, after the partial report is written
            error = exc
        finally:
            replay.cancel()
            sampling.cancel()
            tracing.cancel()
            await asyncio.gather(tracing, return_exceptions=True)
            _, sampled = await asyncio.gather(replay, sampling, return_exceptions=True)
            if isinstance(sampled, Exception) and error is None:
                error = sampled  # a bug in the sampler: reported below, after the partial report
        await asyncio.sleep(SETTLE_S)
        after = await probe.sample()
        after["interval"] = "after"
        samples.append(after)

    rows = soak.interval_rows(turns, samples, start_wall=start_wall, interval_s=args.sample_s, count=count,
                              rss_trace=rss_trace, anon_trace=anon_trace)
    report = {
        "command": " ".join(sys.argv),
        "config": {"url": args.url, "sessions": args.sessions, "minutes": args.minutes, "sample_s": args.sample_s,
                   "corpus": args.corpus, "utterances": len(utts), "pid": args.pid, "timeout_s": args.timeout},
        "started_at": start_wall,
        "stopped_early": stop.is_set() or cancelled,
        "cancelled": cancelled,
        "intervals": rows,
        "totals": soak.totals(turns),
        "growth": soak.growth(rows, baseline, after),
        "samples": samples,
        "rss_trace": [[round(t, 3), v] for t, v in rss_trace],
        "anon_trace": [[round(t, 3), v] for t, v in anon_trace],
    }
    write_jsonl(out / "turns.jsonl", turns)
    (out / "soak.json").write_text(json.dumps(report, indent=2))
    table = soak.format_table(report)
    (out / "table.txt").write_text(table + "\n")
    try:
        soak.plot(report, out / "soak.png")
    except ImportError as exc:
        print(f"soak: no plot ({exc}; install matplotlib)", file=sys.stderr)
    print(table)
    print(f"\nreport: {out}/soak.json, {out}/soak.png", file=sys.stderr)
    if error is not None:
        raise error
    if report["totals"]["lost"]:
        print(f"soak: {report['totals']['lost']} of {report['totals']['sent']} turns lost", file=sys.stderr)
        return 1
    return 130 if report["stopped_early"] else 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_options(p, pid_help="the server's process id: RSS and FDs from /proc (else from /metrics)")
    p.add_argument("--sessions", type=int, default=8, help=f"concurrent sessions (at most {MAX_SESSIONS})")
    p.add_argument("--minutes", type=float, default=10.0, help=f"how long (fractions allowed; at most {MAX_MINUTES:.0f})")
    p.add_argument("--rss-every-s", type=float, default=5.0,
                   help="seconds between RSS readings within an interval (its median and highest)")
    p.add_argument("--sample-s", type=float, default=60.0, help="seconds per interval (a server sample at each end)")
    p.add_argument("--corpus", default="all", help="synthetic, real, all, a folder of WAVs or a JSON manifest")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one reply")
    p.add_argument("--out", help="folder for the report (default reports/soak-<time>)")
    raise SystemExit(asyncio.run(main(p.parse_args())))
