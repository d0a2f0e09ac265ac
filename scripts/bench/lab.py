"""The benchmarks' comparison points: profiles kept to measure a change against (cpu-tiny, cpu-baseline, the
one-change variants of cpu-base), as override files in ``scripts/profiles/`` - not deployable, not in ``models/``.
"""

from __future__ import annotations

from pathlib import Path

#: The comparison points' folder.
LAB_PROFILES = Path(__file__).resolve().parents[2] / "scripts" / "profiles"


def profile(name: str) -> str:
    """A comparison point's file by its name (``cpu-tiny`` -> scripts/profiles/cpu-tiny.toml); any other name or
    path as given (a deployable profile of ``models/``, or a file of one's own)."""
    path = LAB_PROFILES / f"{name}.toml"
    return str(path) if "/" not in name and not name.endswith(".toml") and path.is_file() else name


def names() -> list[str]:
    return sorted(p.stem for p in LAB_PROFILES.glob("*.toml"))
