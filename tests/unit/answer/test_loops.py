import pytest

from sub250.answer.loops import find_loop


@pytest.mark.parametrize("text", [
    "A: Queen of Clothes. A: Queen of Clothes. A: Queen of Clothes. A: Queen of Clothes.",
    "It is a high-quality, high-end, high-end, high-end purifier.",
    "very very very good",
    "The filter lasts nine months and the filter lasts nine months, so the filter lasts nine months.",
])
def test_the_loops_we_heard_are_found(text):
    assert find_loop(text) is not None


@pytest.mark.parametrize("text", [
    "It costs three hundred and twenty-nine dollars from the Halden store.",
    "Press the two grey release tabs on the base and lift the outer shell straight up.",
    "Thank you, thank you for calling.",  # twice is speech
    "very very good",
    "",
])
def test_plain_answers_are_not_loops(text):
    assert find_loop(text) is None


def test_the_streaming_check_stops_at_the_second_time():
    assert find_loop("high-end, high-end", repeats=2) == "high end"
    assert find_loop("It is good. A: Queen of Clothes. A: Queen of Clothes.", repeats=2) is not None
    assert find_loop("Thank you for calling.", repeats=2) is None
    assert find_loop("very very", repeats=2) is None  # one word still needs three


def test_repeats_below_two_is_refused():
    with pytest.raises(ValueError):
        find_loop("x", repeats=1)
