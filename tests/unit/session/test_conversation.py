"""Conversation: typed items in order, an index by id, what the model sees of each turn."""

from sub250.session.conversation import Conversation, FunctionCall, FunctionOutput, Item


def convo(*items: Item) -> Conversation:
    c = Conversation()
    for item in items:
        c.add(item)
    return c


def test_add_returns_the_previous_id_and_last_id_follows():
    c = Conversation()
    assert c.last_id is None and len(c) == 0
    assert c.add(Item("a", "user", "input_text", "hi")) is None
    assert c.add(Item("b", "assistant", "output_text", "hello")) == "a"
    assert c.add(Item("c", "user", "input_audio", None)) == "b"
    assert c.last_id == "c" and len(c) == 3
    assert [i.id for i in c] == ["a", "b", "c"]


def test_re_adding_an_id_moves_it_to_the_end():
    c = convo(Item("a", "user", "input_text", "1"), Item("b", "user", "input_text", "2"))
    assert c.add(Item("a", "user", "input_text", "again")) == "b"
    assert [i.id for i in c] == ["b", "a"] and c.get("a").text == "again" and len(c) == 2


def test_set_transcript_and_get():
    c = convo(Item("u", "user", "input_audio", None))
    item = c.set_transcript("u", "how often")
    assert item is c.get("u") and item.text == "how often"
    assert c.set_transcript("missing", "x") is None
    assert c.get("missing") is None


def test_delete():
    c = convo(Item("a", "user", "input_text", "1"), Item("b", "user", "input_text", "2"))
    assert c.delete("a") is True
    assert c.delete("a") is False
    assert [i.id for i in c] == ["b"] and c.last_id == "b"
    assert c.delete("b") and c.last_id is None


def test_truncate_scales_the_words_by_the_audio_played():
    words = "one two three four five six seven eight nine ten"
    c = convo(Item("r", "assistant", "output_audio", words, audio_ms=2000.0))
    item = c.truncate("r", 1000)
    assert item is c.get("r") and item.text == "one two three four five"


def test_truncate_keeps_all_words_when_all_was_played_or_more():
    c = convo(Item("r", "assistant", "output_audio", "a b c d", audio_ms=1000.0))
    assert c.truncate("r", 10_000_000).text == "a b c d"


def test_truncate_at_zero_keeps_no_words():
    c = convo(Item("r", "assistant", "output_audio", "a b c d", audio_ms=1000.0))
    assert c.truncate("r", 0).text == ""


def test_truncate_rounds_down_to_whole_words():
    c = convo(Item("r", "assistant", "output_audio", "a b c", audio_ms=900.0))
    assert c.truncate("r", 599).text == "a"  # 3 * 0.665 = 1.99: one word


def test_truncate_only_cuts_assistant_items():
    c = convo(Item("u", "user", "input_audio", "keep every word", audio_ms=1000.0),
              Item("s", "system", "input_text", "be brief"))
    assert c.truncate("u", 0) is None and c.get("u").text == "keep every word"
    assert c.truncate("s", 0) is None and c.get("s").text == "be brief"
    assert c.truncate("missing", 0) is None


def test_last_user_text_skips_items_without_text_and_other_roles():
    c = Conversation()
    assert c.last_user_text() is None
    c.add(Item("u1", "user", "input_text", "first question"))
    c.add(Item("a1", "assistant", "output_text", "an answer"))
    c.add(Item("u2", "user", "input_audio", None))  # still being transcribed
    c.add(Item("u3", "user", "input_audio", ""))
    c.add(Item("s", "system", "input_text", "a system note"))
    assert c.last_user_text() == ("u1", "first question")
    c.set_transcript("u2", "second question")
    assert c.last_user_text() == ("u2", "second question")


def test_for_prompt_is_oldest_first_without_the_question_or_textless_items():
    c = convo(Item("s", "system", "input_text", "be brief"),
              Item("u1", "user", "input_text", "q1"),
              Item("a1", "assistant", "output_audio", "r1"),
              Item("a2", "assistant", "output_audio", ""),   # a reply nobody heard
              Item("u2", "user", "input_audio", None),       # not transcribed
              Item("u3", "user", "input_audio", "q3"))
    system = {"role": "system", "content": "be brief"}  # a system item injected by the client is prompted
    assert c.for_prompt(exclude="u3") == [system, {"role": "user", "content": "q1"},
                                          {"role": "assistant", "content": "r1"}]
    assert c.for_prompt() == [system, {"role": "user", "content": "q1"}, {"role": "assistant", "content": "r1"},
                              {"role": "user", "content": "q3"}]


def test_tool_calls_and_results_are_prompted_as_text_and_found_by_call_id():
    c = convo(Item("u1", "user", "input_audio", "where is order 7?"),
              FunctionCall("fc1", "call_1", "lookup_order", '{"order_number":"7"}'),
              FunctionOutput("o1", "call_1", '{"status":"shipped"}'),
              FunctionOutput("o2", "call_unknown", "orphan"))
    assert c.call("call_1").name == "lookup_order" and c.call("nope") is None
    assert c.for_prompt(exclude="u1") == [
        {"role": "assistant", "content": '(called lookup_order with {"order_number":"7"})'},
        {"role": "user", "content": '(result of lookup_order: {"status":"shipped"})'},
        {"role": "user", "content": "(result of a tool: orphan)"}]
    assert [(call and call.id, out.id) for call, out in c.tool_results(after="u1")] == [("fc1", "o1"), (None, "o2")]
    assert c.tool_results(after="o1") == [(None, c.get("o2"))]
    assert c.delete("fc1") and c.call("call_1") is None
    assert c.get("fc1") is None and c.last_user_text() == ("u1", "where is order 7?")
    assert c.get("fc1") is None and c.truncate("o1", 10) is None  # only assistant messages are truncated


def test_item_to_wire_audio_part_has_a_transcript():
    wire = Item("u", "user", "input_audio", "hello").to_wire()
    assert wire == {"id": "u", "type": "message", "object": "realtime.item", "role": "user", "status": "completed",
                    "content": [{"type": "input_audio", "transcript": "hello"}]}
    out = Item("r", "assistant", "output_audio", "hi there", status="incomplete").to_wire()
    assert out["status"] == "incomplete" and out["content"] == [{"type": "output_audio", "transcript": "hi there"}]
    assert Item("p", "user", "input_audio").to_wire()["content"] == [{"type": "input_audio", "transcript": None}]


def test_item_to_wire_text_part_has_text():
    assert Item("t", "user", "input_text", "typed").to_wire()["content"] == [{"type": "input_text", "text": "typed"}]
    out = Item("r", "assistant", "output_text", "an answer").to_wire()
    assert out["role"] == "assistant" and out["content"] == [{"type": "output_text", "text": "an answer"}]
    assert "transcript" not in out["content"][0]


def test_add_after_places_an_item_right_after_its_anchor():
    c = Conversation()
    for i in ("u1", "u2"):
        c.add(Item(i, "user", "input_text", i))
    assert c.add(Item("a1", "assistant", "output_text", "reply"), after="u1") == "u1"
    assert [i.id for i in c] == ["u1", "a1", "u2"]
    assert c.add(Item("a2", "assistant", "output_text", "x"), after="gone") == "u2"  # anchor missing: at the end
    assert [i.id for i in c] == ["u1", "a1", "u2", "a2"]
