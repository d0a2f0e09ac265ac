"""Errors that are shown to a person: each names the problem and the fix, never a bare traceback."""

from __future__ import annotations


class Sub250Error(Exception):
    """An error with a human fix. ``str(err)`` is the message shown by the CLI."""

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(problem if not fix else f"{problem}\n  fix: {fix}")


class ConfigError(Sub250Error):
    """Bad settings or profile."""


class ModelError(Sub250Error):
    """A model file is missing, corrupt or cannot be loaded."""


class DatabaseError(Sub250Error):
    """PostgreSQL cannot be started or reached, or its schema is wrong."""


class EngineError(Sub250Error):
    """An engine failed at run time (crashed, aborted, refused a request)."""
