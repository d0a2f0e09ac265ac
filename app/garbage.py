"""Python's cyclic garbage collected on a timer, so the native memory it holds goes back (issue #11).

A reply, a transcription or a synthesis leaves reference cycles behind (tasks and the objects they run, an
exception and its frames); the numpy arrays, resamplers and engine buffers they hold are freed only when the
cycle is collected. CPython runs a full collection only once the objects that survived into the oldest
generation grow by a quarter of those already there, and a loaded server holds ~670,000 (the engines'
modules, tokenizers, vLLM's front end): turns' garbage piled up in the oldest generation unseen, and the
server's RSS climbed ~25 MiB a minute under 8 sessions (docs/BENCHMARKS.md §30).

So, once the engines are loaded, :func:`freeze_loaded` moves every object there is to the permanent
generation (``gc.freeze``: never scanned again), and :class:`GarbageCollector` runs ``gc.collect()`` every
``Settings.gc_collect_s`` seconds. Over what is not frozen a full collection takes a few ms (measured: 1.8–6.8 ms
under 8 sessions), on the event loop: it holds the GIL wherever it runs.
"""

from __future__ import annotations

import gc
import logging

from sub250.periodic import Periodic

log = logging.getLogger(__name__)

__all__ = ["GarbageCollector", "freeze_loaded"]


def freeze_loaded() -> int:
    """Collect, freeze every object left (what the engines loaded), then collect once more so that the next
    full collections are weighed against what is not frozen. Returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    gc.collect()
    return gc.get_freeze_count()


class GarbageCollector(Periodic):
    """``gc.collect()`` every ``interval_s`` seconds, on the loop; ``stats.total``: the objects collected."""

    name = "garbage-collector"

    async def once(self) -> int:
        found = gc.collect()
        log.debug("garbage collected: %d objects", found)
        return found
