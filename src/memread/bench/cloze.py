"""``memread bench iaa``: training throughput of the IAA reader against the AS Reader, in one process.

Both models are cloze models of the same framework at the same sizes (the paper's: d = 384, h = 128,
s = 512, T = 8, batch 32), with bidirectional GRU encoders of query and document. They train on
the same synthetic questions: documents of about ``doc_len`` tokens (normal, sd 25%, clipped to
[doc_len/3, 2 doc_len]; CBT averages ~450), queries of ``query_len``, 10 candidates, bucketed by
document length as training does (pools of ``n_batches`` batches). Each batch is one training
step of each model, interleaved A B / B A; a repeat is one pass over the batches, and the median
repeat gives tokens/s (real document and query tokens, padding excluded). ``step`` is what the
training loop does (forward, backward, clipping, Adam); ``model`` is forward + backward alone.
``device`` places both models and the batches (moved before timing); on CUDA each timed step is
bracketed by ``torch.cuda.synchronize``.
"""

from __future__ import annotations

import random
import statistics
import time

import torch

from memread.bench import device_fields, device_sync, reject_size_flags
from memread.criteria.cloze import ClozeNLLConfig, build_cloze_nll
from memread.data.cbt import BLANK, ClozeExample
from memread.data.pipelines.cloze import ClozePipeline, StoriesClozeConfig, padding_fraction
from memread.heads.cloze import ASReaderHeadConfig, IAAHeadConfig, build_as_reader_head, build_iaa_head
from memread.readers.rnn import RNNReaderConfig
from memread.training.distributed import resolve_device, to_device
from memread.typed import parse_settings


def synthetic_questions(n: int, doc_len: int, query_len: int, vocab: int, seed: int) -> list[ClozeExample]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    out = []
    for _ in range(n):
        length = int(min(2 * doc_len, max(doc_len // 3, rng.gauss(doc_len, 0.25 * doc_len))))
        doc = [rng.choice(words) for _ in range(length)]
        cands = sorted(set(rng.sample(doc, 10)))
        query = [rng.choice(words) for _ in range(query_len - 1)] + [BLANK]
        out.append(ClozeExample(context=[doc], query=query, answer=rng.choice(cands), candidates=cands))
    return out


def cloze_setup(batch: int = 32, emb: int = 384, hidden: int = 128, inference: int = 512, steps: int = 8,
                doc_len: int = 450, query_len: int = 30, vocab: int = 50_000, n_batches: int = 8,
                dropout: float = 0.2, emb_l2: float = 1e-4, fixed_query: bool = False, seed: int = 0,
                device: str = "cpu") -> dict:
    """The two models (``iaa``, ``as_reader``) with their criteria and Adam optimisers, and the synthetic
    batches placed on ``device``: what :func:`bench_cloze` times (and ``benchmarks/iaa_breakdown.py``)."""
    where = resolve_device(device)
    torch.manual_seed(seed)
    examples = synthetic_questions(n_batches * batch, doc_len, query_len, vocab, seed)
    reader = RNNReaderConfig(name="gru", hidden=hidden, bidirectional=True)
    # the questions are given: of the [data] config only bucket (and the vocabulary settings) are read
    data = ClozePipeline(StoriesClozeConfig(bucket=n_batches), ".", examples={"train": examples})
    heads = {"iaa": (IAAHeadConfig(emb=emb, dropout=dropout, init="paper", steps=steps, inference=inference,
                                   fixed_query=fixed_query), build_iaa_head),
             "as_reader": (ASReaderHeadConfig(emb=emb, dropout=dropout, init="paper"), build_as_reader_head)}
    models, criteria, optims = {}, {}, {}
    for key, (head_cfg, build) in heads.items():
        models[key] = build(head_cfg, reader, data).to(where).train()
        criteria[key] = build_cloze_nll(ClozeNLLConfig(emb_l2=emb_l2), data, models[key])
        optims[key] = torch.optim.Adam(models[key].parameters(), lr=1e-3)
    batches = data.batches("train", batch, epoch=0, seed=seed)
    unbucketed = ClozePipeline(StoriesClozeConfig(), ".", vocab=data.vocab, examples={"train": examples}).batches("train", batch, 0, seed)
    return {"where": where, "data": data, "examples": examples, "models": models, "criteria": criteria,
            "optims": optims, "batches": batches, "unbucketed": unbucketed,
            "tokens": sum(data.tokens_in(batches[i]) for i in range(len(batches))),
            "placed": [to_device(batches[i], where) for i in range(len(batches))]}  # moved once, outside the timing


def time_models(setup: dict, keys: list[str], optimize: bool, repeats: int, warmup: int) -> dict[str, float]:
    """Median seconds of one pass over the batches for each model of ``keys``, the models interleaved batch
    by batch in an order that rotates (a drift in the machine's speed hits all alike). ``optimize``: a
    training step (forward, backward, clipping, Adam), else forward + backward."""
    sync = device_sync(setup["where"])
    models, criteria, optims = setup["models"], setup["criteria"], setup["optims"]

    def step(key: str, b: dict) -> float:
        model, opt = models[key], optims[key]
        if sync is not None:
            sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        criteria[key](model(b), b).value.backward()
        if optimize:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
        if sync is not None:
            sync()
        return time.perf_counter() - t0

    totals: dict[str, list[float]] = {key: [] for key in keys}
    for r in range(warmup + repeats):
        t = dict.fromkeys(keys, 0.0)
        for i, b in enumerate(setup["placed"]):
            shift = (r + i) % len(keys)
            for key in keys[shift:] + keys[:shift]:
                t[key] += step(key, b)
        if r >= warmup:
            for key in keys:
                totals[key].append(t[key])
    return {key: statistics.median(v) for key, v in totals.items()}


def bench_cloze(batch: int = 32, emb: int = 384, hidden: int = 128, inference: int = 512, steps: int = 8,
                doc_len: int = 450, query_len: int = 30, vocab: int = 50_000, n_batches: int = 8,
                repeats: int = 3, warmup: int = 1, dropout: float = 0.2, emb_l2: float = 1e-4,
                fixed_query: bool = False, seed: int = 0, device: str = "cpu") -> dict:
    setup = cloze_setup(batch, emb, hidden, inference, steps, doc_len, query_len, vocab, n_batches, dropout, emb_l2,
                        fixed_query, seed, device)
    tokens, models = setup["tokens"], setup["models"]
    result = {}
    for mode, optimize in (("step", True), ("model", False)):
        times = time_models(setup, ["iaa", "as_reader"], optimize, repeats, warmup)
        iaa_tps, as_tps = tokens / times["iaa"], tokens / times["as_reader"]
        result[mode] = {"iaa_tokens_per_s": round(iaa_tps, 1), "as_reader_tokens_per_s": round(as_tps, 1),
                        "ratio": round(iaa_tps / as_tps, 4)}
    return {
        "bench": "iaa vs as_reader (training throughput, same process, interleaved)",
        "ratio": result["step"]["ratio"], **result,
        "padding_fraction": round(padding_fraction(setup["batches"]), 4),
        "padding_fraction_unbucketed": round(padding_fraction(setup["unbucketed"]), 4),
        "batch": batch, "emb": emb, "hidden": hidden, "inference": inference, "steps": steps,
        "fixed_query": fixed_query, "doc_len": doc_len,
        "mean_doc_len": round(statistics.mean(len(e.document) for e in setup["examples"]), 1),
        "query_len": query_len, "vocab": vocab, "n_batches": n_batches, "repeats": repeats,
        "iaa_params": sum(p.numel() for p in models["iaa"].parameters()),
        "as_reader_params": sum(p.numel() for p in models["as_reader"].parameters()),
        **device_fields(setup["where"]), "threads": torch.get_num_threads(), "torch": torch.__version__,
    }


_PARAMS = {"batch": int, "emb": int, "hidden": int, "inference": int, "steps": int, "doc_len": int,
           "query_len": int, "vocab": int, "n_batches": int, "repeats": int, "warmup": int,
           "dropout": float, "emb_l2": float, "fixed_query": bool, "seed": int}


def bench_options(options: list[str], batch: int) -> dict:
    """``--set key=value`` options of ``memread bench iaa`` (sizes default to the paper's)."""
    values: dict = {"batch": batch}
    values.update(parse_settings(options, _PARAMS, "bench", "bench iaa"))
    return values


def bench_iaa_command(args) -> dict:
    """``memread bench iaa [--batch B] [--set key=value ...]``: the token-reader size flags do not apply."""
    reject_size_flags(args, "iaa", "emb=384 hidden=128 inference=512 steps=8 doc_len=450 repeats=3 ...")
    return bench_cloze(**bench_options(args.set, args.batch), device=getattr(args, "device", None) or "cpu")
