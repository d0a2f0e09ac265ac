#!/usr/bin/env python
"""Answer-quality benchmark: the questions of tests/data/answers/questions.jsonl through retrieval and each
answer configuration, interleaved, in one run; scored automatically (scripts/bench/answers.py).

    flock /tmp/team/engines.lock .venv/bin/python scripts/bench_answers.py [--profiles cpu-base[,cpu-gemma]]
        [--configs before,generative,grounded,extractive-1,extractive-2,profile] [--limit N] [--out reports/answers]
        [--spoken-url ws://127.0.0.1:8250/v1/realtime --spoken 24]
        [--profiles remote-vllm --llm-url http://gpu-box:8000/v1 | --start-vllm cpu-base]

By text, in this process, on the first profile's stack (embedded PostgreSQL with the sample KB, MiniLM, the
LLM of each profile): each question is retrieved once (the query cache off), then answered by every
(profile, configuration) in a rotating order, each in a fresh context (no history). A configuration is the
profile's ``[answer]`` section with overrides (CONFIGS below); ``profile`` is the section as it is, gate
included. ttft is measured from the question (before retrieval) to the reply's first text.

Besides: the gate sweep (the top passage's cosine of every question against in-scope passed / out-of-scope
stopped) and the threshold that stops the most out-of-scope questions while passing >= 98 % of in-scope ones.

``--spoken-url``: also a subset spoken (Piper-synthesized questions, every k-th question so that ``--spoken``
of them are asked) through a running server's voice path, one session each (the server's own profile and
configuration); scored the same way, with the server's answer path and ttft from its turn reports.

A ``remote-vllm`` profile is scored the same way against a running vLLM server (``--llm-url``, e.g. a GPU
deployment's), or one this run starts of another profile's LLM (``--start-vllm``, on CPU here).

Writes ``<out>/answers.json`` (every reply and its marks) and ``<out>/answers.txt`` (the tables).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sub250.answer.choice import CHOICE_HINT  # noqa: E402
from sub250.answer.policy import AnswerPolicy  # noqa: E402
from scripts.bench import answers as A  # noqa: E402
from scripts.bench import lab  # noqa: E402
from sub250.metrics.timeline import TurnTimeline, now_ns  # noqa: E402

#: Overrides of the profile's [answer] section (and ``retrieval``: "vector" or "hybrid"; default: the profile's).
#: No gate, no loop control: what a configuration does by itself. Each configuration names its extract's span
#: (the profile's own is "around" since §27; the earlier ones were measured with "following").
_OPEN = {"min_score": 0.0, "min_score_unfamiliar": 0.0, "min_extract_score": 0.0, "borderline_score": 0.0}
_EXTRACTIVE = {**_OPEN, "mode": "extractive", "extract_span": "following"}
_GROUNDED = {**_OPEN, "mode": "grounded", "extract_span": "following"}
_TOLD = CHOICE_HINT + " If none answers it, reply: {decline}"
CONFIGS: dict[str, dict] = {
    # how every question was answered before the answer work: vectors only, the LLM from the passages
    "before": {**_OPEN, "mode": "generative", "stop_loops": False, "repetition_penalty": 1.0,
               "frequency_penalty": 0.0, "retrieval": "vector"},
    "generative": {**_OPEN, "mode": "generative"},
    "generative-rp1.3": {**_OPEN, "mode": "generative", "repetition_penalty": 1.3},
    "grounded": {**_GROUNDED, "lexical_weight": 0.0, "retrieval": "vector"},
    "grounded-hybrid": {**_GROUNDED, "sentences": 2, "retrieval": "hybrid"},
    "grounded-lex": {**_OPEN, "mode": "grounded", "extract_span": "following", "sentences": 2, "lexical_weight": 0.5},
    "extractive-1": {**_EXTRACTIVE, "sentences": 1, "lexical_weight": 0.0, "retrieval": "vector"},
    "extractive-2": {**_EXTRACTIVE, "sentences": 2, "lexical_weight": 0.0, "retrieval": "vector"},
    "extractive-2-lex": {**_EXTRACTIVE, "sentences": 2, "lexical_weight": 0.5, "retrieval": "vector"},
    "extractive-2-p2": {**_EXTRACTIVE, "sentences": 2, "extract_passages": 2, "retrieval": "vector"},
    "extractive-2-p3": {**_EXTRACTIVE, "sentences": 2, "extract_passages": 3, "retrieval": "vector"},
    "extractive-2-hybrid": {**_EXTRACTIVE, "sentences": 2, "retrieval": "hybrid"},
    "extractive-3-hybrid": {**_EXTRACTIVE, "sentences": 3, "retrieval": "hybrid"},
    "extractive-3-vector": {**_EXTRACTIVE, "sentences": 3, "retrieval": "vector"},
    "extractive-3-hybrid-w0.5": {**_EXTRACTIVE, "sentences": 3, "retrieval": "hybrid-w0.5"},
    "extractive-3-hybrid-w0.25": {**_EXTRACTIVE, "sentences": 3, "retrieval": "hybrid-w0.25"},
    # the fillers of speech out of the question, then the candidates reranked, then the extract laid around
    # the best sentence (docs/BENCHMARKS.md §27)
    "extractive-3-clean": {**_OPEN, "mode": "extractive", "sentences": 3, "extract_span": "following",
                           "retrieval": "hybrid-w0.5-clean"},
    "extractive-3-rerank-raw": {**_OPEN, "mode": "extractive", "sentences": 3, "extract_span": "following",
                                "retrieval": "hybrid-w0.5-rerank-raw"},
    "extractive-3-rerank": {**_OPEN, "mode": "extractive", "sentences": 3, "extract_span": "following",
                            "retrieval": "hybrid-w0.5-rerank"},
    "extractive-3-around": {**_OPEN, "mode": "extractive", "sentences": 3, "extract_span": "around",
                            "retrieval": "hybrid-w0.5-rerank"},
    # cpu-tiny's [answer] before §27: hybrid retrieval as searched, the best sentence and the two after it,
    # the gates on the passage (0.32) and the sentence (0.44)
    "profile-before": {"mode": "extractive", "sentences": 3, "extract_span": "following", "min_score": 0.32,
                       "min_score_unfamiliar": 0.0, "min_extract_score": 0.44, "retrieval": "hybrid-w0.5"},
    # the profile as it is but its reranker without the lexical term (BM25, docs/BENCHMARKS.md §29)
    "profile-no-lexical": {"retrieval": "profile-no-lexical"},
    # ... and with the lexical weight at half and twice its default (0.05): how much the choice matters
    "profile-lexical-0.025": {"retrieval": "profile-lexical-0.025"},
    "profile-lexical-0.1": {"retrieval": "profile-lexical-0.1"},
    # the profile's [answer] with the LLM choosing among the extracts of the best 1 / 2 / 3 passages and the
    # decline (app/answer/choice.py), gates included
    "choice-1": {"mode": "choice", "choices": 1},
    "choice-2": {"mode": "choice", "choices": 2},
    "choice-3": {"mode": "choice", "choices": 3},
    # ... the hint naming the decline (as first measured, §41 run 1)
    "choice-1-told": {"mode": "choice", "choices": 1, "choice_hint": _TOLD},
    "choice-3-told": {"mode": "choice", "choices": 3, "choice_hint": _TOLD},
    # ... the decline not a candidate (the gates alone decline); with one candidate, a copy of the extract
    "choice-2-nodecline": {"mode": "choice", "choices": 2, "choice_decline": False},
    "choice-3-nodecline": {"mode": "choice", "choices": 3, "choice_decline": False},
    "copy": {"mode": "choice", "choices": 1, "choice_decline": False},
    # the profile's [answer] as it is, gates included
    "profile": {},
}
THRESHOLDS = [round(0.05 + 0.01 * i, 2) for i in range(46)]


async def _answer(stack, tuning, policy: AnswerPolicy, q: A.Question, found, retrieval_ms: float, rid: str,
                  instructions: str | None = None) -> dict:
    """``instructions``: a client's own (as a framework sets a persona); None: the default ones."""
    from sub250.protocol.session_config import DEFAULT_INSTRUCTIONS
    from sub250.session import stages

    tl = TurnTimeline(rid)
    answerer = stages.answerer(stack, tuning, policy)
    t0 = now_ns()
    plan = await answerer.plan(q.question, found, instructions or DEFAULT_INSTRUCTIONS, [], tl,
                               custom_instructions=instructions is not None)
    text, first_ns = "", None
    async for piece in answerer.speak(plan, rid, int(stack.profile.stage("llm").get("max_tokens", 96)), tl):
        if first_ns is None:
            first_ns = now_ns()
        text += piece
    return {"reply": text, "path": plan.path, "top_score": found.top_score,
            "ttft_ms": None if first_ns is None else retrieval_ms + (first_ns - t0) / 1e6,
            "stopped_loop": (tl.answer or {}).get("stopped_loop"),
            "extract_score": (tl.answer or {}).get("extract_score")}


async def run_text(args: argparse.Namespace, questions: list[A.Question]) -> tuple[list[dict], list]:
    from sub250.config import Settings
    from sub250.rag.kb import SAMPLE_KB
    from sub250.session import stages
    from sub250.session.tuning import PipelineTuning
    from sub250.session.turn import UserTurn
    from sub250.stack import Stack

    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    configs = args.configs.split(",")
    for c in configs:
        if c not in CONFIGS:
            raise SystemExit(f"unknown config {c!r}; known: {', '.join(CONFIGS)}")
    # only extractive configurations: no LLM to load (a quick look at the sentence picker)
    needs_llm = any(CONFIGS[c].get("mode") != "extractive" for c in configs)
    server = None
    over: dict = {}
    if args.start_vllm:
        # a vLLM OpenAI server of that profile's LLM, for the profiles that stream from one (remote-vllm)
        from sub250.fleet import vllm_server

        settings = Settings.from_env()
        print(f"  starting a vLLM server of {args.start_vllm}'s LLM…", file=sys.stderr, flush=True)
        server, url = await vllm_server.start(lab.profile(args.start_vllm), settings.models_dir, log_path=args.out / "vllm.log",
                                              cache_dir=settings.vllm_cache_dir)
        over["llm_base_url"] = f"{url}/v1"
    elif args.llm_url:
        over["llm_base_url"] = args.llm_url
    base = Stack.from_settings(Settings.from_env(profile=lab.profile(profiles[0]), **over))
    stacks = [base]
    rows: list[dict] = []
    scores: list = []
    try:
        await base.start(("db", "embedder", "llm") if needs_llm else ("db", "embedder"), progress=lambda s: print(f"  loading {s} ({profiles[0]})…",
                                                                            file=sys.stderr, flush=True))
        if await base.store.count() == 0:
            from sub250.rag.ingest import ingest_folder

            await ingest_folder(SAMPLE_KB, base.store, base.embedder, model_id=base.embedding_model_id)
        for name in profiles[1:] if needs_llm else []:
            other = Stack.from_settings(Settings.from_env(profile=lab.profile(name), **over))
            print(f"  loading llm ({name})…", file=sys.stderr, flush=True)
            await other.start(("llm",))
            other.embedder, other.store, other.retriever, other.picker = (base.embedder, base.store, base.retriever,
                                                                          base.picker)
            stacks.append(other)
        from sub250.rag.rerank import Reranker
        from sub250.rag.retriever import RetrievalOptions, Retriever

        def searcher(reranker: Reranker | None = None, **options) -> Retriever:
            return Retriever(base.embedder, base.store, base.retriever.k, options=RetrievalOptions(**options),
                             reranker=reranker)

        # every question searched (no query cache), each way a configuration asks for
        reranker = base.reranker or Reranker(base.embed_texts, base.picker)
        # §27's steps were measured before the lexical term (§29): their reranker has none
        unlexical = Reranker(base.embed_texts, base.picker, dataclasses.replace(reranker.weights, lexical=0.0))
        retrievers = {"vector": searcher(), "hybrid": searcher(hybrid=True),
                      "hybrid-w0.5": searcher(hybrid=True, text_weight=0.5),
                      "hybrid-w0.25": searcher(hybrid=True, text_weight=0.25),
                      "hybrid-w0.5-clean": searcher(hybrid=True, text_weight=0.5, clean=True),
                      "hybrid-w0.5-rerank-raw": searcher(unlexical, hybrid=True, text_weight=0.5),
                      "hybrid-w0.5-rerank": searcher(unlexical, hybrid=True, text_weight=0.5, clean=True)}
        # the profile's own retrieval ([embedder]), for configurations that name none; and its reranker without
        # the lexical term, or with its weight at half and twice
        mine = base.retriever
        retrievers["profile"] = Retriever(base.embedder, base.store, mine.k, options=mine.options,
                                          reranker=mine.reranker)
        others = {"profile-no-lexical": unlexical}
        for weight in (0.025, 0.1):
            others[f"profile-lexical-{weight}"] = Reranker(base.embed_texts, base.picker,
                                                           dataclasses.replace(reranker.weights, lexical=weight))
        for name, other in others.items():
            retrievers[name] = Retriever(base.embedder, base.store, mine.k, options=mine.options,
                                         reranker=other if mine.reranker else None)
        every = await base.store.passages()
        # the profile's own reranker is warmed by warm_answers below (its titles and its BM25 index, once)
        for r in ([] if reranker is base.reranker else [reranker]) + list(others.values()):
            await r.warm(every)
        print(f"  warmed the answers' sentences of {await base.warm_answers()} passages", file=sys.stderr)
        default_retrieval = "profile"
        variants = []
        for stack in stacks:
            tuning = PipelineTuning.from_profile(stack.profile)
            for c in configs:
                label = c if len(stacks) == 1 else f"{stack.profile.name}:{c}"
                over = dict(CONFIGS[c])
                retrieval = over.pop("retrieval", default_retrieval)
                policy = dataclasses.replace(tuning.answer, **over)
                variants.append((label, stack, tuning, policy, retrieval, None))
                if args.instructions:  # the same configuration under a client's instructions, interleaved
                    variants.append((f"{label}+instructions", stack, tuning, policy, retrieval, args.instructions))
        decline = variants[0][3].decline_text
        t_start = time.monotonic()
        for i, q in enumerate(questions):
            searched = {}
            for mode in dict.fromkeys(v[4] for v in variants):
                turn = UserTurn.new(f"q{i}", transcript=q.question)
                t0 = now_ns()
                found = await stages.retrieve(retrievers[mode], q.question, turn)
                searched[mode] = (found, (now_ns() - t0) / 1e6)
            first = searched[variants[0][4]][0]
            scores.append((first.top_score, q.in_scope))
            order = variants[i % len(variants):] + variants[:i % len(variants)]
            for label, stack, tuning, policy, mode, instructions in order:
                found, retrieval_ms = searched[mode]
                titles = [p.title for p in found.passages]
                got = await _answer(stack, tuning, policy, q, found, retrieval_ms, f"bench-{i}-{label}",
                                    instructions)
                rows.append({"config": label, "id": q.id, "kind": q.kind, "question": q.question,
                             "section": q.section, "titles": titles, "retrieval": mode,
                             "retrieval_ms": retrieval_ms, **got, **A.score(q, got["reply"], titles, decline)})
            if (i + 1) % 10 == 0 or i + 1 == len(questions):
                print(f"[{i + 1}/{len(questions)}] {time.monotonic() - t_start:.0f} s", file=sys.stderr, flush=True)
    finally:
        for stack in reversed(stacks[1:]):
            if stack.llm is not None:
                await stack.llm.close()
        await base.close()
        if server is not None:
            await server.stop()
    return rows, scores


async def run_spoken(args: argparse.Namespace, questions: list[A.Question], out: Path) -> list[dict]:
    from scripts.bench.corpus import synthesize_texts
    from scripts.bench.options import default_key
    from scripts.bench.replay import ReplayConfig, run_replay

    step = max(1, len(questions) // max(args.spoken, 1))
    subset = questions[::step][:args.spoken]
    utts = synthesize_texts([(q.id, q.question) for q in subset], out / "spoken")
    by_id = {q.id: q for q in subset}
    records: list[dict] = []
    key = None if args.no_key else (args.key or default_key())
    cfgs = [ReplayConfig(url=args.spoken_url, key=key, label="spoken", sessions=1, turns=1)]
    if args.instructions:  # the same questions under a client's instructions, interleaved
        cfgs.append(ReplayConfig(url=args.spoken_url, key=key, label="spoken+instructions", sessions=1, turns=1,
                                 session_update={"instructions": args.instructions}))
    labels = []
    for utt in utts:  # one session per question: no history between them
        for cfg in cfgs:
            before = len(records)
            await run_replay(cfg, [utt], records.append)
            labels += [cfg.label] * (len(records) - before)
    rows = []
    decline = AnswerPolicy().decline_text
    for label, r in zip(labels, records):
        q = by_id[r["utterance"]]
        lat = r.get("latency") or {}
        answer = lat.get("answer") or {}
        rows.append({"config": label, "id": q.id, "kind": q.kind, "question": q.question,
                     "transcript": r.get("transcript"), "reply": r.get("reply") or "", "titles": r.get("sources", []),
                     "path": answer.get("path"), "top_score": answer.get("top_score"),
                     "ttft_ms": (lat.get("spans") or {}).get("ttft"), "status": r.get("status"),
                     "voice_to_voice_ms": (lat.get("beside") or {}).get("voice_to_voice"),
                     **A.score(q, r.get("reply") or "", r.get("sources", []), decline)})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", default="cpu-base", help="comma-separated profiles (each one's LLM is loaded)")
    ap.add_argument("--configs", default="before,generative,generative-rp1.3,grounded,extractive-1,extractive-2,profile")
    ap.add_argument("--questions", type=Path, default=A.QUESTIONS)
    ap.add_argument("--limit", type=int, help="only the first N questions (a quick look)")
    ap.add_argument("--out", type=Path, default=Path("reports/answers"))
    ap.add_argument("--spoken-url", help="also ask a spoken subset through this running server")
    ap.add_argument("--spoken", type=int, default=24, help="how many questions the spoken subset has")
    ap.add_argument("--key")
    ap.add_argument("--no-key", action="store_true")
    ap.add_argument("--no-text", action="store_true", help="only the spoken subset")
    ap.add_argument("--llm-url", help="the OpenAI-compatible server (…/v1) a remote-vllm profile streams from")
    ap.add_argument("--start-vllm", metavar="PROFILE",
                    help="start a vLLM server of PROFILE's LLM for the run (a remote-vllm profile streams from it)")
    ap.add_argument("--gate-config", help="the configuration whose extract scores the extract gate's sweep uses")
    ap.add_argument("--instructions", metavar="TEXT",
                    help="also run each configuration under these client instructions (a persona, as the Agents SDK "
                         "sets one), interleaved: rows labelled CONFIG+instructions")
    ap.add_argument("--keep-in-scope", type=float, default=90.0,
                    help="the extract gate's choice passes at least this %% of in-scope questions")
    args = ap.parse_args()

    questions = A.load_questions(args.questions)
    if args.limit:
        # keep the mix: the first N of each scope in proportion
        ins = [q for q in questions if q.in_scope]
        oos = [q for q in questions if not q.in_scope]
        n_oos = max(1, round(args.limit * len(oos) / len(questions)))
        questions = ins[:args.limit - n_oos] + oos[:n_oos]
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    report: dict = {"questions": len(questions), "profiles": args.profiles, "configs": {}}
    text_parts = []
    if not args.no_text:
        rows, scores = asyncio.run(run_text(args, questions))
        sweep = A.gate_sweep(scores, THRESHOLDS)
        chosen = A.best_gate(sweep)
        report.update(gate_sweep=sweep, gate_chosen=chosen)
        text_parts += [A.sweep_table(sweep, chosen)]
        # the extract's gate, on the rows of the first configuration that picks sentences (without a gate)
        gate_config = args.gate_config or next(
            (c for c in args.configs.split(",") if CONFIGS[c].get("mode") in ("extractive", "grounded")), None)
        if gate_config:
            ex = [(r["extract_score"], r["kind"] != A.OUT_OF_SCOPE, r.get("right"))
                  for r in rows if r["config"] == gate_config]
            ex_sweep = A.gate_sweep(ex, THRESHOLDS)
            ex_chosen = A.best_gate(ex_sweep, keep_in_scope_pct=args.keep_in_scope)
            report.update(extract_gate_config=gate_config, extract_gate_sweep=ex_sweep, extract_gate_chosen=ex_chosen)
            text_parts += [f"the extract's gate, on {gate_config}'s replies:",
                           A.sweep_table(ex_sweep, ex_chosen, what="extract cosine")]
    if args.spoken_url:
        rows += asyncio.run(run_spoken(args, questions, args.out))
    summary = A.summarize(rows)
    report["configs"] = {k: {kk: vv for kk, vv in v.items()} for k, v in summary.items()}
    report["rows"] = rows
    text_parts += [A.table(summary), A.kinds_table(summary)]
    text = "\n\n".join(text_parts)
    print(text)
    (args.out / "answers.json").write_text(json.dumps(report, indent=1))
    (args.out / "answers.txt").write_text(text + "\n")
    print(f"\nreport: {args.out / 'answers.json'}, {args.out / 'answers.txt'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
