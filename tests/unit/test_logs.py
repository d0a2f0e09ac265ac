"""Log lines (app/logs.py): JSON objects with the session and turn ids from the context, the text format of old,
a bad format refused with its fix; and the wiring: a session's reply logs with both ids."""

import asyncio
import io
import json
import logging
from dataclasses import dataclass
from datetime import datetime

import pytest

from sub250 import cli, logs
from sub250.errors import ConfigError
from tests.unit.session.fakes import FakeLLM, feed, make_session, silence, speech, wait_for


def record(message="hello %s", args=("world",), exc_info=None, name="sub250.test", level=logging.INFO):
    return logging.LogRecord(name, level, __file__, 1, message, args, exc_info)


def json_line(rec: logging.LogRecord, replica="replica-a") -> dict:
    text = logs.JsonFormatter(replica).format(rec)
    assert "\n" not in text  # one object, one line
    return json.loads(text)


@pytest.fixture
def root_logger():
    """The root logger as the test found it (configure replaces its own handler and sets the level)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    for h in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(h)
    root.setLevel(level)


def test_a_json_line_has_the_fields_and_no_ids_outside_a_session():
    line = json_line(record())
    assert line == {"time": line["time"], "level": "INFO", "logger": "sub250.test", "message": "hello world",
                    "replica": "replica-a"}
    assert line["time"].endswith("Z")
    when = datetime.fromisoformat(line["time"].replace("Z", "+00:00"))
    assert when.utcoffset().total_seconds() == 0 and abs(when.timestamp() - record().created) < 1


async def test_session_and_turn_ids_come_from_the_context():
    async def session_task():
        logs.SESSION_ID.set("sess_1")
        first = json_line(record())

        async def reply():
            logs.TURN_ID.set("item_9")
            return json_line(record())

        in_turn = await asyncio.create_task(reply())  # a task inherits the session's id
        return first, in_turn, json_line(record())

    first, in_turn, after = await asyncio.create_task(session_task())
    assert first["session_id"] == "sess_1" and "turn_id" not in first
    assert in_turn["session_id"] == "sess_1" and in_turn["turn_id"] == "item_9"
    assert after["session_id"] == "sess_1" and "turn_id" not in after  # the turn's id stayed in its task
    assert "session_id" not in json_line(record())  # and the session's in its own


def test_an_exception_is_a_string_field():
    try:
        raise ValueError("bad value")
    except ValueError:
        import sys
        line = json_line(record("failed (error id %s)", ("err_1",), exc_info=sys.exc_info(), level=logging.ERROR))
    assert line["level"] == "ERROR" and line["message"] == "failed (error id err_1)"
    assert isinstance(line["exc_info"], str)
    assert line["exc_info"].startswith("Traceback") and "ValueError: bad value" in line["exc_info"]


def test_non_ascii_and_odd_arguments_survive():
    text = logs.JsonFormatter("r").format(record("caller said %s; %r", ("naïve\nline", object())))
    assert "naïve" in text and "\n" not in text
    assert json.loads(text)["message"].startswith("caller said naïve\nline; <object object at")


def test_configure_json_writes_one_object_a_line_and_replaces_its_own_handler(root_logger, capsys):
    logs.configure("json", logging.INFO, "replica-a")
    logs.configure("JSON", logging.INFO, "replica-b")  # a second call replaces the first handler
    ours = [h for h in root_logger.handlers if h.get_name() == logs.HANDLER_NAME]
    assert len(ours) == 1
    logging.getLogger("sub250.test").info("ready on %d", 8250)
    logging.getLogger("sub250.test").debug("not at INFO")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert json.loads(err[0])["message"] == "ready on 8250" and json.loads(err[0])["replica"] == "replica-b"


def test_configure_text_keeps_the_old_format(root_logger):
    logs.configure("text", logging.DEBUG, "replica-a")
    handler = next(h for h in root_logger.handlers if h.get_name() == logs.HANDLER_NAME)
    assert handler.formatter._fmt == "%(asctime)s %(levelname)s %(name)s: %(message)s"
    assert root_logger.level == logging.DEBUG


def test_a_bad_format_is_a_config_error_with_the_fix(root_logger):
    with pytest.raises(ConfigError, match="SUB250_LOG_FORMAT") as err:
        logs.configure("yaml", logging.INFO, "r")
    assert "text, json" in str(err.value)


def test_the_cli_says_so_and_exits_2(root_logger, monkeypatch, capsys):
    monkeypatch.setenv("SUB250_LOG_FORMAT", "yaml")
    assert cli.main(["models", "list"]) == 2
    assert "SUB250_LOG_FORMAT='yaml' is not a log format" in capsys.readouterr().err


def test_the_cli_logs_json_when_asked(root_logger, monkeypatch, capsys):
    monkeypatch.setenv("SUB250_LOG_FORMAT", "json")
    monkeypatch.setenv("SUB250_REPLICA", "replica-c")
    assert cli.main(["models", "list"]) == 0
    logging.getLogger("sub250.test").warning("after main")
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["message"] == "after main" and line["replica"] == "replica-c"


@dataclass
class LoggingLLM(FakeLLM):
    """Logs from inside the reply's generation, as an engine's wrapper would."""

    async def stream(self, req):
        logging.getLogger("sub250.test.llm").warning("generating")
        async for delta in super().stream(req):
            yield delta


async def test_a_sessions_reply_logs_with_the_session_and_turn_ids():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter("replica-a"))
    logger = logging.getLogger("sub250.test.llm")
    logger.addHandler(handler)
    try:
        session, t, _ = make_session(llm=LoggingLLM())
        await feed(session, speech(0.8) + silence(0.8))
        await wait_for(t, "response.done")
        await session.close()
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    item = next(e for e in t.sent if e["type"] == "input_audio_buffer.committed")["item_id"]
    assert lines and all(x["session_id"] == "sess_test" and x["turn_id"] == item for x in lines), lines
