from app.audio.endpointing import Endpointer, SpeechPaused, SpeechResumed, SpeechStarted, SpeechStopped
from app.tts.chunker import SentenceChunker


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


def test_chunker_splits_sentences_as_they_complete():
    c = SentenceChunker()
    out = []
    for piece in ["The filter lasts ", "nine months. Replace", " it when the light", " turns amber! Thanks"]:
        out += c.push(piece)
    assert out == ["The filter lasts nine months.", "Replace it when the light turns amber!"]
    assert c.flush() == ["Thanks"]
    assert c.flush() == []


def test_chunker_keeps_decimals_and_initials_together():
    c = SentenceChunker()
    assert c.push("It draws 1.5 amps in the U.S. market. Yes ") == ["It draws 1.5 amps in the U.S. market."]


def test_first_clause_goes_first_then_sentences():
    c = SentenceChunker(first_clause=True)
    out = []
    for piece in ["Yes, ", "the TriLayer filter lasts", " about nine months. Replace it", " when the ring turns amber. "]:
        out += c.push(piece)
    # "Yes," is too short to speak alone; six words come before the sentence ends
    assert out == ["Yes, the TriLayer filter lasts about", "nine months.", "Replace it when the ring turns amber."]
    c = SentenceChunker(first_clause=True)
    out = []
    for piece in ["The TriLayer filter, ", "which you replace yearly, ", "costs forty dollars. ", "Thanks. "]:
        out += c.push(piece)
    assert out == ["The TriLayer filter,", "which you replace yearly, costs forty dollars."]
    assert c.flush() == ["Thanks."]  # shorter than min_chars: waits for more text or the end


def test_first_chunk_after_six_words_without_punctuation():
    c = SentenceChunker(first_clause=True)
    out = []
    for w in "To put the purifier into pairing mode you hold the button".split():
        out += c.push(w + " ")
    assert out == ["To put the purifier into pairing"]
    assert c.flush() == ["mode you hold the button"]


def test_a_short_first_sentence_is_taken_whole():
    c = SentenceChunker(first_clause=True)
    assert c.push("Yes, it does. More later") == ["Yes, it does."]
