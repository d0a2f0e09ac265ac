"""The transcript cue's words: what a turn does not end on, and a transcript as it was said."""

from sub250.session.turn_cue import as_said, ends_open


def test_as_said_drops_the_punctuation_whisper_ends_with_and_nothing_else():
    assert as_said(" How far from the? ") == "How far from the"
    assert as_said("Where is it...") == "Where is it" and as_said("Well, um…") == "Well, um"
    assert as_said("It's 4-5.") == "It's 4-5" and as_said("Mr. Smith, hi") == "Mr. Smith, hi"
    assert as_said("") == "" and as_said("?!") == ""


def test_ends_open_reads_the_words_not_the_punctuation():
    assert ends_open("How far from the?") and not ends_open(as_said("How far is it?"))
