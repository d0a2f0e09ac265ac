"""The caller's state: one enum, changed by one method, each change logged (as LiveKit emits ``UserState``)."""

import logging

from sub250.config import Settings
from sub250.session.caller import Caller, CallerState
from sub250.session.engines import Engines
from sub250.session.turn import UserTurn
from sub250.stack import Stack
from tests.unit.session.fakes import fake_engines, feed, make_session, silence, speech, wait_for


def test_each_change_of_state_is_logged_once_and_listening_holds_no_turn(caplog):
    caller, turn = Caller(), UserTurn.new("item_1")
    with caplog.at_level(logging.INFO, logger="sub250.session.caller"):
        caller.to(CallerState.SPEAKING, turn)
        caller.to(CallerState.SPEAKING, turn)  # no change: nothing logged
        caller.to(CallerState.LISTENING, turn, "committed")
    assert [r.getMessage() for r in caplog.records] == ["caller: listening -> speaking",
                                                        "caller: speaking -> listening (committed)"]
    assert caller.state is CallerState.LISTENING and caller.turn is None


async def test_a_spoken_turn_takes_the_caller_from_listening_to_speaking_and_back_at_the_commit(caplog):
    session, t, _ = make_session()
    with caplog.at_level(logging.INFO, logger="sub250.session.caller"):
        await feed(session, silence(0.3) + speech(0.6))
        assert session.caller.state is CallerState.SPEAKING and session.caller.turn is not None
        await feed(session, silence(0.8))
        await wait_for(t, "input_audio_buffer.committed")
    assert session.caller.state is CallerState.LISTENING and session.caller.turn is None
    assert [r.getMessage() for r in caplog.records] == ["caller: listening -> speaking",
                                                        "caller: speaking -> listening (committed)"]


def test_the_real_stack_and_the_tests_fake_have_every_engine_a_session_uses():
    assert isinstance(fake_engines(), Engines)
    assert isinstance(Stack.from_settings(Settings.from_env({})), Engines)
    short = fake_engines()
    del short.tts
    assert not isinstance(short, Engines), "a fake without one of the names does not pass for the engines"
