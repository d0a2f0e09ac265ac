"""Who the assistant speaks for and what it can help with: the knowledge base's own metadata, not code.

A knowledge base folder may hold ``about.toml``::

    company = "Halden Labs"      # "You are the voice support agent of Halden Labs. ..."
    scope = "Halden products: the Aero purifier, its filters, setup, your account, returns and the warranty"

``sub250 ingest`` stores it in the database beside the passages (``kb_about``); every server of that database
says it: the default instructions name the company, the decline and the idle nudge the scope. Without one the
texts name neither. A profile's ``[answer] decline_text`` / ``idle_text`` still override theirs.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from sub250.errors import ConfigError

ABOUT_FILE = "about.toml"
#: Longest ``company`` / ``scope`` accepted (they are said aloud at every decline).
MAX_CHARS = 300


@dataclass(frozen=True)
class About:
    company: str = ""
    scope: str = ""

    @property
    def instructions(self) -> str:
        """The default instructions (a client's own replace them)."""
        who = f"the voice support agent of {self.company}" if self.company else "a voice support agent"
        return (f"You are {who}. Answer the caller's question in one or two short, friendly sentences, using "
                "only the facts in the context.")

    @property
    def decline_text(self) -> str:
        """The fixed reply to a question the knowledge base does not cover."""
        return f"Sorry, I can only help with {self._helps_with}."

    @property
    def idle_text(self) -> str:
        """The fixed nudge after the caller's long silence."""
        return f"Are you still there? I can help with {self._helps_with}."

    @property
    def _helps_with(self) -> str:
        return f"questions about {self.scope}" if self.scope else "questions my knowledge base covers"


def read_about(folder: Path) -> About | None:
    """The folder's ``about.toml`` (None when it has none); a bad one is a ConfigError naming the key."""
    path = folder / ABOUT_FILE
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path} cannot be read: {exc}", "fix the TOML syntax") from None
    unknown = sorted(set(data) - {"company", "scope"})
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r}", "about.toml holds company and scope only")
    values = {}
    for key in ("company", "scope"):
        value = data.get(key, "")
        if not isinstance(value, str) or len(value) > MAX_CHARS:
            raise ConfigError(f"{path}: {key} must be a string of at most {MAX_CHARS} characters",
                              f'e.g. {key} = "..."')
        values[key] = " ".join(value.split())
    return About(**values)
