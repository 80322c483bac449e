"""Peak memory and speed of one training step of the hierarchical document models (NSE section 4.4).

For each of ``configs/imdb/{nse-nse,nse-lstm,lstm-lstm}.toml``, with and without sentence-level
checkpointing (``head.checkpoint_sentences``), one training step (forward, backward, Adam step) on a
batch of 32 synthetic documents of real size:

- ``typical``: 13 sentences per document (aclImdb's mean after our splitter is 13.4, median 11),
  sentence lengths drawn to match aclImdb's (median 18 words, mean 20), capped at 50 words;
- ``long``: 40 sentences per document (the configs' cap; 5% of aclImdb reviews reach 32), same lengths;
- ``2000``: 2,000 words per document (sentences of the same lengths until 2,000 words, the last one cut;
  about 100 sentences, past the configs' cap: the long documents of issue 24's memory table).

``lstmn-lstm`` is ``nse-lstm.toml`` with an LSTMN (whole tape) as the sentence reader, the LSTMN's row of
the memory table.

Every (config, checkpointing, size) runs in a fresh child process, which reports the **peak RSS delta**
of its first training step: ``ru_maxrss`` after the step minus the resident set just before it (CPU:
torch's CPU allocator has no peak counter; large buffers are mmapped and returned on free, so this is
the step's own high-water mark to within the allocator's slack), and, on CUDA, ``max_memory_allocated``
instead. Then ``tokens_per_s``: real words per second of the median of 3 further steps.
Prints one JSON line per run::

    OMP_NUM_THREADS=1 python benchmarks/document_memory.py [--sizes typical long] [--configs nse-nse]
        [--chunk 64] [--device cpu]

**Flat readers** (``--flat``): one reader over each document's 2,000 words as a single sequence (no
sentences), batch 32, k = 100 as the document configs: an embedding, the reader (``nse``; ``nse-ckpt``: ``nse`` with
``checkpoint_steps`` = C, the time-segment checkpointing of its loop; the ``lstmn`` with the whole tape;
``nn.LSTM``, the baseline), the mean of its states into a linear classifier, cross-entropy, one training
step (forward, backward, Adam) after a warm-up step on 8 words (kernels loaded, Adam's state allocated). Each in a fresh process with ``MALLOC_MMAP_THRESHOLD_=65536``, so that
every block of 64 KiB and more is mapped and unmapped when freed and the resident set follows the live
tensors; ``--batch`` lowers the batch (a plain flat NSE at batch 32 needs about 51 GB)::

    OMP_NUM_THREADS=1 python benchmarks/document_memory.py --flat nse nse-ckpt lstmn lstm [--batch 32]
        [--checkpoint-steps 45] [--words 2000]

``--chunk`` sets ``head.sentence_chunk`` (sentences per sentence-reader call and per checkpoint): with
checkpointing the peak holds one chunk's NSE tapes, about chunk * (W + 1) * W * k * 4 bytes for the
longest sentences (W words), so smaller chunks save memory and cost Python steps.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
# name -> (configs/imdb file, overrides)
CONFIGS = {"nse-nse": ("nse-nse", []), "nse-lstm": ("nse-lstm", []), "lstmn-lstm": ("nse-lstm", ["reader.name=lstmn"]),
           "lstm-lstm": ("lstm-lstm", [])}
SIZES = {"typical": 13, "long": 40, "2000": 0}  # sentences per document; 0: 2,000 words, as many sentences as that takes
WORDS_2000 = 2000
BATCH, VOCAB = 32, 20_000


def sentence_length(rng: random.Random, cap: int) -> int:
    """Lognormal with aclImdb's median (18) and mean (~20) sentence length, at least 1, capped."""
    return max(1, min(cap, round(rng.lognormvariate(2.89, 0.55))))


def current_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def run_one(config: str, checkpoint: bool, size: str, device: str, chunk: int = 0) -> dict:
    from memread.config import load_experiment
    from memread.criteria.document import RatingCriterion
    from memread.data.pipelines.document import pad_documents
    from memread.heads.hierarchical import HierarchicalClassifier
    from memread.readers import build_reader

    toml, overrides = CONFIGS[config]
    cfg = load_experiment(REPO / "configs" / "imdb" / f"{toml}.toml",
                          [*overrides, f"head.checkpoint_sentences={str(checkpoint).lower()}"]
                          + ([f"head.sentence_chunk={chunk}"] if chunk else []))
    t = cfg.head
    ratings = [1, 2, 3, 4, 7, 8, 9, 10]
    torch.manual_seed(0)
    sent = build_reader(cfg.reader, t.emb)
    doc = build_reader(t.doc_reader_config(), sent.output_size)
    model = HierarchicalClassifier(VOCAB, t, sent, doc, 0, len(ratings)).to(device)
    criterion = RatingCriterion(ratings)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.train.lr,
                           weight_decay=cfg.train.weight_decay)
    rng = random.Random(0)
    def document() -> list[list[int]]:
        if SIZES[size]:
            return [[rng.randrange(2, VOCAB) for _ in range(sentence_length(rng, cfg.data.max_words))]
                    for _ in range(SIZES[size])]
        doc, words = [], 0
        while words < WORDS_2000:
            n = min(sentence_length(rng, cfg.data.max_words), WORDS_2000 - words)
            doc.append([rng.randrange(2, VOCAB) for _ in range(n)])
            words += n
        return doc

    docs = [document() for _ in range(BATCH)]
    ids, mask, sent_mask = pad_documents(docs, 0)
    batch = {"ids": ids.to(device), "mask": mask.to(device), "sent_mask": sent_mask.to(device),
             "label": torch.tensor([rng.randrange(len(ratings)) for _ in docs], device=device)}
    words = int(mask.sum())
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        criterion(model(batch), batch).value.backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    before_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    before = current_rss()
    step()
    after_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if device == "cuda":
        peak, how = torch.cuda.max_memory_allocated() - base, "cuda max_memory_allocated - allocated before"
    else:
        peak, how = after_max - before, "ru_maxrss after - rss before"
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    dt = statistics.median(times)
    return {"config": config, "checkpoint_sentences": checkpoint, "sentence_chunk": t.sentence_chunk,
            "size": size, "device": device,
            "batch": BATCH, "sentences_per_doc": mask.size(1), "words": words,
            "max_sentence_len": int(mask.sum(2).max()), "peak_step_mib": round(peak / 2**20, 1),
            "peak_measure": how, "peak_reached_in_step": after_max > before_max or device == "cuda",
            "step_s": round(dt, 3), "tokens_per_s": round(words / dt), "threads": torch.get_num_threads()}


FLAT = ("nse", "nse-ckpt", "lstmn", "lstm")
HIDDEN = 100  # the document configs' reader size


def run_flat(model_name: str, batch: int, words: int, steps: int, device: str) -> dict:
    """One training step of a flat reader over ``batch`` documents of ``words`` tokens (see the module text)."""
    from torch import nn

    from memread.readers import build_reader
    from memread.readers.lstmn import LSTMNConfig
    from memread.readers.nse import NSEConfig

    torch.manual_seed(0)
    if model_name == "lstm":
        reader = nn.LSTM(HIDDEN, HIDDEN, batch_first=True)
    elif model_name == "lstmn":
        reader = build_reader(LSTMNConfig(hidden=HIDDEN, span=0), HIDDEN)
    else:
        reader = build_reader(NSEConfig(hidden=HIDDEN, checkpoint_steps=steps if model_name == "nse-ckpt" else 0),
                              HIDDEN)
    emb, out = nn.Embedding(VOCAB, HIDDEN), nn.Linear(HIDDEN, 8)
    model = nn.ModuleList([emb, reader, out]).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, VOCAB, (batch, words), generator=g).to(device)
    mask = torch.ones(batch, words, dtype=torch.bool, device=device)
    label = torch.randint(0, 8, (batch,), generator=g).to(device)

    def step(n):
        opt.zero_grad(set_to_none=True)
        x = emb(ids[:, :n])
        h = reader(x)[0] if model_name == "lstm" else reader(x, mask[:, :n]).states
        nn.functional.cross_entropy(out(h.mean(1)), label).backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()

    step(8)  # warm-up on 8 words: the compiled kernels loaded, Adam's state allocated

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    before = current_rss()
    t0 = time.perf_counter()
    step(words)
    dt = time.perf_counter() - t0
    if device == "cuda":
        peak, how = torch.cuda.max_memory_allocated() - base, "cuda max_memory_allocated - allocated before"
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
        how = "ru_maxrss after - rss before (MALLOC_MMAP_THRESHOLD_=65536)"
    return {"config": f"flat-{model_name}", "checkpoint_steps": steps if model_name == "nse-ckpt" else 0,
            "size": str(words), "device": device, "batch": batch, "words": batch * words, "hidden": HIDDEN,
            "peak_step_mib": round(peak / 2**20, 1), "peak_measure": how, "step_s": round(dt, 2),
            "tokens_per_s": round(batch * words / dt), "threads": torch.get_num_threads()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--chunk", type=int, default=0, help="override task.sentence_chunk (0 = the config's)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--one", nargs=3, metavar=("CONFIG", "CHECKPOINT", "SIZE"), help=argparse.SUPPRESS)
    ap.add_argument("--flat", nargs="+", choices=FLAT, help="flat readers over whole documents instead")
    ap.add_argument("--batch", type=int, default=BATCH, help="documents a batch (--flat)")
    ap.add_argument("--words", type=int, default=WORDS_2000, help="words a document (--flat)")
    ap.add_argument("--checkpoint-steps", type=int, default=45, help="C of nse-ckpt (--flat); about sqrt(words)")
    ap.add_argument("--one-flat", metavar="MODEL", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_flat:
        print(json.dumps(run_flat(args.one_flat, args.batch, args.words, args.checkpoint_steps, args.device)),
              flush=True)
        return
    if args.flat:
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
        for name in args.flat:
            cmd = [sys.executable, __file__, "--device", args.device, "--batch", str(args.batch), "--words",
                   str(args.words), "--checkpoint-steps", str(args.checkpoint_steps), "--one-flat", name]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(json.dumps({"config": f"flat-{name}", "batch": args.batch, "size": str(args.words),
                                  "error": out.stderr.strip().splitlines()[-1:]}), flush=True)
            else:
                print(out.stdout.strip(), flush=True)
        return
    if args.one:
        config, ckpt, size = args.one
        print(json.dumps(run_one(config, ckpt == "1", size, args.device, args.chunk)), flush=True)
        return
    for size in args.sizes:
        for config in args.configs:
            for ckpt in (False, True):
                cmd = [sys.executable, __file__, "--device", args.device, "--chunk", str(args.chunk),
                       "--one", config, str(int(ckpt)), size]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    print(json.dumps({"config": config, "checkpoint_sentences": ckpt, "size": size,
                                      "error": out.stderr.strip().splitlines()[-1:]}), flush=True)
                else:
                    print(out.stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
