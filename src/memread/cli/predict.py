"""Verbs that apply a trained model: ``export`` (a model archive), ``predict`` (JSON lines in and out),
``translate`` and ``bleu`` (a translation run's decoding)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memread.cli.common import SEED, add_data_root, add_device, beside, model_device, real, whole
from memread.errors import MemreadError


def add_export(sub) -> None:
    p = sub.add_parser("export",
                       help="a trained run as one portable model archive (safetensors weights, config, vocabulary)")
    p.add_argument("run_dir")
    p.add_argument("out", help="the archive file to write, e.g. lstmn-ptb.safetensors")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    add_data_root(p)
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from memread import __version__
    from memread.data.root import data_root
    from memread.experiment import load_trained
    from memread.inference.archive import export_archive, is_archive

    run_dir = Path(args.run_dir)
    if is_archive(run_dir):
        raise MemreadError(f"{run_dir}: already a model archive")
    cfg, task, model = load_trained(run_dir, data_root(args.data_root, run=run_dir), args.checkpoint)
    out = export_archive(cfg, task.vocab, model, Path(args.out), __version__,
                         source=f"{run_dir.resolve()} checkpoint_{args.checkpoint}.pt")
    print(json.dumps({"archive": str(out), "bytes": out.stat().st_size, "task": cfg.task, "memread": __version__}))
    return 0


def add_predict(sub) -> None:
    from memread.inference.predictor import MAX_GENERATE, MAX_INPUT_CHARS

    p = sub.add_parser("predict", help="apply a trained run or archive to new inputs: JSON lines in, JSON lines out",
                       description=f"Apply a trained run or archive to new inputs: JSON lines in (UTF-8), JSON lines "
                                   f"out, in order. Limits: an input line of at most {MAX_INPUT_CHARS:,} characters, "
                                   f"--generate at most {MAX_GENERATE:,} tokens; beyond them nothing is predicted.")
    p.add_argument("run_dir", help="a run directory or a model archive (memread export)")
    p.add_argument("input", nargs="?", default="-", help="JSON-lines file of inputs ('-' or none: stdin); formats in "
                   "memread.data.records: {\"text\": ...} (lm, classify, document), {\"premise\", \"hypothesis\"}, "
                   "{\"question\", \"answer\"}, {\"document\", \"query\", \"candidates\"}, {\"source\": ...}")
    p.add_argument("--batch-size", type=whole(1), default=32)
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--attention", action="store_true", help="add the model's attention trace where its reader has one")
    p.add_argument("--generate", type=whole(0), default=0, metavar="N",
                   help=f"language models: continue each text by N tokens (its words, as generate(text) reads "
                        f"them; at most {MAX_GENERATE:,})")
    p.add_argument("--sample", action="store_true", help="with --generate: sample instead of the most probable token")
    p.add_argument("--temperature", type=real(0, above=True), default=1.0)
    p.add_argument("--seed", type=SEED, default=None,
                   help="with --sample: a repeatable draw, the same as memread.load(RUN).generate(text, seed=SEED)")
    p.add_argument("--beam", type=whole(1), default=5, help="translation: beam size")
    p.add_argument("--alpha", type=real(0), default=1.0, help="translation: length normalisation")
    p.add_argument("--max-len", type=whole(1), default=50, help="translation: at most this many target words")
    add_device(p)
    add_data_root(p)
    p.set_defaults(func=cmd_predict)


def cmd_predict(args: argparse.Namespace) -> int:
    """JSON lines in (the task's record format, memread.data.records), JSON lines out, in order. Every line
    is checked before anything is predicted: a malformed line is reported naming it, and then nothing is
    predicted (exit 2), so an output never silently lacks a line."""
    from tqdm import tqdm

    from memread.data.root import data_root
    from memread.data.text import json_line
    from memread.inference.predictor import MAX_INPUT_CHARS, load, to_json

    _check_predict_flags(args)
    where_name = "stdin" if args.input == "-" else args.input
    if args.input == "-":  # bytes, decoded strictly as a file is, whatever the locale says
        stdin = getattr(sys.stdin, "buffer", None)
        text = _utf8(stdin.read(), where_name) if stdin is not None else sys.stdin.read()
    else:
        try:
            text = _utf8(Path(args.input).read_bytes(), where_name)
        except OSError as e:
            from memread.errors import os_error_line

            raise MemreadError(os_error_line(e, args.input)) from None
    device = model_device(args)
    predictor = load(args.run_dir, data_root(args.data_root, run=args.run_dir), device, args.checkpoint)
    items, errors = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{where_name}:{n}"
        if len(line) > MAX_INPUT_CHARS:  # before parsing it: a 50 MB document took 14.7 GB, then std::bad_alloc
            raise MemreadError(f"{where}: an input line of {len(line):,} characters is over the limit of "
                               f"{MAX_INPUT_CHARS:,}; split it into smaller inputs. Nothing was predicted")
        try:
            record = json_line(line, where, objects=False)  # a plain string is an input too (lm, classify, ...)
            example = predictor.example(record, where)
        except MemreadError as e:
            errors.append(str(e))
            continue
        items.append((n, record, example))
    if errors:
        for line in errors[:20]:
            print(f"memread: error: {line}", file=sys.stderr)
        more = f" ({len(errors) - 20} more not shown)" if len(errors) > 20 else ""
        raise MemreadError(f"{where_name}: {len(errors)} of {len(errors) + len(items)} input lines are malformed"
                           f"{more}; nothing was predicted")
    if args.generate and predictor.kind != "lm":
        raise MemreadError(f"--generate needs a language model; {args.run_dir} is a {predictor.kind} model")
    chunk = max(args.batch_size, 1) * 8
    bar = tqdm(total=len(items), desc="predict", unit="input", file=sys.stderr, disable=None, mininterval=1.0)
    for k in range(0, len(items), chunk):
        part = items[k : k + chunk]
        if args.generate:  # the prompt's words as Python's generate(text) reads them: no <eos> after them, same seed
            results = [predictor.generate(record if isinstance(record, str) else record["text"], args.generate,
                                          sample=args.sample, temperature=args.temperature, seed=args.seed)
                       for _, record, _ in part]
        else:
            results = predictor.predict_examples([ex for _, _, ex in part], args.batch_size, args.attention, args.beam,
                                                 args.alpha, args.max_len)
        for (n, record, _), result in zip(part, results):
            ident = {"id": record["id"]} if isinstance(record, dict) and "id" in record else {}
            print(json.dumps({"line": n, **ident, **to_json(result)}), flush=False)
        bar.update(len(part))
    bar.close()
    sys.stdout.flush()
    return 0


def _utf8(data: bytes, where: str) -> str:
    """``data`` decoded as UTF-8, strictly: undecodable bytes are one line naming the input line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise MemreadError(f"{where}:{line}: not UTF-8 text ({e.reason} at column {column}); save the input as "
                           f"UTF-8. Nothing was predicted") from None


def _check_predict_flags(args: argparse.Namespace) -> None:
    """``memread predict``'s ``--generate`` against the predictor's limit, refused in one line before the input or
    the model is read (the other numbers are typed with their ranges in the parser)."""
    from memread.inference.predictor import MAX_GENERATE

    if not 0 <= args.generate <= MAX_GENERATE:
        raise MemreadError(f"--generate must be in [0, {MAX_GENERATE}] tokens "
                           f"(memread.inference.predictor.MAX_GENERATE), got {args.generate}")


def add_translate(sub) -> None:
    p = sub.add_parser("translate", help="translate tokenized sentences from stdin (one a line, lowercased as the "
                       "training data) with a translation run")
    p.add_argument("run_dir")
    _decoding_options(p)
    add_data_root(p)
    p.set_defaults(func=cmd_translate)


def cmd_translate(args: argparse.Namespace) -> int:
    from memread.decoding import translate

    _check_decoding(args)
    _, task, model = _trained_translator(args)
    sources = [line.lower().split() for line in sys.stdin.read().splitlines()]
    for words in translate(model, task.data, sources, args.beam, args.alpha, args.max_len, args.batch_size):
        print(" ".join(words))
    return 0


def add_bleu(sub) -> None:
    p = sub.add_parser("bleu", help="decode a split of a translation run; corpus BLEU (sacrebleu, tokenized text)")
    p.add_argument("run_dir")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    _decoding_options(p)
    add_data_root(p)
    p.set_defaults(func=cmd_bleu)


def cmd_bleu(args: argparse.Namespace) -> int:
    from memread.bleu import corpus_bleu
    from memread.decoding import translate

    _check_decoding(args)
    _, task, model = _trained_translator(args)
    pairs = task.data.pairs(args.split)
    hyps = [" ".join(w) for w in translate(model, task.data, [list(p.source) for p in pairs], args.beam, args.alpha,
                                             args.max_len, args.batch_size)]
    result = corpus_bleu(hyps, [" ".join(p.target) for p in pairs])
    record = {"run_dir": args.run_dir, "split": args.split, "checkpoint": args.checkpoint, "beam": args.beam,
              "alpha": args.alpha, "max_len": args.max_len, **result.to_dict()}
    run_dir = Path(args.run_dir)
    (beside(run_dir, f"translations_{args.split}.txt")).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    (beside(run_dir, f"bleu_{args.split}.json")).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"BLEU = {result.bleu:.2f} ({args.split}, {result.sentences} sentences) {result.signature}", file=sys.stderr)
    print(json.dumps(record))
    return 0


def _decoding_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=whole(1), default=1, help="beam size (1: greedy decoding, as the NSE paper)")
    p.add_argument("--alpha", type=real(0), default=1.0, help="length normalisation: score / length^alpha (0: none)")
    p.add_argument("--max-len", type=whole(1), default=50, help="at most this many target words per sentence")
    p.add_argument("--batch-size", type=whole(1), default=64, help="sentences decoded together")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    add_device(p)


def _check_decoding(args: argparse.Namespace) -> None:
    if args.beam < 1 or args.max_len < 1 or args.batch_size < 1:
        raise MemreadError(f"--beam, --max-len and --batch-size must be at least 1, "
                           f"got {args.beam}, {args.max_len}, {args.batch_size}")


def _trained_translator(args: argparse.Namespace):
    from memread.data.root import data_root
    from memread.experiment import load_trained, read_run_config

    device = model_device(args)
    run_dir = Path(args.run_dir)
    cfg = read_run_config(run_dir)
    if cfg.task != "translate":
        raise MemreadError(f"{run_dir}: a {cfg.task!r} run (data.name = {cfg.data.name!r}); "
                           f"{args.command} needs a translation run")
    return load_trained(run_dir, data_root(args.data_root, run=run_dir), args.checkpoint, device)
