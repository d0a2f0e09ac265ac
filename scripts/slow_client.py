#!/usr/bin/env python
"""A never-reading client against a running server: is it cut off, does the server's memory stay bounded,
and does another session notice?

    .venv/bin/python scripts/slow_client.py [--url ws://127.0.0.1:8250/v1/realtime] [--key KEY] [--pid PID]
        [--turns 4] [--rounds 2] [--corpus all] [--rcvbuf 65536] [--out reports/slow-client.json]

Rounds of three phases, interleaved so that all see the same machine: *normal_only* (one normal session
replays --turns turns through the replay runner, as scripts/replay.py does), *with_reading* (the same turns
while one more session streams the same speech at real-time pace and reads what it gets: the control - a
talking caller costs CPU whether it reads or not) and *with_slow* (the same, but that session never reads its
socket: see scripts/bench/slow_client.py). What not reading costs the normal session is with_slow against
with_reading; --no-control leaves the middle phase out. The slow session starts --head-start-s before the normal turns, so its replies
are piling up while they run, and stays until the server closes it or --slow-max-s have passed.

The server is sampled every second (RSS: /proc/<pid> with --pid, else /metrics
``process_resident_memory_bytes``; the slow-client counters from /metrics). Reported: RSS before the slow
client, its peak, and after the slow client is gone; whether and when the server closed it and why
(``sub250_slow_client_closes_total{reason}``: outbox_full = close 1008 "client is not reading",
ping_timeout = close 1011), the close code the client got when it finally read; the reply audio deltas
the server dropped for it (``sub250_outbox_dropped_audio_total``); the normal session's ttft p50/p95
with and without it. Prints tables and writes JSON (--out). Loopback servers only; Ctrl-C stops after the
turns in flight and still writes the report. Exit status 1 when a normal turn failed, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench.options import add_server_options, corpus, default_key  # noqa: E402
from scripts.bench.probe import CLOSE_REASONS, Probe, mib, require_loopback  # noqa: E402
from scripts.bench.replay import ReplayConfig, run_replay  # noqa: E402
from scripts.bench.slow_client import NeverReadingClient, ReadingTalker, speech_frames  # noqa: E402
from scripts.bench.stats import _get, percentile  # noqa: E402

SAMPLE_S = 1.0
#: After the slow client has gone: how long before the "after" sample.
SETTLE_S = 3.0
LIMITS = {"turns": 50, "rounds": 10, "slow_max_s": 600.0}
PHASES = ("normal_only", "with_reading", "with_slow")


def latency(turns: list[dict]) -> dict[str, Any]:
    ok = [t for t in turns if t.get("status") == "completed"]
    out: dict[str, Any] = {"turns": len(turns), "completed": len(ok)}
    for name, key in (("ttft", "ttft"), ("ttft_client", "ttft_client"), ("voice_to_voice", "voice_to_voice")):
        values = [v for t in ok if (v := _get(t, key)) is not None]
        out[f"{name}_p50"], out[f"{name}_p95"] = percentile(values, 50), percentile(values, 95)
    return out


def closes(sample: dict) -> dict[str, float]:
    return {r: sample.get(f"slow_closes_{r}") or 0.0 for r in CLOSE_REASONS}


def _f(v: float | None, spec: str = ".0f") -> str:
    return "-" if v is None else format(v, spec)


def tables(report: dict) -> list[str]:
    head = (f"{'phase':<12}{'round':>6}{'turns':>6}{'ok':>4}{'ttft p50':>10}{'p95':>7}{'ttft_client p50':>16}{'p95':>7}"
            f"{'v2v p50':>9}{'p95':>7}")
    lat = ["== the normal session's latency (ms) ==", head]

    def row(name: str, rnd: str, s: dict) -> str:
        return (f"{name:<12}{rnd:>6}{s['turns']:>6}{s['completed']:>4}{_f(s['ttft_p50']):>10}{_f(s['ttft_p95']):>7}"
                f"{_f(s['ttft_client_p50']):>16}{_f(s['ttft_client_p95']):>7}{_f(s['voice_to_voice_p50']):>9}"
                f"{_f(s['voice_to_voice_p95']):>7}")

    for ph in report["phases"]:
        lat.append(row(ph["label"], str(ph["round"] + 1), ph["latency"]))
    for label, s in report["summary"].items():
        lat.append(row(label, "all", s))
    slow = ["== the other caller (with_reading: reads; with_slow: never reads) ==",
            f"{'phase':<13}{'round':>5}{'RSS before':>12}{'peak':>8}{'after':>8} MiB  {'server closed it':<34}{'client saw':<28}"
            f"{'dropped audio':>14}{'sent audio':>12}"]
    for ph in report["phases"]:
        s = ph.get("slow")
        if not s:
            continue
        closed = (f"at {s['server_closed_after_s']:.0f} s ({s['server_close_reason']})"
                  if s["server_closed_after_s"] is not None else f"no (kept {s['kept_s']:.0f} s)")
        d = s["drain"]
        saw = (f"{d['close_code']} {d['close_reason'] or ''}".strip() if d["ended"] else "still open") + \
            f", {d['messages']} msgs"
        slow.append(f"{ph['label']:<13}{ph['round'] + 1:>5}{mib(s['rss_before']):>12}{mib(s['rss_peak']):>8}{mib(s['rss_after']):>8}"
                    f"      {closed:<34}{saw:<28}{_f(s['dropped_audio']):>14}{s['audio_sent_s']:>11.0f}s")
    return ["\n".join(lat), "\n".join(slow)]


async def main(args: argparse.Namespace) -> int:
    require_loopback(args.url)
    for name, limit in LIMITS.items():
        if not 0 < getattr(args, name) <= limit:
            raise SystemExit(f"slow_client: --{name.replace('_', '-')} must be in (0, {limit}]")
    utts = corpus(args.corpus)
    half = len(utts) // 2
    slow_utts = utts[half:] + utts[:half]  # other questions than the normal session's, in another order
    key = None if args.no_key else args.key or default_key()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, lambda: (print("\nstopping after the turns in flight…", file=sys.stderr),
                                                    stop.set()))
    samples: list[dict] = []
    phases: list[dict] = []
    phase_label = ["start"]

    async with Probe(args.url, args.pid) as probe:
        async def sampler() -> None:
            k = 0
            while True:
                k += 1
                s = await probe.sample()
                s["phase"] = phase_label[0]
                samples.append(s)
                await asyncio.sleep(max(0.0, probe.t0 + k * SAMPLE_S - time.monotonic()))

        async def fresh(label: str) -> dict:
            s = await probe.sample()
            s["phase"] = label
            samples.append(s)
            return s

        async def normal(label: str, round_no: int) -> list[dict]:
            turns: list[dict] = []

            def sink(record: dict) -> None:
                turns.append(record)
                ttft = _get(record, "ttft") if record.get("latency") else None
                print(f"[{label} {round_no + 1}] turn {len(turns)}: {record['status']}, ttft "
                      f"{_f(ttft)} ms", file=sys.stderr)

            cfg = ReplayConfig(url=args.url, key=key, label=label, sessions=1, turns=args.turns,
                               timeout_s=args.timeout, first_turn=round_no * args.turns)
            await run_replay(cfg, utts, sink, stop)
            return turns

        async def with_slow(round_no: int, label: str = "with_slow") -> tuple[list[dict], dict]:
            reading = label == "with_reading"
            before = await fresh(f"{label} {round_no + 1}: before")
            slow = (ReadingTalker if reading else NeverReadingClient)(args.url, key, rcvbuf=args.rcvbuf)
            await slow.connect()
            base = await fresh(f"{label} {round_no + 1}: connected")
            slow_stop = asyncio.Event()
            streaming = asyncio.ensure_future(slow.stream(speech_frames(slow_utts, gap_s=args.gap_s), slow_stop))
            closed: dict[str, Any] = {}

            def server_closed(since: int) -> dict[str, Any] | None:
                """When the server's slow-client counters first grew after ``base`` (1 s resolution), and why."""
                for s in samples[since:]:
                    grew = [r for r, n in closes(s).items() if n > closes(base)[r]]
                    if grew:
                        return {"reason": grew[0], "after_s": s["t"] - base["t"]}
                return None

            first = len(samples)

            async def watch() -> None:
                while (found := server_closed(first)) is None:
                    await asyncio.sleep(0.25)
                closed.update(found)

            watcher = asyncio.ensure_future(watch())
            try:
                await asyncio.wait([watcher, streaming], timeout=args.head_start_s,
                                   return_when=asyncio.FIRST_COMPLETED)
                turns = await normal(label, round_no)
                left = args.slow_max_s - (time.monotonic() - slow.connected_at)
                if left > 0 and not stop.is_set() and not reading:  # a reader is never cut off: no wait
                    await asyncio.wait([watcher, streaming], timeout=left, return_when=asyncio.FIRST_COMPLETED)
            finally:
                kept_s = time.monotonic() - slow.connected_at
                slow_stop.set()
                watcher.cancel()
                ended, _ = await asyncio.gather(streaming, watcher, return_exceptions=True)
                drain = await slow.drain(args.drain_s)
                await slow.close()
            if isinstance(ended, BaseException):
                raise ended  # a bug in the slow client, not something the server did
            phase_label[0] = f"{label} {round_no + 1}: after"
            await asyncio.sleep(SETTLE_S)
            after = await fresh(phase_label[0])
            closed.update(server_closed(first) or {})  # also a close seen only after streaming ended
            during = [s["rss_bytes"] for s in samples if s.get("rss_bytes") is not None
                      and base["t"] <= s["t"] <= after["t"]]
            info = {
                "rss_before": before.get("rss_bytes"), "rss_peak": max(during) if during else None,
                "rss_after": after.get("rss_bytes"),
                "server_closed_after_s": closed.get("after_s"), "server_close_reason": closed.get("reason"),
                "server_close_code": {"outbox_full": 1008, "ping_timeout": 1011}.get(closed.get("reason")),
                "kept_s": kept_s, "stream_end": slow.stream_end, "stream_error": slow.stream_error,
                "audio_sent_s": slow.audio_sent_s, "drain": drain,
                "dropped_audio": None if after.get("dropped_audio") is None or base.get("dropped_audio") is None
                else after["dropped_audio"] - base["dropped_audio"],
                "rcvbuf": args.rcvbuf, "reads": reading,
            }
            return turns, info

        sampling = asyncio.ensure_future(sampler())
        try:
            for r in range(args.rounds):
                for label in PHASES if args.control else ("normal_only", "with_slow"):
                    if stop.is_set():
                        break
                    phase_label[0] = f"{label} {r + 1}"
                    t0 = time.monotonic() - probe.t0
                    if label == "normal_only":
                        turns, slow_info = await normal(label, r), None
                    else:
                        turns, slow_info = await with_slow(r, label)
                    phases.append({"label": label, "round": r, "start_s": t0,
                                   "end_s": time.monotonic() - probe.t0, "latency": latency(turns),
                                   "turns": turns, **({"slow": slow_info} if slow_info else {})})
        finally:
            sampling.cancel()
            (sampled,) = await asyncio.gather(sampling, return_exceptions=True)
            summary = {label: latency([t for ph in phases if ph["label"] == label for t in ph["turns"]])
                       for label in PHASES if any(ph["label"] == label for ph in phases)}
            report = {"command": " ".join(sys.argv), "url": args.url, "pid": args.pid, "stopped_early": stop.is_set(),
                      "config": {k: v for k, v in vars(args).items() if k not in ("key", "out")},
                      "summary": summary, "phases": phases, "samples": samples}
            out.write_text(json.dumps(report, indent=2))
            print("\n\n".join(tables(report)))
            print(f"\nreport: {out}", file=sys.stderr)
            if not isinstance(sampled, asyncio.CancelledError):
                raise RuntimeError("the sampler stopped on its own") from sampled
    failed = [t for ph in phases for t in ph["turns"] if t["status"] != "completed"]
    if failed:
        print(f"slow_client: {len(failed)} normal turns failed", file=sys.stderr)
        return 1
    return 130 if stop.is_set() else 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_options(p, pid_help="the server's process id: RSS from /proc (else from /metrics)")
    p.add_argument("--turns", type=int, default=4, help="the normal session's turns per phase")
    p.add_argument("--rounds", type=int, default=2, help="rounds of (normal_only, with_slow)")
    p.add_argument("--corpus", default="all", help="synthetic, real, all, a folder of WAVs or a JSON manifest")
    p.add_argument("--head-start-s", type=float, default=10.0, help="the slow client talks this long alone first")
    p.add_argument("--slow-max-s", type=float, default=90.0,
                   help="keep the slow client at most this long (unless the server closes it first)")
    p.add_argument("--gap-s", type=float, default=4.0, help="silence the slow client sends after each question")
    p.add_argument("--rcvbuf", type=int, default=64 * 1024, help="the slow client's socket receive buffer (bytes)")
    p.add_argument("--drain-s", type=float, default=15.0, help="at the end, read what is left for at most this long")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one normal reply")
    p.add_argument("--no-control", dest="control", action="store_false",
                   help="leave out the with_reading phase (a talking caller that reads)")
    p.add_argument("--out", default="reports/slow-client.json")
    raise SystemExit(asyncio.run(main(p.parse_args())))
