"""Log lines: ``text`` for a terminal (the format sub250 always had), or ``json``, one object a line, for a
fleet's log collector: ``time`` (ISO-8601, UTC), ``level``, ``logger``, ``message``, ``replica``, and
``session_id`` / ``turn_id`` when the line was logged on behalf of a session or a turn, ``exc_info`` (the
traceback, as text) when there is one. See docs/OBSERVABILITY.md.

The ids come from context variables: the session sets :data:`SESSION_ID` in the task that handles its events,
a reply sets :data:`TURN_ID` in its own task; the tasks they start inherit them (asyncio copies the context
into every task it creates, ``asyncio.to_thread`` into its thread). Standard library only.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime

from sub250.errors import ConfigError

SESSION_ID: ContextVar[str | None] = ContextVar("sub250_session_id", default=None)
TURN_ID: ContextVar[str | None] = ContextVar("sub250_turn_id", default=None)

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The name of the handler :func:`configure` installs on the root logger (a second call replaces it).
HANDLER_NAME = "sub250"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def __init__(self, replica: str) -> None:
        super().__init__()
        self.replica = replica

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "replica": self.replica,
        }
        if (session_id := SESSION_ID.get()) is not None:
            line["session_id"] = session_id
        if (turn_id := TURN_ID.get()) is not None:
            line["turn_id"] = turn_id
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc_info"] = record.exc_text
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter(format: str, replica: str) -> logging.Formatter:
    """The formatter of ``format`` (``text`` or ``json``); ConfigError for anything else."""
    name = format.strip().lower()
    if name == "text":
        return logging.Formatter(TEXT_FORMAT)
    if name == "json":
        return JsonFormatter(replica)
    raise ConfigError(f"SUB250_LOG_FORMAT={format!r} is not a log format",
                      f"set SUB250_LOG_FORMAT to one of {', '.join(FORMATS)}, or unset it for text")


def configure(format: str, level: int, replica: str) -> None:
    """Every log line of the process to stderr at ``level``, as ``format`` says. Replaces the handler an
    earlier call installed; other handlers of the root logger (a test runner's) are left alone."""
    handler = logging.StreamHandler()
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(formatter(format, replica))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level)
