"""The endpointer: VAD probabilities per window in, speech started / paused / resumed / stopped out."""

from sub250.audio.endpointing import Endpointer, SpeechPaused, SpeechResumed, SpeechStarted, SpeechStopped


def feed(ep, probs):
    return [(i, d) for i, p in enumerate(probs) if (d := ep.push(p, i)) is not None]


def test_speech_start_needs_two_windows_and_stop_needs_the_silence():
    ep = Endpointer(threshold=0.5, silence_ms=160)  # 5 windows of 32 ms
    events = feed(ep, [0.1, 0.9, 0.2, 0.9, 0.9, 0.9, 0.4, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0])
    assert events[0] == (4, SpeechStarted(3))
    # 0.4 is above the hysteresis threshold (0.35): still speech; two quiet windows make a pause (64 ms),
    # five end the turn (160 ms)
    assert events[1] == (8, SpeechPaused(6))
    assert events[2] == (11, SpeechStopped(6))
    assert len(events) == 3


def test_a_short_pause_does_not_end_the_turn():
    ep = Endpointer(threshold=0.5, silence_ms=160)
    events = feed(ep, [0.9, 0.9, 0.1, 0.1, 0.1, 0.9, 0.9])
    assert [d for _, d in events] == [SpeechStarted(0), SpeechPaused(1), SpeechResumed(5)]


def _stopped_after(ep, probs):
    """Push ``probs``; return the index of the window that stopped the speech (None if none did)."""
    for i, p in enumerate(probs):
        if isinstance(ep.push(p, i), SpeechStopped):
            return i
    return None


def test_hold_takes_a_stop_back_and_the_pause_ends_at_the_longer_silence():
    ep = Endpointer(threshold=0.5, silence_ms=160)  # 5 windows
    probs = [0.9] * 4 + [0.0] * 20
    assert _stopped_after(ep, probs) == 8 and not ep.speaking
    assert ep.hold(320) and ep.speaking and ep.holding  # 10 windows of silence in all
    assert not ep.hold(640), "once a pause"
    events = [(i, d) for i, p in enumerate(probs[9:], start=9) if (d := ep.push(p, i)) is not None]
    assert events == [(13, SpeechStopped(3))], "the same pause, 10 quiet windows after the last speech"
    assert not ep.holding


def test_speech_ends_a_hold_and_the_next_pause_stops_at_the_usual_silence():
    ep = Endpointer(threshold=0.5, silence_ms=160)
    assert _stopped_after(ep, [0.9] * 4 + [0.0] * 5) == 8
    assert ep.hold(1000)
    assert [d for i, p in enumerate([0.0, 0.9, 0.9], start=9) if (d := ep.push(p, i))] == [SpeechResumed(10)]
    assert not ep.holding
    events = [(i, d) for i, p in enumerate([0.0] * 6, start=12) if (d := ep.push(p, i)) is not None]
    assert events[-1] == (16, SpeechStopped(11)), "5 windows again, not the held pause's limit"


def test_hold_refuses_without_a_stop_to_take_back_or_a_longer_silence():
    ep = Endpointer(threshold=0.5, silence_ms=160)
    assert not ep.hold(1000), "not speaking yet"
    feed(ep, [0.9] * 4 + [0.0] * 2)
    assert not ep.hold(1000) and ep.speaking and not ep.holding, "still speaking: nothing to take back"
    ep = Endpointer(threshold=0.5, silence_ms=160)
    assert _stopped_after(ep, [0.9] * 4 + [0.0] * 5) == 8
    assert not ep.hold(160) and not ep.speaking, "no longer than the silence heard"
    ep = Endpointer(threshold=0.5, silence_ms=160)
    feed(ep, [0.9] * 4)
    assert ep.end() == SpeechStopped(3) and not ep.hold(1000), "an end the model decided is not taken back"


def test_rehold_changes_a_held_pauses_length_while_it_lasts():
    ep = Endpointer(0.5, silence_ms=160)  # 5 windows
    for i in range(4):
        ep.push(0.9, i)
    assert not ep.rehold(640), "nothing held"
    decisions = [ep.push(0.0, 4 + i) for i in range(5)]
    assert isinstance(decisions[-1], SpeechStopped) and ep.hold(640)  # 20 windows in all
    assert ep.rehold(320)  # 10 windows in all: 5 heard
    assert not ep.rehold(160), "no longer than the silence heard"
    decisions = [ep.push(0.0, 9 + i) for i in range(5)]
    assert decisions[:4] == [None] * 4 and isinstance(decisions[4], SpeechStopped)
