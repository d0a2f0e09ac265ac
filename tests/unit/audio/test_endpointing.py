"""The endpointer: VAD probabilities per window in, speech started / paused / resumed / stopped out."""

from app.audio.endpointing import Endpointer, SpeechPaused, SpeechResumed, SpeechStarted, SpeechStopped


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
