from sub250.tools.results import speakable


def test_prose_is_said_as_it_is_and_json_fields_one_sentence_each():
    assert speakable("Your order shipped yesterday") == "Your order shipped yesterday."
    assert speakable('{"order_number": "48213", "status": "shipped", "estimated_delivery": "3 December"}') == \
        "Order number: 48213. Status: shipped. Estimated delivery: 3 December."
    assert speakable('{"transferred": true, "queue": {"name": "support", "wait_minutes": 3}}') == \
        "Transferred: yes. Queue: name support, wait minutes 3."
    assert speakable('["a", "b"]') == "a, b."
    assert speakable('"quoted"') == "quoted." and speakable("null") == "none."


def test_long_outputs_are_cut():
    out = speakable(" ".join(["word"] * 200), max_words=10)
    assert out.split()[:10] == ["word"] * 10 and out.endswith("…") and len(out.split()) == 11
