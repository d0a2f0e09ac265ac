#!/usr/bin/env python
"""Replay benchmark: recorded audio through N concurrent sessions, per-turn latency report with plots.

    .venv/bin/python scripts/replay.py [--url ws://127.0.0.1:8250/v1/realtime] [--key KEY]
        [--corpus synthetic|real|all|PATH] [--sessions 1,2,4] [--turns 4 | --duration 60] [--speed 1.0]
        [--compare baseline[,PROFILE | LABEL=URL...] [--baseline-url URL]] [--instructions TEXT] [--session JSON] [--out reports/replay-...]

Streams each WAV (any rate; resampled here) at real-time pace through our SDK, waits for the reply, and
writes turns.jsonl (every turn: marks, spans, transcript, reference, reply, errors, client clock),
summary.json, table.txt, PNG plots and a self-contained report.html. ``--compare baseline`` runs the
same audio, interleaved, through a naive configuration (profile cpu-baseline: no partial ASR, no
speculative decoding, no prefix caching) — started locally on a free port unless --baseline-url is
given — and prints the normal/baseline ratio of each span. Any other profile can be a comparison point
too, e.g. ``--compare cpu-tiny-no-ngram`` (n-gram speculative decoding off, all else equal). Ctrl-C stops cleanly and still writes the
partial report. Exit status 1 when any turn failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench import lab, report  # noqa: E402
from scripts.bench.options import corpus, default_key  # noqa: E402
from scripts.bench.replay import ReplayConfig, run_replay, write_jsonl  # noqa: E402
from scripts.bench.stats import format_table, percentile, summarize  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def start_profile_server(profile: str) -> tuple[subprocess.Popen, str]:
    """Start a second server on a free port with another model profile (the comparison point)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "sub250", "--profile", profile, "serve", "--port", str(port),
                             "--dev-no-auth"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 600
    tail: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise SystemExit(f"replay: the {profile} server did not start:\n" + "".join(tail[-20:]))
        tail.append(line)
        if line.startswith("ready in"):
            break
    print(f"comparison server (profile {profile}) on port {port}", file=sys.stderr)
    return proc, f"ws://127.0.0.1:{port}/v1/realtime"


async def main(args: argparse.Namespace) -> int:
    utts = corpus(args.corpus)
    levels = [int(x) for x in args.sessions.split(",")]
    out = Path(args.out or f"reports/replay-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join(sys.argv)
    turns: list[dict] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    running: list[asyncio.Task] = []

    def interrupt() -> None:
        # First Ctrl-C: finish the turns in flight, then report. Second: abandon them and report now.
        if stop.is_set():
            for task in running:
                task.cancel()
        else:
            print("\nstopping after the turns in flight (Ctrl-C again to stop now)…", file=sys.stderr)
            stop.set()

    loop.add_signal_handler(signal.SIGINT, interrupt)
    t_start = time.monotonic()

    def sink(record: dict) -> None:
        turns.append(record)
        with (out / "turns.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")
        done = [t for t in turns if t["label"] == record["label"] and t["sessions"] == record["sessions"]]
        ttfts = [t["latency"]["spans"]["ttft"] for t in done if t.get("latency") and t["latency"]["spans"]["ttft"]]
        p50 = percentile(ttfts, 50)
        print(f"[{record['label']} N={record['sessions']}] {len(done)} turns"
              f"{'' if record['status'] == 'completed' else ' (' + record['status'] + ')'}, ttft p50 "
              f"{'-' if p50 is None else f'{p50:.0f}'} ms, {time.monotonic() - t_start:.0f} s", file=sys.stderr)

    session_update: dict = json.loads(args.session) if args.session else {}
    if args.instructions:
        session_update["instructions"] = args.instructions
    procs: list[subprocess.Popen] = []
    configs = [("normal", args.url, args.key or default_key())]
    for name in [c.strip() for c in (args.compare or "").split(",") if c.strip()]:
        if name == "baseline" and args.baseline_url:
            configs.append(("baseline", args.baseline_url, args.baseline_key or args.key or default_key()))
            continue
        if "=" in name:  # LABEL=URL: a server that runs already (same key unless --baseline-key)
            label, _, curl = name.partition("=")
            configs.append((label, curl, args.baseline_key or args.key or default_key()))
            continue
        proc, curl = start_profile_server(lab.profile("cpu-baseline" if name == "baseline" else name))
        procs.append(proc)
        configs.append((name, curl, None))
    (out / "turns.jsonl").write_text("")
    try:
        for n in levels:
            # Interleave: one round of each configuration at a time, so both see the same machine state.
            # Without a comparison, each session runs all its turns in one conversation.
            step = args.turns if len(configs) == 1 or args.duration else max(1, args.interleave)
            for first in range(0, args.turns, step):
                for label, url, key in configs:
                    if stop.is_set():
                        break
                    cfg = ReplayConfig(url=url, key=key, label=label, sessions=n, turns=min(step, args.turns - first),
                                       duration_s=args.duration, speed=args.speed, timeout_s=args.timeout,
                                       first_turn=first,
                                       session_update=session_update)
                    task = asyncio.ensure_future(run_replay(cfg, utts, sink, stop))
                    running[:] = [task]
                    try:
                        await task
                    except asyncio.CancelledError:
                        break
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        tables = write_report(turns, out, command, [c[0] for c in configs], levels)
        print("\n\n".join(tables))
        print(f"\nreport: {out}/report.html", file=sys.stderr)
    failed = [t for t in turns if t["status"] != "completed"]
    if failed:
        print(f"replay: {len(failed)} of {len(turns)} turns failed or were lost", file=sys.stderr)
        return 1
    return 130 if stop.is_set() else 0


def write_report(turns: list[dict], out: Path, command: str, labels: list[str], levels: list[int]) -> list[str]:
    write_jsonl(out / "turns.jsonl", turns)
    summaries: dict[str, dict] = {}
    tables = []
    for label in labels:
        for n in levels:
            sel = [t for t in turns if t["label"] == label and t["sessions"] == n]
            if not sel:
                continue
            s = summarize(sel)
            summaries[f"{label}/N={n}"] = s
            tables.append(format_table(s, f"== {label}, N={n} =="))
    for other in labels[1:]:
        for n in levels:
            a, b = summaries.get(f"normal/N={n}"), summaries.get(f"{other}/N={n}")
            if a and b:
                tables.append(f"== normal / {other}, N={n} ==\n" + report.comparison_table(a, b, other))
    (out / "summary.json").write_text(json.dumps(summaries, indent=2, default=dict))
    (out / "table.txt").write_text("\n\n".join(tables) + "\n")
    images = []
    if turns:
        try:
            images = [report.waterfall(turns, out / "waterfall.png"), report.cdfs(turns, out / "cdf.png")]
            if len(levels) > 1:
                images.append(report.sweep(turns, out / "sweep.png"))
        except ImportError as exc:
            tables.append(f"(no plots: {exc}; install matplotlib)")
    report.html_report("sub250 replay benchmark", tables, images, out / "report.html", command)
    return tables


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=os.environ.get("SUB250_URL", "ws://127.0.0.1:8250/v1/realtime"))
    p.add_argument("--key", help="API key (default: $SUB250_API_KEY or the local key serve created)")
    p.add_argument("--corpus", default="all", help="synthetic, real, all, a folder of WAVs or a JSON manifest")
    p.add_argument("--sessions", default="1", help="concurrent sessions, or a sweep: 1,2,4")
    p.add_argument("--turns", type=int, default=4, help="turns per session (per level and configuration)")
    p.add_argument("--duration", type=float, help="seconds per level instead of --turns")
    p.add_argument("--speed", type=float, default=1.0, help="stream audio this many times faster than real time")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one reply")
    p.add_argument("--compare", help="comma-separated comparison points, each run by a second server started "
                   "here: 'baseline' (scripts/profiles/cpu-baseline.toml) or a profile: a name in models/ or scripts/profiles/ (e.g. cpu-tiny-no-ngram) or a .toml path; or LABEL=URL, a "
                   "server that runs already (key: --baseline-key, else --key)")
    p.add_argument("--instructions", help="the sessions' own instructions (session.update), as a framework sets a "
                   "persona (the profile's grounded answers hold; --session '{\"sub250\": {\"grounding\": false}}' "
                   "lets the LLM answer freely)")
    p.add_argument("--session", help="a JSON session object every session sends first (session.update), e.g. "
                   "'{\"sub250\": {\"speculative_turns\": false}}'")
    p.add_argument("--baseline-url")
    p.add_argument("--baseline-key")
    p.add_argument("--interleave", type=int, default=2, help="turns per session before switching configuration")
    p.add_argument("--out")
    raise SystemExit(asyncio.run(main(p.parse_args())))
