import pytest

from sub250.rag.question import clean_question


@pytest.mark.parametrize("heard, searched", [
    ("um, so how much is the Aero gonna cost me?", "how much is the Aero going to cost me?"),
    ("so like, how often do I gotta swap out the filter?", "how often do I have to swap out the filter?"),
    ("uh, there's like a musty smell coming outta it", "there's like a musty smell coming out of it"),
    ("do I have to, like, pair all my purifiers again?", "do I have to pair all my purifiers again?"),
    ("Hmm? what does the red light mean", "what does the red light mean"),
    ("hmm, if I just wanna restart it", "if I just want to restart it"),
])
def test_the_fillers_of_speech_are_taken_out(heard, searched):
    assert clean_question(heard) == searched


@pytest.mark.parametrize("text", [
    "What does it look like?", "I'd like to return it.", "How much does the Aero cost?", "umbrella stand",
    "Is the Humm model supported?", "Sofa cleaning", "Solo mode", ""])
def test_words_that_carry_the_question_stay(text):
    assert clean_question(text) == text


def test_a_question_of_fillers_only_is_kept_as_heard():
    assert clean_question("um") == "um"
    assert clean_question("uh, um,") == "uh, um,"
