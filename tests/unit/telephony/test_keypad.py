"""Keys gathered into an entry (app/telephony/keypad.py)."""

from sub250.telephony.keypad import MAX_ENTRY, Keypad, as_words


def test_an_entry_ends_at_the_hash_and_star_starts_it_again():
    pad = Keypad()
    assert [pad.press(k) for k in "12*48213"] == [None] * 8
    assert pad.pending
    assert pad.press("#") == "48213"
    assert not pad.pending and pad.press("#") is None  # an empty entry is none


def test_an_entry_ends_when_the_keys_stop_and_is_bounded():
    pad = Keypad()
    for _ in range(MAX_ENTRY + 10):
        pad.press("7")
    assert pad.finish() == "7" * MAX_ENTRY
    assert pad.finish() is None
    assert as_words("4572") == "Keyed in: 4572"
