"""The native heap: how many glibc malloc arenas the process may open, and giving freed pages back.

The engines run native code on many threads (CTranslate2, onnxruntime, vLLM's front end, the default
executor). glibc gives each thread that meets contention an arena of its own - up to eight per core - and
memory freed inside an arena stays in the process's RSS until the arena's top is free or the heap is
trimmed. Under eight concurrent sessions that is what made the soak's RSS climb for minutes and never come
back (docs/BENCHMARKS.md §16). Two levers, both glibc's own API (``mallopt(M_ARENA_MAX)``, ``malloc_trim``),
called through ``ctypes``:

- :func:`limit_arenas` at start-up, before the engines' threads exist (``Settings.malloc_arena_max``);
- :class:`HeapTrimmer`, a task that calls ``malloc_trim(0)`` on a worker thread every
  ``Settings.malloc_trim_s`` seconds, so pages freed anywhere in the heap go back to the system.

On a C library other than glibc (musl, macOS) both are no-ops that say so.

Better still is jemalloc, which gives freed pages back on its own (a background thread, ``dirty_decay_ms``):
measured in the 8-session soak, a plateau of 1.1-1.3 GB against 1.8-2.0 GB, and +174 MiB kept after every
session closed against +911 MiB (docs/BENCHMARKS.md §16). An allocator can only be chosen when a process
starts, so :func:`jemalloc_restart` re-executes ``sub250 serve`` once with ``LD_PRELOAD`` set when the
library is installed (Debian/Ubuntu: ``libjemalloc2``; ``Settings.allocator``: auto | jemalloc | glibc).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import platform
import sys
from collections.abc import Callable, Mapping

from sub250.errors import ConfigError
from sub250.periodic import Periodic

log = logging.getLogger(__name__)

#: ``mallopt`` parameter number of ``M_ARENA_MAX`` in glibc's ``<malloc.h>``.
M_ARENA_MAX = -8


def _libc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)  # the process's own symbols: glibc is already loaded
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    libc.malloc_trim.restype = ctypes.c_int
    return libc


_LIBC = _libc()


def _jemalloc_loaded() -> bool:
    try:
        return hasattr(ctypes.CDLL(None), "mallctl")  # jemalloc's own control call; glibc has none
    except OSError:
        return False


#: Whether this process's ``malloc`` is jemalloc's (preloaded at start), not glibc's.
JEMALLOC = _jemalloc_loaded()


def available() -> bool:
    """Whether this process allocates with glibc's malloc (the glibc levers below do something)."""
    return _LIBC is not None and not JEMALLOC


def allocator() -> str:
    """``jemalloc``, ``glibc`` or ``other``, for the log and ``/healthz``."""
    return "jemalloc" if JEMALLOC else "glibc" if _LIBC is not None else "other"


#: jemalloc's settings when the user gave none (``MALLOC_CONF``): a background thread purges freed pages
#: after a second, without waiting for the next allocation.
JEMALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"
#: Set in the environment of the re-executed process, so it never re-executes again.
RESTARTED = "SUB250_ALLOCATOR_RESTARTED"


def jemalloc_environ(choice: str, environ: Mapping[str, str],
                     find: Callable[[str], str | None] = ctypes.util.find_library) -> dict[str, str] | None:
    """The environment to restart with so that jemalloc serves every allocation, or None to go on as is.

    ``choice``: ``auto`` (jemalloc when installed), ``jemalloc`` (required: ConfigError when missing) or
    ``glibc``. Nothing changes when jemalloc is already in ``LD_PRELOAD`` or the process was restarted once."""
    if choice not in ("auto", "jemalloc", "glibc"):
        raise ConfigError(f"SUB250_ALLOCATOR={choice!r} is not an allocator", "use auto, jemalloc or glibc")
    preload = environ.get("LD_PRELOAD", "")
    if choice == "glibc" or "jemalloc" in preload or environ.get(RESTARTED):
        return None
    lib = find("jemalloc")
    if lib is None:
        if choice == "jemalloc":
            raise ConfigError("SUB250_ALLOCATOR=jemalloc, but libjemalloc is not installed",
                              "install it (Debian/Ubuntu: apt-get install libjemalloc2) or use "
                              "SUB250_ALLOCATOR=auto")
        return None
    env = dict(environ)
    env["LD_PRELOAD"] = ":".join(p for p in (lib, preload) if p)
    env.setdefault("MALLOC_CONF", JEMALLOC_CONF)
    env[RESTARTED] = "1"
    return env


def jemalloc_restart(choice: str) -> None:
    """Re-execute this very command under jemalloc when :func:`jemalloc_environ` says so (same PID, before
    any engine or thread exists); return when it does not."""
    env = jemalloc_environ(choice, os.environ)
    if env is None or platform.system() != "Linux":
        return
    log.info("restarting under jemalloc (%s)", env["LD_PRELOAD"])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, list(sys.orig_argv), env)


def limit_arenas(count: int) -> bool:
    """Cap glibc's malloc arenas at ``count`` (0 keeps glibc's default). True when applied."""
    if count <= 0 or _LIBC is None or not available():
        return False
    if _LIBC.mallopt(M_ARENA_MAX, count) != 1:
        log.warning("mallopt(M_ARENA_MAX, %d) was refused; glibc's default arena count stays", count)
        return False
    return True


def trim() -> bool:
    """Give free pages of every arena back to the system (``malloc_trim(0)``). True when some were."""
    return bool(_LIBC.malloc_trim(0)) if _LIBC is not None else False


class HeapTrimmer(Periodic):
    """Calls :func:`trim` every ``interval_s`` seconds on a worker thread (never on the event loop);
    ``stats.total``: the runs that gave pages back."""

    name = "heap-trimmer"

    def start(self) -> bool:
        if not available():
            log.info("not glibc's malloc (%s): the heap is not trimmed", allocator())
            return False
        return super().start()

    async def once(self) -> int:
        return int(await asyncio.to_thread(trim))
