"""vLLM in-process (CPU) with n-gram speculative decoding: streaming, acceptance counters, abort."""

import asyncio
import uuid

import pytest

from sub250.llm import LLMRequest

pytestmark = pytest.mark.engines

# A copy-heavy task: the answer repeats spans of the prompt, which n-gram drafting predicts.
COPY_PROMPT = [
    {"role": "system", "content": "Repeat the user's text exactly, word for word."},
    {"role": "user", "content": "Press the power button. Wait for the ring to turn green. "
                                "Press the power button. Wait for the ring to turn green."},
]


async def test_streams_text_with_speculative_decoding_counters(llm):
    deltas = [d async for d in llm.stream(LLMRequest(f"t-{uuid.uuid4().hex}", COPY_PROMPT, max_tokens=48))]
    text = "".join(d.text for d in deltas)
    assert len(deltas) >= 2, "the reply must arrive in several deltas (streaming)"
    assert "power button" in text.lower()
    final = deltas[-1]
    assert final.finished and final.num_tokens > 5
    spec = final.spec_decoding
    assert spec is not None, "acceptance counters must be reported with speculation on"
    assert spec["num_draft_tokens"] > 0
    assert 0 < spec["num_accepted_draft_tokens"] <= spec["num_draft_tokens"]
    print("spec decoding:", spec)


async def test_answer_is_grounded_in_the_prompt(llm):
    """The product's own prompt template with a passage of the sample knowledge base."""
    from sub250.llm.prompt import build_messages
    from sub250.protocol.session_config import DEFAULT_INSTRUCTIONS
    from sub250.rag.kb import SAMPLE_KB, read_folder

    passage = next(p for d in read_folder(SAMPLE_KB) for p in d.passages if p.title == "When to Replace the Filter")
    msgs = build_messages(DEFAULT_INSTRUCTIONS, "How often do I need to buy a new filter?", [passage], [],
                          llm.count_tokens)
    text = "".join([d.text async for d in llm.stream(LLMRequest(f"t-{uuid.uuid4().hex}", msgs, max_tokens=60))])
    assert "nine months" in text.lower()


#: Candidates a choice grammar holds: two start alike ("It "), so the model needs more than a token to choose.
CHOICES = ("It lasts about nine months.", "It costs forty-nine dollars.", "Sorry, I cannot help with that.")
CHOICE_PROMPT = [{"role": "system", "content": "Answer from the context."},
                 {"role": "user", "content": "Context:\n- Filters: The filter costs forty-nine dollars.\n\n"
                                             "Question: How much is a new filter?"}]


async def test_a_choice_grammar_lets_the_model_say_one_candidate_only(llm):
    """The ``choice`` answer mode's structured outputs: whatever the model would say, its tokens spell one of the
    candidates, whole, and nothing else (here, a prompt that asks for something else entirely)."""
    for question in (CHOICE_PROMPT, COPY_PROMPT):
        text = "".join([d.text async for d in llm.stream(LLMRequest(f"c-{uuid.uuid4().hex}", question,
                                                                    max_tokens=40, choice=CHOICES))])
        assert text in CHOICES, text


async def test_closing_the_stream_aborts_the_request(llm):
    req = LLMRequest(f"abort-{uuid.uuid4().hex}", COPY_PROMPT, max_tokens=400)
    agen = llm.stream(req)
    first = await agen.__anext__()
    assert first.text is not None
    await agen.aclose()  # barge-in: the engine must drop the request, not run on
    engine = llm._engine
    for _ in range(50):
        if engine.get_num_unfinished_requests() == 0:
            break
        await asyncio.sleep(0.02)
    assert engine.get_num_unfinished_requests() == 0


async def test_concurrent_requests_share_the_engine(llm):
    async def one(i: int) -> str:
        msgs = [{"role": "user", "content": f"Say the number {i} and nothing else."}]
        return "".join([d.text async for d in llm.stream(LLMRequest(f"c{i}-{uuid.uuid4().hex}", msgs, max_tokens=8))])

    outs = await asyncio.gather(*(one(i) for i in range(4)))
    assert all(outs)


async def test_the_model_reads_unfinished_words_as_a_turn_that_goes_on(llm):
    """turn_end_logprob: log P(the next token ends the user's sentence or message). A question cut after "the",
    "of", "my" or "that I" scores below the whole question, for every pair; and the prompt is the chat template's
    own, closed by its end token."""
    pairs = [("How far from the", "How far from the wall should I put my purifier"),
             ("Can I return a filter that I", "Can I return a filter that I already opened"),
             ("What is the price of", "Can I swap my purifier for a different color"),
             ("Where is my", "Where is my order")]
    for cut, whole in pairs:
        unfinished = await llm.turn_end_logprob(cut, f"t-{uuid.uuid4().hex}")
        finished = await llm.turn_end_logprob(whole, f"t-{uuid.uuid4().hex}")
        print(f"{unfinished:7.2f} {cut!r}\n{finished:7.2f} {whole!r}")
        assert unfinished < finished <= 0
    # the prompt is the template's own: the reply's prompt starts with it (it goes on to the assistant's turn)
    ids = llm.turn_end_prompt("Where is my order")
    asked = llm.tokenize([{"role": "user", "content": "Where is my order"}])
    assert len(asked) > len(ids) and asked[:len(ids)] == ids
