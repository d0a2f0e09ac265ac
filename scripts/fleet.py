#!/usr/bin/env python
"""The fleet's topology on this machine, for trying it and for benchmarks (docs/DEPLOY.md):

    .venv/bin/python scripts/fleet.py [--replicas 2] [--port 8260] [--workdir /tmp/sub250-fleet]
        [--vllm-url http://127.0.0.1:8000] [--engine-profile cpu-base] [--drain-s 10] [--compiled]

starts one PostgreSQL + pgvector (the embedded binaries as a server of their own), a vLLM OpenAI-compatible
server on CPU with the default model (unless --vllm-url names one that runs), the sample knowledge base ingested
once into that database, N app replicas (``serve`` on the ``remote-vllm`` profile) and HAProxy in front; prints
the load balancer's URL and the API key, and runs until Ctrl-C / SIGTERM, then stops every process it started
(replicas first: each drains). For example, the replay benchmark through the load balancer:

    .venv/bin/python scripts/replay.py --url ws://127.0.0.1:8260/v1/realtime --key sk-sub250-fleet-local ...

Needs Debian's haproxy (scripts/install-fleet-tools.sh). Exit status 2 when the fleet could not start.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sub250.errors import Sub250Error  # noqa: E402
from sub250.fleet import LocalFleet  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicas", type=int, default=2, help="app replicas behind HAProxy (1-8)")
    p.add_argument("--port", type=int, default=8260, help="the load balancer's port")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/sub250-fleet"), help="data, configs and logs")
    p.add_argument("--key", default="sk-sub250-fleet-local", help="the API key every replica accepts")
    p.add_argument("--vllm-url", help="use this running OpenAI-compatible server instead of starting one")
    p.add_argument("--engine-profile", default="cpu-base", help="whose [llm] the vLLM server runs")
    p.add_argument("--drain-s", type=float, default=10.0, help="SUB250_DRAIN_S of each replica")
    p.add_argument("--compiled", action="store_true", help="vLLM with torch.compile (slower start, faster decode)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def run() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        fleet = LocalFleet(args.workdir, replicas=args.replicas, port=args.port, api_key=args.key,
                           vllm_url=args.vllm_url, engine_profile=args.engine_profile, drain_s=args.drain_s,
                           enforce_eager=not args.compiled, progress=lambda line: print(line, flush=True))
        async with fleet:
            print(f"\nload balancer: {fleet.url}  (realtime: {fleet.ws_url}; key {fleet.api_key})\n"
                  f"HAProxy stats: {fleet.stats_url}\nlogs: {fleet.workdir / 'logs'}\nCtrl-C stops everything",
                  flush=True)
            await stop.wait()
            print("stopping the fleet…", flush=True)
        return 0

    try:
        return asyncio.run(run())
    except Sub250Error as exc:
        print(f"fleet: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a process did not come up: the message carries its log's tail
        print(f"fleet: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
