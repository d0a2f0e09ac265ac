"""The keys each stage table of a profile takes, and their TOML types: the one place a profile is checked.

A key no stage takes is an error naming it (and the closest known key), so a misspelt setting never falls
silently back to its default; a value of the wrong type is an error naming its key and the types it takes.
What a value means (ranges, choices) is checked where it is used, with the stage's own message.
"""

from __future__ import annotations

import difflib
from typing import Any

from sub250.errors import ConfigError

_S, _I, _B, _L, _D = str, int, bool, list, dict
#: A number: an integer is a float too (``threshold = 1`` is 1.0).
_NUM = (int, float)

STAGE_KEYS: dict[str, dict[str, tuple[type, ...] | type]] = {
    "vad": {"source": _S, "threshold": _NUM, "speculate_after_ms": _I, "hold_open_ms": _I, "finished_commit_ms": _I,
            "finished_logprob": _NUM, "unfinished_hold_ms": _I, "reader": _S, "model_sha256": _S},
    "asr": {"source": _S, "model_parts": _L, "sha256": _S, "device": _S, "compute_type": _S, "beam_size": _I,
            "final_beam_size": _I, "cpu_threads": _I, "full_window_cpu_threads": _I, "window": _S,
            "partial_window": _S, "window_padding_s": _NUM, "partials": _B, "workers": _I, "scheduling": _S,
            "prompt": _S, "no_repeat_ngram_size": _I, "onednn_primitive_cache": _I},
    "embedder": {"source": _S, "sha256": _S, "tokenizer": _S, "dim": _I, "intra_op_threads": _I, "workers": _I,
                 "max_tokens": _I, "memory_arena": _B, "query_cache_entries": _I, "query_cache_ttl_s": _NUM,
                 "near_duplicate_cosine": _NUM, "hybrid": _B, "hybrid_text_weight": _NUM, "clean_questions": _B,
                 "rerank": _B, "rerank_candidates": _I, "rerank_weights": _D},
    "llm": {"backend": _S, "source": _S, "served_name": _S, "dtype": _S, "max_model_len": _I, "kv_cache_gib": _I,
            "gpu_memory_utilization": _NUM, "enforce_eager": _B, "prefix_caching": _B, "block_size": _I,
            "max_tokens": _I, "max_num_seqs": _I, "context_tokens": _I, "history_tokens": _I,
            "speculative": (bool, dict), "preload_iomp": _B, "fix_bos": _B, "chat_template": _S, "base_url": _S,
            "api_key": _S},
    "tts": {"source": _S, "first_clause": _B, "scheduling": _S, "workers": _I, "threads": _I, "memory_arena": _B},
    "turn": {"source": _S, "sha256": _S, "intra_op_threads": _I, "workers": _I},
    "answer": {"mode": _S, "min_score": _NUM, "min_score_unfamiliar": _NUM, "min_extract_score": _NUM,
               "borderline_score": _NUM, "decline_text": _S, "idle_text": _S, "sentences": _I, "extract_span": _S,
               "extract_passages": _I, "choices": _I, "choice_decline": _B, "choice_hint": _S,
               "lexical_weight": _NUM, "repetition_penalty": _NUM, "frequency_penalty": _NUM, "stop_loops": _B},
    "tools": {"selector": _S, "min_score": _NUM, "kb_margin": _NUM, "max_tokens": _I},
    "interruption": {"enabled": _B, "hold_speech": _B, "check_after_ms": _I, "recheck_ms": _I,
                     "recheck_unsure_ms": _I, "resume_after_ms": _I, "max_no_speech_prob": _NUM,
                     "min_confidence": (float, int, str)},
}
STAGES = tuple(STAGE_KEYS)


def _type_names(types: tuple[type, ...] | type) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "an array",
             dict: "a table"}
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(dict.fromkeys(names[t] for t in types))


def check_stage(where: str, stage: str, table: Any) -> dict[str, Any]:
    """``table`` as a stage's settings; ``where`` names the file for the message."""
    if stage not in STAGE_KEYS:
        near = difflib.get_close_matches(stage, STAGES, n=1)
        raise ConfigError(f"{where}: unknown stage [{stage}]" + (f" (did you mean [{near[0]}]?)" if near else ""),
                          f"the stages are {', '.join(STAGES)}")
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [{stage}] must be a table", f"write [{stage}] and its keys below it")
    known = STAGE_KEYS[stage]
    for key, value in table.items():
        types = known.get(key)
        if types is None:
            near = difflib.get_close_matches(key, known, n=1)
            raise ConfigError(f"{where}: [{stage}] has no key {key!r}" + (f" (did you mean {near[0]!r}?)" if near else ""),
                              f"[{stage}] takes {', '.join(known)}")
        allowed = types if isinstance(types, tuple) else (types,)
        # TOML's booleans are not numbers here, though Python's bool is an int
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ConfigError(f"{where}: [{stage}] {key} = {value!r} must be {_type_names(types)}",
                              f"fix [{stage}] {key}")
    return table
