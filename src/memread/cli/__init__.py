"""The ``memread`` command.

    memread quickstart                      train a memoryless baseline and a memory reader on built-in stories
    memread train CONFIG [--set k=v ...]    train an experiment (TOML under configs/)
    memread train --resume RUN_DIR          continue a stopped or killed run exactly
    memread train CONFIG --nproc N          the same with N processes (torchrun, DDP); --device cuda for GPUs
    memread eval RUN_DIR [--split test]     metrics of the best checkpoint
    memread compare RUN_A RUN_B             paired significance test of two runs on a split (p-value, interval)
    memread export RUN_DIR OUT              the run as one model archive (safetensors weights, config, vocabulary)
    memread predict RUN_OR_ARCHIVE [FILE]   JSON lines in (the task's record format), JSON lines out
    memread bench READER [--batch ...]      training tokens/s against torch's fused nn.LSTM
    memread attend RUN_DIR "a sentence"     PNG of which earlier words each word attended to
    memread data download NAME              fetch and lay out a public dataset (memread data list: what is there)
    memread data stories OUT_DIR            write the built-in stories (CBT format and LM text)
    memread data cloze BOOKS... --out DIR   CBT-recipe cloze questions from raw books, split by book
    memread bench iaa [--set k=v ...]       training tokens/s of the IAA reader against the AS Reader
    memread bench nse-decoder [--set ...]   training tokens/s of the NSE-NSE decoder against nn.LSTM
    memread ensemble RUN_DIR...             accuracy of the averaged answer distributions of cloze runs
    memread picture RUN_DIR                 PNG of a cloze run's query and document attention per step
    memread match-params READER --vocab V   the reader's hidden size whose LM matches the LSTM LM's size
    memread cbt-lm RUN_DIR FILE...          a language model's accuracy on CBT-format cloze files
    memread attention-span RUN_DIR...       average attention by history position (table + PNGs)
    memread curves RUN_DIR... [--out PNG]   validation metric of runs by epoch (table + PNG)
    memread translate RUN_DIR < SOURCE      translate tokenized sentences (one a line) with a translation run
    memread bleu RUN_DIR [--split test]     decode a split, print corpus BLEU with sacrebleu's signature

Errors caused by input (or met on the run folder and the data root) print one line ``memread: error: ...``
and exit with status 2; ``memread --debug`` (or ``MEMREAD_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from memread.errors import MemreadError


def _beside(run: Path, name: str) -> Path:
    """Where a verb writes its output for a run: inside a run directory, or beside a model archive
    (``model.safetensors`` -> ``model.NAME``)."""
    return run / name if run.is_dir() else run.with_name(f"{run.stem}.{name}")


def _add_device(p: argparse.ArgumentParser, what: str = "") -> None:
    p.add_argument("--device", default=None,
                   help=f"{what}auto, cpu, cuda, cuda:N or mps (default: {'the config' if what else 'cpu'})")


def _device(args: argparse.Namespace) -> str:
    """The device a verb other than train runs its model on: ``--device`` (default cpu), checked before any
    work so that a device torch does not have here is one line (``memread: error: --device ...``)."""
    from memread.training.distributed import resolve_device

    name = args.device or "cpu"
    try:
        return str(resolve_device(name))
    except MemreadError as e:  # resolve_device speaks of train.device; here it is the flag
        line = str(e).replace(f"train.device = {name!r}", f"--device {name!r}", 1)
        raise MemreadError(line.replace("use device = ", "use --device ")) from None
    except RuntimeError as e:  # torch.device("gpu"): not a device name at all
        raise MemreadError(f"--device {name!r}: not a device (auto, cpu, cuda, cuda:N or mps)") from None


def _at_least(flag: str, value: float, low: float, note: str = "") -> None:
    """Refuse a number flag below ``low`` (or NaN) in one line, before any work is done."""
    if not value >= low:  # NaN is refused too
        raise MemreadError(f"{flag} must be at least {low}{note}, got {value}")


def _add_data_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", default=None,
                   help="folder holding the datasets (default: $MEMREAD_DATA, else the one a run given here was "
                        "trained with, else ~/.cache/memread/data)")


def cmd_train(args: argparse.Namespace) -> int:
    from memread.config import load_experiment
    from memread.data.root import data_root
    from memread.experiment import final_evaluation, read_run_config, resume_run, start_run
    from memread.training.distributed import placement

    if args.nproc > 1:
        return _launch_torchrun(args)
    root = data_root(args.data_root, run=args.resume)  # a resumed run: the root it was trained with, by default
    overrides = list(args.set) + ([f'train.device="{args.device}"'] if args.device else [])
    if args.resume:
        run_dir = Path(args.resume)
        args.on_interrupt = (f"before training went on: the run is as its last checkpoint left it; continue with: "
                             f"memread train --resume {run_dir}")
        where = placement(read_run_config(run_dir, overrides).train.device)
        trainer = resume_run(run_dir, root, overrides, where)
    else:
        if not args.config:
            raise MemreadError("train needs a CONFIG file, or --resume RUN_DIR")
        args.on_interrupt = "before training began: nothing was trained; the same command starts the run again"
        cfg = load_experiment(args.config, overrides)
        run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / Path(args.config).with_suffix("").name
        where = placement(cfg.train.device)
        trainer = start_run(cfg, run_dir, root, where)
    if where.main:
        print(f"run directory: {run_dir}" + (f" ({where.world} processes)" if where.distributed else "")
              + f", device {where.device}", file=sys.stderr)
    with trainer:  # holds the run directory's lock until final.json is written
        try:
            trainer.fit()
        except KeyboardInterrupt:
            print(f"\ninterrupted; continue with: memread train --resume {run_dir}", file=sys.stderr)
            return 130
        except (MemreadError, OSError) as e:  # a fault while training: say how to go on from what is saved
            raise MemreadError(_with_resume_hint(e, run_dir)) from e
        except (RuntimeError, MemoryError) as e:  # memory that ran out at a step: the same, one line
            from memread.errors import allocation_failure

            line = allocation_failure(e)
            if line is None:
                raise
            raise MemreadError(_with_resume_hint(MemreadError(
                f"out of memory while training ({line}): lower train.batch_size or the model's sizes"), run_dir)) from e
        if not where.main:
            return 0
        args.on_interrupt = (f"in the final evaluation: training is over and its checkpoints are saved; memread "
                             f"train --resume {run_dir} runs the final evaluation again (final.json)")
        result = final_evaluation(run_dir, root, progress=trainer.cfg.train.progress, device=str(where.device))
    print(_ending(trainer, run_dir), file=sys.stderr)
    print(json.dumps({"run_dir": str(run_dir), "stopped": trainer.stopped, **result}))
    return 0


def _ending(trainer, run_dir: Path) -> str:
    """How a finished run ended, in one line: ``stopped: REASON (what it means)``."""
    T, why = trainer.cfg.train, trainer.stopped
    if why == "max_minutes":
        what = (f"train.max_minutes = {T.max_minutes:g} spent, at step {trainer.global_step}; memread train --resume "
                f"{run_dir} goes on with a new allowance")
    elif why == "max_steps":
        what = f"train.max_steps = {T.max_steps} reached"
    elif why == "early":
        what = (f"the learning rate fell below train.min_lr = {T.min_lr:g}" if T.min_lr and trainer.lr < T.min_lr
                else f"no improvement on valid in train.patience = {T.patience} evaluations")
    elif why == "epochs":
        what = f"train.epochs = {T.epochs} done"
    else:
        what = "finished"
    return f"stopped: {why} ({what})"


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
    device = _device(args)
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


def cmd_explore(args: argparse.Namespace) -> int:
    """The explorer page (memread.explore) on 127.0.0.1, its address printed; or, with --html, the same view of
    given inputs as one self-contained HTML file."""
    from memread.data.root import data_root
    from memread.data.text import json_line
    from memread.inference.predictor import load

    predictor = load(args.run_dir, data_root(args.data_root, run=args.run_dir), _device(args), args.checkpoint)
    if args.html:
        from memread.explore.export import write_html

        items = [json_line(t, f"--text {i}", objects=False) if t.lstrip().startswith("{") else t
                 for i, t in enumerate(args.text, 1)]
        if args.inputs:
            try:
                lines = Path(args.inputs).read_text(encoding="utf-8").splitlines()
            except OSError as e:
                from memread.errors import os_error_line

                raise MemreadError(os_error_line(e, args.inputs)) from None
            items += [json_line(line, f"{args.inputs}:{n}", objects=False)
                      for n, line in enumerate(lines, 1) if line.strip()]
        if not items:
            raise MemreadError("--html needs inputs: --text TEXT (repeatable) or --inputs FILE (JSON lines, as "
                               "memread predict reads them)")
        out = write_html(predictor, items, Path(args.html), args.max_tokens)
        print(json.dumps({"html": str(out), "inputs": len(items)}))
        return 0
    from memread.explore.server import serve

    server = serve(predictor, args.port, args.split, args.max_tokens)
    print(f"memread explore: {server.url}  ({predictor.kind} model {args.run_dir}; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _add_explore(sub) -> None:
    from memread.explore.view import MAX_TOKENS

    p = sub.add_parser("explore", help="a local page (127.0.0.1) showing what a trained reader attends to in typed "
                       "text; --html: one self-contained file")
    p.add_argument("run_dir", help="a run directory or a model archive (memread export)")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--split", default="test", help="the split whose examples the page offers (default test)")
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS,
                   help=f"the longest input the page reads, in tokens (default {MAX_TOKENS}); longer ones are refused")
    p.add_argument("--html", metavar="OUT.html", help="write the view of the inputs to one HTML file and exit")
    p.add_argument("--text", action="append", default=[], metavar="TEXT",
                   help="with --html: an input, a text or a JSON record (repeatable)")
    p.add_argument("--inputs", metavar="FILE", help="with --html: a JSON-lines file of inputs, as memread predict reads")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    _add_device(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_explore)


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
    """``memread predict``'s numbers, refused in one line before the input or the model is read."""
    import math

    from memread.inference.predictor import MAX_GENERATE

    for flag, value in (("--batch-size", args.batch_size), ("--beam", args.beam), ("--max-len", args.max_len)):
        _at_least(flag, value, 1)
    if not 0 <= args.generate <= MAX_GENERATE:
        raise MemreadError(f"--generate must be in [0, {MAX_GENERATE}] tokens "
                           f"(memread.inference.predictor.MAX_GENERATE), got {args.generate}")
    if not (0 < args.temperature < math.inf):  # NaN too: it sampled from NaN probabilities, a traceback
        raise MemreadError(f"--temperature must be a number greater than 0, got {args.temperature}")
    if args.seed is not None and not abs(args.seed) <= 10**12:
        raise MemreadError(f"--seed must be in [-10^12, 10^12], got {args.seed}")


def _launch_torchrun(args: argparse.Namespace) -> int:
    """``memread train --nproc N ...``: the same command under PyTorch's own launcher (torchrun, one machine).
    The config, and a batch that splits over the processes, are checked here first, before any process starts or
    writes the run folder; a process that fails has said why (process 0 speaks for all), and torchrun's report of
    the failure is left out: one line, the failing process's exit status."""
    import os

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    _check_split(args)
    argv = ["train"] + ([args.config] if args.config else [])
    for flag, value in (("--run-dir", args.run_dir), ("--resume", args.resume), ("--data-root", args.data_root),
                        ("--device", args.device)):
        if value:
            argv += [flag, value]
    for override in args.set:
        argv += ["--set", override]
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # torchrun's own default, without its four lines of warning
    if not (args.debug or os.environ.get("MEMREAD_DEBUG", "") not in ("", "0")):
        import logging

        for name in ("torch.distributed.elastic", "torch.distributed.run"):  # its report of a failure: ours is one line
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        torchrun(["--standalone", "--nproc-per-node", str(args.nproc), "--module", "memread", *argv])
    except ChildFailedError as e:
        failures = getattr(e, "failures", {}) or {}
        first = getattr(failures.get(0), "exitcode", None)
        if first in (2, 130):  # process 0 said why in its one line (an error, or an interrupt)
            return first
        rank, failure = min((r, f) for r, f in failures.items() if f.exitcode not in (-15, None)) \
            if any(f.exitcode not in (-15, None) for f in failures.values()) else (0, failures.get(0))
        code = getattr(failure, "exitcode", 1)
        raise MemreadError(f"training with --nproc {args.nproc}: process {rank} failed (exit status {code}), and "
                           f"only process 0 speaks: run it again with --debug to see every process's error") from None
    return 0


def _check_split(args: argparse.Namespace) -> None:
    """Before torchrun starts ``--nproc`` processes: the config reads, and its training batch splits evenly over
    them (a stream's columns must; the processes refused it only after the run folder was written)."""
    from memread.config import load_experiment
    from memread.data.root import data_root
    from memread.experiment import build_task, read_run_config

    overrides = list(args.set) + ([f'train.device="{args.device}"'] if args.device else [])
    if args.resume:
        cfg = read_run_config(Path(args.resume), overrides)
    elif not args.config:
        raise MemreadError("train needs a CONFIG file, or --resume RUN_DIR")
    else:
        cfg = load_experiment(args.config, overrides)
    if cfg.train.batch_size % args.nproc == 0:
        return
    task = build_task(cfg, data_root(args.data_root, run=args.resume))
    batches = task.batches("train", cfg.train.batch_size, 0, cfg.train.seed)
    try:
        batches.shard(0, args.nproc)
    except MemreadError as e:
        raise MemreadError(f"{e}. Nothing was started or written") from None


def _with_resume_hint(e: Exception, run_dir: Path) -> str:
    from memread.errors import os_error_line
    from memread.training.loop import Diverged

    line = os_error_line(e) if isinstance(e, OSError) else str(e)
    if isinstance(e, Diverged):
        return line  # it says itself what is kept
    if (run_dir / "checkpoint_last.pt").exists():
        return f"{line}; checkpoint_last.pt is intact: continue with memread train --resume {run_dir}"
    return f"{line}; no checkpoint was written yet: start the run again in {run_dir}"


def cmd_eval(args: argparse.Namespace) -> int:
    from memread.data.root import data_root
    from memread.experiment import load_trained
    from memread.training.loop import evaluate

    _at_least("--batch-size", args.batch_size, 0, " (0: the run's own evaluation batch size)")
    args.on_interrupt = "in the evaluation: nothing was written"
    device = _device(args)
    cfg, task, model = load_trained(Path(args.run_dir), data_root(args.data_root, run=args.run_dir), args.checkpoint,
                                    device, context=args.context)
    # a run's own eval batch size belongs to its own protocol
    bs = args.batch_size or (args.context is None and cfg.train.eval_batch_size) or task.default_eval_batch_size
    metrics = evaluate(model, task, args.split, bs, progress=sys.stderr.isatty())
    told = {"context": args.context} if args.context else {}
    print(json.dumps({"run_dir": args.run_dir, "split": args.split, "checkpoint": args.checkpoint, **told, **metrics}))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from memread.data.root import data_root
    from memread.tools.compare import compare_runs, compare_seeds, ending_fields, summary_text

    ledger = _reproduction(None, "memread compare --record").ledger if args.record else None  # before any work
    start = time.perf_counter()
    root = data_root(args.data_root, run=Path(args.run_a) / "seed1" if args.seeds else args.run_a)  # run A's root
    if args.seeds:
        result = compare_seeds(args.run_a, args.run_b, args.seeds, root, args.split,
                               args.checkpoint, args.metric, args.batch_size, _device(args), args.resamples,
                               args.confidence, args.seed, progress=sys.stderr.isatty())
    else:
        result = compare_runs(args.run_a, args.run_b, root, args.split, args.checkpoint,
                              args.metric, args.batch_size, _device(args), args.resamples, args.confidence,
                              args.seed, progress=sys.stderr.isatty())
    print(json.dumps(result))
    print(summary_text(result), file=sys.stderr)
    if args.record:
        from memread.experiment import read_run_config

        first = Path(args.run_a) / "seed1" if args.seeds else Path(args.run_a)
        command = shlex.join(["memread", *sys.argv[1:]]) if sys.argv[1:2] == ["compare"] else "memread compare"
        line = ledger.result_line(result, args.record, read_run_config(first).data.name, command, ledger.git_commit(),
                                  time.perf_counter() - start, args.paper_value)
        seeds = range(1, (args.seeds or 0) + 1)
        runs = [[Path(r) / f"seed{s}" for s in seeds] if args.seeds else [Path(r)] for r in (args.run_a, args.run_b)]
        # how each run ended (a run a cap stopped while still improving: not converged) and what it cost
        line.update(ending_fields(*runs) or {})
        out = ledger.results_path(args.results)
        ledger.append_lines(out, [line])
        print(f"appended {args.record} to {out}", file=sys.stderr)
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    from memread.tools.quickstart import quickstart

    quickstart(Path(args.out), steps=args.steps, seed=args.seed)
    return 0


# benches of readers that are not one sequence in, states out: each against its named baseline
SPECIAL_BENCHES = {
    "iaa": ("memread.bench.cloze", "bench_iaa_command"),  # (query, document) reader vs the AS Reader
    "lstmn-deep-fusion": ("memread.bench.fusion", "bench_deep_fusion_command"),  # decoder vs LSTM + attention
    "nse-decoder": ("memread.bench.nse_decoder", "bench_nse_decoder_command"),  # NSE-NSE decoder vs nn.LSTM
}


def cmd_bench(args: argparse.Namespace) -> int:
    args.device = _device(args)  # the special benches read it from args
    if args.reader in SPECIAL_BENCHES:
        import importlib

        module, function = SPECIAL_BENCHES[args.reader]
        print(json.dumps(getattr(importlib.import_module(module), function)(args)))
        return 0
    from memread.bench.readers import bench

    print(json.dumps(bench(args.reader, batch=args.batch, steps=args.steps, emb=args.emb, hidden=args.hidden,
                           vocab=args.vocab, repeats=args.repeats, reader_options=args.set,
                           match_params=args.match_params, device=args.device)))
    return 0


def cmd_attend(args: argparse.Namespace) -> int:
    from memread.tools.attend import attend
    from memread.data.root import data_root

    device = _device(args)
    out = Path(args.out) if args.out else None
    print(attend(Path(args.run_dir), args.sentence, out, data_root(args.data_root, run=args.run_dir), device))
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from memread.data import download
    from memread.data.root import data_root

    if args.data_command == "download":
        path = download.download(args.dataset, data_root(args.data_root), url=args.url, verify=not args.no_verify)
        print(f"{args.dataset}: ready in {path}")
    elif args.data_command == "list":
        root = data_root(args.data_root)
        rows = download.listing(root)
        if args.json:
            for row in rows:
                print(json.dumps({"data_root": str(root), **row}))
        else:
            print(download.format_listing(rows, root))
    elif args.data_command == "stories":
        from memread.data.cbt import write_cbt
        from memread.data.stories import story_splits, story_text

        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        splits = story_splits(args.n, max(1, args.n // 10), max(1, args.n // 10), args.seed)
        for split, examples in splits.items():
            write_cbt(examples, out / f"stories_{split}.txt")
            (out / f"stories_{split}.lm.txt").write_text("\n".join(story_text(examples)) + "\n", encoding="utf-8")
        print(f"wrote {', '.join(f'{k}: {len(v)}' for k, v in splits.items())} stories to {out}")
    elif args.data_command == "cloze":
        from memread.data.cloze_builder import spacy_tagger, write_cloze

        names = lambda text: [b for b in (text or "").split(",") if b]  # noqa: E731
        tagger = spacy_tagger() if args.tagger == "spacy" else None
        manifest = write_cloze([Path(b) for b in args.books], Path(args.out), names(args.classes),
                               names(args.valid_books), names(args.test_books), seed=args.seed, stride=args.stride,
                               tagger=tagger)
        print(json.dumps({"out": args.out, "questions": manifest["questions"]}))
    return 0


def cmd_match_params(args: argparse.Namespace) -> int:
    import dataclasses

    from memread.bench.readers import reader_config
    from memread.params import lm_parameters, match_lm_hidden

    for flag, value in (("--vocab", args.vocab), ("--emb", args.emb), ("--hidden", args.hidden)):
        _at_least(flag, value, 1)
    cfg = reader_config(args.reader, args.hidden, args.set)
    if "hidden" not in {f.name for f in dataclasses.fields(cfg)}:
        raise MemreadError(f"match-params: reader {args.reader!r} has no hidden size to choose")
    base = reader_config(args.baseline, args.hidden, [])
    m = match_lm_hidden(cfg, args.vocab, args.emb, base, args.tie_weights)
    print(json.dumps({"reader": args.reader, "hidden": m.hidden, "params": m.params, "baseline": args.baseline,
                      "baseline_hidden": args.hidden, "baseline_params": m.target, "difference": m.difference,
                      "vocab": args.vocab, "emb": args.emb,
                      "params_without_embedding": m.params - args.vocab * args.emb,
                      "baseline_without_embedding":
                          lm_parameters(base, args.vocab, args.emb, args.tie_weights) - args.vocab * args.emb}))
    return 0


def _trained_lm(args: argparse.Namespace, run_dir: str, device: str):
    from memread.data.root import data_root
    from memread.experiment import load_trained

    cfg, task, model = load_trained(Path(run_dir), data_root(args.data_root, run=run_dir), args.checkpoint, device)
    if cfg.task != "lm":
        raise MemreadError(f"{run_dir}: a {cfg.task!r} run (data.name = {cfg.data.name!r}); "
                           f"{args.command} needs a language model")
    return cfg, task, model


def cmd_cbt_lm(args: argparse.Namespace) -> int:
    from memread.tools.cbt_lm import evaluate_cbt_file

    device = _device(args)
    _, task, model = _trained_lm(args, args.run_dir, device)
    for path in args.files:
        r = evaluate_cbt_file(model, task.vocab, Path(path), args.context_lines or None, args.questions_per_batch)
        print(json.dumps({"run_dir": args.run_dir, "checkpoint": args.checkpoint, **r}), flush=True)
    return 0


def cmd_attention_span(args: argparse.Namespace) -> int:
    from memread.tools.attention_span import (attention_by_position, document_attention, document_png, position_png,
                                        position_table)

    device = _device(args)
    out = Path(args.out)
    rows, pictures = {}, []
    for run_dir in args.run_dirs:
        cfg, task, model = _trained_lm(args, run_dir, device)
        name = Path(run_dir).name
        rows[name] = attention_by_position(model, task, args.split, args.batch_size, args.max_batches)
        words, weights = document_attention(model, task, args.split, args.document, args.tokens)
        if weights.size(1) == 0:  # a tape that starts empty (the LSTMN): `memread attend` draws one text
            print(f"{name}: its history starts empty, so there is no per-token window picture; use memread attend",
                  file=sys.stderr)
            continue
        where = f"document {args.document}" if getattr(cfg.data, "documents", False) else "stream start"
        pictures.append(out / f"attention_document_{name}.png")
        document_png(words, weights, pictures[-1], title=f"{name}\n{args.split}, {where}, {len(words)} tokens")
    print(position_table(rows))
    position_png(rows, out / "attention_by_position.png")
    (out / "attention_by_position.json").write_text(json.dumps({"split": args.split, "runs": rows}, indent=2) + "\n",
                                                    encoding="utf-8")
    written = [out / "attention_by_position.png", out / "attention_by_position.json", *pictures]
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0


def cmd_curves(args: argparse.Namespace) -> int:
    from memread.tools.curves import curves_png, curves_table, read_curve, run_names

    if args.out != "-":  # before the runs are read or the table printed
        from memread.tools.viz import check_picture_path

        check_picture_path(Path(args.out))
    runs = [Path(r) for r in args.run_dirs]
    curves = [read_curve(r, args.metric, name) for r, name in zip(runs, run_names(runs))]
    print(curves_table(curves))
    if args.out != "-":
        png = curves_png(curves, Path(args.out), args.title, args.log_y)
        print(f"wrote {png}", file=sys.stderr)
    return 0


def _trained_translator(args: argparse.Namespace):
    from memread.data.root import data_root
    from memread.experiment import load_trained, read_run_config

    device = _device(args)
    run_dir = Path(args.run_dir)
    cfg = read_run_config(run_dir)
    if cfg.task != "translate":
        raise MemreadError(f"{run_dir}: a {cfg.task!r} run (data.name = {cfg.data.name!r}); "
                           f"{args.command} needs a translation run")
    return load_trained(run_dir, data_root(args.data_root, run=run_dir), args.checkpoint, device)


def _decoding_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=int, default=1, help="beam size (1: greedy decoding, as the NSE paper)")
    p.add_argument("--alpha", type=float, default=1.0, help="length normalisation: score / length^alpha (0: none)")
    p.add_argument("--max-len", type=int, default=50, help="at most this many target words per sentence")
    p.add_argument("--batch-size", type=int, default=64, help="sentences decoded together")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    _add_device(p)


def _check_decoding(args: argparse.Namespace) -> None:
    if args.beam < 1 or args.max_len < 1 or args.batch_size < 1:
        raise MemreadError(f"--beam, --max-len and --batch-size must be at least 1, "
                           f"got {args.beam}, {args.max_len}, {args.batch_size}")


def cmd_translate(args: argparse.Namespace) -> int:
    from memread.decoding import translate

    _check_decoding(args)
    _, task, model = _trained_translator(args)
    sources = [line.lower().split() for line in sys.stdin.read().splitlines()]
    for words in translate(model, task.data, sources, args.beam, args.alpha, args.max_len, args.batch_size):
        print(" ".join(words))
    return 0


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
    (_beside(run_dir, f"translations_{args.split}.txt")).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    (_beside(run_dir, f"bleu_{args.split}.json")).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"BLEU = {result.bleu:.2f} ({args.split}, {result.sentences} sentences) {result.signature}", file=sys.stderr)
    print(json.dumps(record))
    return 0


def cmd_ensemble(args: argparse.Namespace) -> int:
    from memread.data.root import data_root
    from memread.tools.ensemble import ensemble

    device = _device(args)
    root = data_root(args.data_root, run=args.run_dirs[0])
    print(json.dumps(ensemble([Path(r) for r in args.run_dirs], root, args.split, args.checkpoint,
                              args.batch_size, device)))
    return 0


def cmd_picture(args: argparse.Namespace) -> int:
    from memread.data.root import data_root
    from memread.tools.picture import picture

    device = _device(args)
    out = Path(args.out) if args.out else _beside(Path(args.run_dir), f"attention_{args.split}_{args.index}.png")
    root = data_root(args.data_root, run=args.run_dir)
    print(json.dumps(picture(Path(args.run_dir), root, out, args.split, args.index, args.checkpoint, device)))
    return 0


def _reproduction(repo: str | None, who: str = "memread reproduce"):
    """The ``reproduction`` package of a memread checkout (its ``reproduction/`` folder, which is not installed with
    memread): ``repo`` where given, else the first folder from the current one up that holds ``reproduction/`` and
    ``results/results.jsonl``. Its modules are imported from there (``reproduction.rows``, ``.ledger``, ...).
    Outside a checkout: one line that says so."""
    import importlib

    here = Path.cwd().resolve()
    found = [Path(repo).resolve()] if repo else [d for d in (here, *here.parents)
                                                  if (d / "results" / "results.jsonl").is_file()]
    found = [d for d in found if (d / "reproduction" / "__init__.py").is_file()]
    if not found:
        raise MemreadError(f"{who} needs a memread checkout (its reproduction/ folder): run it from a clone, or pass "
                           f"--repo DIR" if who == "memread reproduce" else
                           f"{who} needs a memread checkout (its reproduction/ folder and results/results.jsonl): run "
                           f"it from a clone")
    checkout = found[0]
    loaded = sys.modules.get("reproduction")
    if loaded is not None and Path(loaded.__file__).resolve().parent.parent != checkout:
        raise MemreadError(f"{who}: the reproduction package of {Path(loaded.__file__).parent.parent} is loaded "
                           f"already; run it from that checkout")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    package = importlib.import_module("reproduction")
    for name in ("rows", "ledger", "verdicts", "render", "train"):
        importlib.import_module(f"reproduction.{name}")
    return package


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``memread reproduce list [--markdown]``: every table row of the four papers, memread's config and best recorded
    number for it, and a verdict; ``memread reproduce ROW_ID --seeds N``: train the row's config with seeds 1..N
    (resuming runs that are there), append valid and test numbers to the results file, print the mean lines. Both
    need a checkout (:func:`_reproduction`)."""
    r = _reproduction(args.repo)
    if args.target == "list":
        table, results = r.rows.rows(), r.ledger.load_results(r.ledger.results_path(args.results))
        if args.plot:
            print(f"wrote {r.render.claims_png(results, Path(args.plot))}", file=sys.stderr)
        if args.markdown:
            print(r.render.render_markdown(table, results), end="")
        elif args.details:
            print(r.render.row_details(r.rows.find_row(args.details, table), results, table))
        elif args.long:
            print(r.render.format_listing_long(table, results))
        else:
            print(r.render.format_listing(table, results))
        return 0
    if args.markdown or args.plot or args.long or args.details:
        flag = next(f for f, on in (("--markdown", args.markdown), ("--plot", args.plot), ("--long", args.long),
                                    ("--details", args.details)) if on)
        raise MemreadError(f"{flag} goes with `memread reproduce list`")
    try:
        lines = r.train.reproduce(args.target, seeds=args.seeds, run_root=args.run_root, overrides=args.set,
                                  data_root=args.data_root, results=args.results, device=args.device)
    except KeyboardInterrupt:
        print("\ninterrupted; the same command resumes its runs", file=sys.stderr)
        return 130
    for line in lines:
        if "seed" not in line:
            print(json.dumps(line))
    return 0


# ----------------------------------------------------------------------------- memread config: schema, show


def cmd_config(args: argparse.Namespace) -> int:
    """``memread config schema [--out FILE]``: the JSON Schema of experiment files, for TOML editors (generated from
    the config dataclasses, :mod:`memread.schema`); ``memread config show CONFIG [--set ...] [--json]``: the
    experiment as memread reads it, every key with its default filled in, as TOML (or JSON) that loads back the
    same."""
    from memread.schema import experiment_schema, show_toml

    if args.action == "schema":
        text = json.dumps(experiment_schema(), indent=2) + "\n"
        if args.out is None or args.out == "-":
            sys.stdout.write(text)
        else:
            from memread.training.checkpoint import write_text_atomically

            write_text_atomically(Path(args.out), text)
            print(f"wrote {args.out}: add `#:schema {args.out}` (a path from the TOML file, or a URL) as the first "
                  f"line of an experiment file, or a rule in .taplo.toml, for Taplo / Even Better TOML",
                  file=sys.stderr)
        return 0
    from memread.config import load_experiment

    cfg = load_experiment(args.config, args.set)
    sys.stdout.write(cfg.to_json() + "\n" if args.json else show_toml(cfg, args.config))
    return 0


def _add_config_parser(sub) -> None:
    p = sub.add_parser("config", help="experiment files: their JSON Schema for TOML editors, or one shown resolved")
    actions = p.add_subparsers(dest="action", required=True)
    c = actions.add_parser("schema", help="the JSON Schema of every [data]/[reader]/[head]/[criterion]/[train] choice "
                           "(editors validate and complete experiment files with it)")
    c.add_argument("--out", metavar="FILE", default=None, help="write it to FILE (default: stdout)")
    c = actions.add_parser("show", help="an experiment as memread reads it: every key, defaults filled in (TOML)")
    c.add_argument("config", metavar="CONFIG", help="the experiment file (TOML)")
    c.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a config value")
    c.add_argument("--json", action="store_true", help="JSON (as config.json of a run) instead of TOML")
    p.set_defaults(func=cmd_config)


def build_parser() -> argparse.ArgumentParser:
    from memread import __version__
    # torch-free: the token bench's defaults, which bench iaa/fusion check against
    from memread.bench import TOKEN_FLAGS

    parser = argparse.ArgumentParser(prog="memread", description="Memory-augmented neural readers.")
    parser.add_argument("--version", action="version", version=f"memread {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (also: MEMREAD_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("quickstart", help="baseline vs memory reader on built-in stories, in under 3 minutes")
    p.add_argument("--out", default="runs/quickstart", help="where to write the results and the attention PNG")
    p.add_argument("--steps", type=int, default=600, help="training steps per model")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_quickstart)

    from memread.config import train_keys_help  # torch-free: the [train] keys, from TrainConfig itself

    p = sub.add_parser("train", help="train an experiment", epilog=train_keys_help(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", nargs="?", help="TOML experiment file")
    p.add_argument("--run-dir", help="default: runs/<config name>")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint_last.pt")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a config value")
    p.add_argument("--nproc", type=int, default=1, metavar="N",
                   help="train with N processes on this machine (torchrun and DDP: one GPU each, or gloo on CPUs)")
    _add_device(p, "train.device: ")
    _add_data_root(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("export",
                       help="a trained run as one portable model archive (safetensors weights, config, vocabulary)")
    p.add_argument("run_dir")
    p.add_argument("out", help="the archive file to write, e.g. lstmn-ptb.safetensors")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    _add_data_root(p)
    p.set_defaults(func=cmd_export)

    from memread.inference.predictor import MAX_GENERATE, MAX_INPUT_CHARS

    p = sub.add_parser("predict", help="apply a trained run or archive to new inputs: JSON lines in, JSON lines out",
                       description=f"Apply a trained run or archive to new inputs: JSON lines in (UTF-8), JSON lines "
                                   f"out, in order. Limits: an input line of at most {MAX_INPUT_CHARS:,} characters, "
                                   f"--generate at most {MAX_GENERATE:,} tokens; beyond them nothing is predicted.")
    p.add_argument("run_dir", help="a run directory or a model archive (memread export)")
    p.add_argument("input", nargs="?", default="-", help="JSON-lines file of inputs ('-' or none: stdin); formats in "
                   "memread.data.records: {\"text\": ...} (lm, classify, document), {\"premise\", \"hypothesis\"}, "
                   "{\"question\", \"answer\"}, {\"document\", \"query\", \"candidates\"}, {\"source\": ...}")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--attention", action="store_true", help="add the model's attention trace where its reader has one")
    p.add_argument("--generate", type=int, default=0, metavar="N",
                   help=f"language models: continue each text by N tokens (its words, as generate(text) reads "
                        f"them; at most {MAX_GENERATE:,})")
    p.add_argument("--sample", action="store_true", help="with --generate: sample instead of the most probable token")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None,
                   help="with --sample: a repeatable draw, the same as memread.load(RUN).generate(text, seed=SEED)")
    p.add_argument("--beam", type=int, default=5, help="translation: beam size")
    p.add_argument("--alpha", type=float, default=1.0, help="translation: length normalisation")
    p.add_argument("--max-len", type=int, default=50, help="translation: at most this many target words")
    _add_device(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_predict)

    _add_explore(sub)

    p = sub.add_parser("eval", help="evaluate a trained run")
    p.add_argument("run_dir")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--batch-size", type=int, default=0)
    p.add_argument("--context", choices=["stream", "sentence"], default=None,
                   help="a language model: read the split as one stream or each sentence alone, whichever protocol "
                        "it was trained in (default: its own)")
    _add_device(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("compare", help="paired significance test of two trained runs on the same split",
                       description="Evaluate two runs on the same split and test the difference of a metric with a "
                                   "paired permutation test (p-value) and a paired bootstrap (confidence interval), "
                                   "resampling the criterion's units: examples, questions or LM segment rows.")
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--metric", default=None, help="default: the criterion's selection metric (ppl, accuracy, map)")
    p.add_argument("--batch-size", type=int, default=0,
                   help="the same for both runs (default: run A's eval batch size)")
    p.add_argument("--resamples", type=int, default=10_000)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=0, metavar="N",
                   help="RUN_A and RUN_B hold seed1 .. seedN (as memread reproduce writes them): per-seed paired "
                        "tests, the paired test of the seeds pooled, and Welch's t-test of the seeds' values")
    p.add_argument("--record", metavar="EXPERIMENT", default=None,
                   help="append the difference and its tests to the results file as this experiment")
    p.add_argument("--paper-value", type=float, default=None, help="with --record: the paper's difference A - B")
    p.add_argument("--results", default=None,
                   help="with --record: the results file (default: $MEMREAD_RESULTS, else results/results.jsonl)")
    _add_data_root(p)
    _add_device(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("bench", help="training tokens/s of a reader against torch's fused nn.LSTM")
    p.add_argument("reader")
    p.add_argument("--batch", type=int, default=TOKEN_FLAGS["batch"])
    p.add_argument("--steps", type=int, default=TOKEN_FLAGS["steps"], help="sequence length (time steps)")
    p.add_argument("--emb", type=int, default=TOKEN_FLAGS["emb"])
    p.add_argument("--hidden", type=int, default=TOKEN_FLAGS["hidden"])
    p.add_argument("--vocab", type=int, default=TOKEN_FLAGS["vocab"],
                   help="0: reader alone; N: whole LM with an N-word softmax")
    p.add_argument("--repeats", type=int, default=TOKEN_FLAGS["repeats"])
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="reader config value")
    p.add_argument("--match-params", action="store_true",
                   help="choose the reader's hidden size so its model (the LM with --vocab) "
                   "has the LSTM's parameter count")
    _add_device(p)  # the reader, its baseline and their inputs
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("attend", help="picture of a trained reader's intra-attention over a sentence")
    p.add_argument("run_dir")
    p.add_argument("sentence", help='words separated by spaces, e.g. "the cat sat on the mat"')
    p.add_argument("--out", help="PNG to write (default: RUN_DIR/attention.png)")
    _add_device(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_attend)

    p = sub.add_parser("data", help="datasets")
    dsub = p.add_subparsers(dest="data_command", required=True)
    from memread.data.catalog import DATASETS

    d = dsub.add_parser("download",
                        help="fetch a public dataset's canonical archive into the data root (resumable, checked)")
    d.add_argument("dataset", choices=list(DATASETS), metavar="DATASET", help=f"one of: {', '.join(DATASETS)}")
    d.add_argument("--url", help="archive URL, or the folder URL of a dataset fetched file by file (iwslt14-de-en); "
                   "or a local path: the archive (that folder) fetched elsewhere "
                   "(default: the canonical public source, or $MEMREAD_DOWNLOAD_BASE/<archive or file>)")
    d.add_argument("--no-verify", action="store_true",
                   help="skip the checks of the extracted files (sha256 pins, structure and record counts)")
    _add_data_root(d)
    d = dsub.add_parser("list", help="every dataset: in the data root or not, download size, checksums, licence")
    d.add_argument("--json", action="store_true", help="one JSON object per dataset, a line each")
    _add_data_root(d)
    d = dsub.add_parser("stories", help="write the built-in stories")
    d.add_argument("out_dir")
    d.add_argument("-n", type=int, default=4000, help="training stories (valid and test get a tenth each)")
    d.add_argument("--seed", type=int, default=0)
    d = dsub.add_parser("cloze", help="cloze questions from raw books by the CBT recipe, split by book")
    d.add_argument("books", nargs="+", help="raw text books (.txt or .txt.gz), or CBT raw-book files")
    d.add_argument("--out", required=True, help="folder for cloze_{CLASS}_{split}.txt and manifest.json")
    d.add_argument("--valid-books", required=True, help="comma-separated book names (file names without .txt/.gz)")
    d.add_argument("--test-books", required=True, help="comma-separated book names; no test book is used for training")
    d.add_argument("--classes", default="NE,P", help="word classes: NE and P without a tagger; CN and V need --tagger")
    d.add_argument("--stride", type=int, default=1, help="sentences between consecutive 21-sentence windows")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--tagger", choices=["none", "spacy"], default="none", help="spacy: Penn tags from spaCy (optional)")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("match-params",
                       help="the reader's hidden size whose LM has the parameter count of the baseline LM")
    p.add_argument("reader")
    p.add_argument("--vocab", type=int, required=True, help="vocabulary size (PTB in memread: 10001)")
    p.add_argument("--emb", type=int, default=300, help="word embedding size w")
    p.add_argument("--hidden", type=int, default=300, help="the baseline's hidden size")
    p.add_argument("--baseline", default="doc_lstm", help="baseline reader (default doc_lstm)")
    p.add_argument("--tie-weights", action="store_true")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="reader config value, e.g. window=5")
    p.set_defaults(func=cmd_match_params)

    p = sub.add_parser("cbt-lm", help="answer CBT-format cloze questions with a trained language model")
    p.add_argument("run_dir")
    p.add_argument("files", nargs="+", help="CBT-format files (cbtest_NE_test_2500ex.txt, memread cloze sets, ...)")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--context-lines", type=int, default=20, help="required context lines per question (0: any)")
    p.add_argument("--questions-per-batch", type=int, default=8)
    _add_device(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_cbt_lm)

    p = sub.add_parser("attention-span",
                       help="average attention by position in the history, and one document's weights")
    p.add_argument("run_dirs", nargs="+", help="runs of attention / kv / kvp readers (or lstmn, over its span)")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--out", default="runs/attention-span", help="folder for the PNGs and attention_by_position.json")
    p.add_argument("--batch-size", type=int, default=1, help="columns the split is read in (1: as evaluation)")
    p.add_argument("--max-batches", type=int, default=0, help="stop after this many batches (0: the whole split)")
    p.add_argument("--document", type=int, default=0, help="which document (or, without documents, the stream's start)")
    p.add_argument("--tokens", type=int, default=40, help="tokens of that document to draw")
    _add_device(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_attention_span)

    p = sub.add_parser("curves", help="validation metric of one or more runs by epoch, as a table and a PNG")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--metric", default=None, help="a metric of the valid records (default: the run's selection metric)")
    p.add_argument("--out", default="runs/curves.png", help="PNG to write ('-': the table only)")
    p.add_argument("--title", default="")
    p.add_argument("--log-y", action="store_true", help="logarithmic metric axis")
    p.set_defaults(func=cmd_curves)

    p = sub.add_parser("translate", help="translate tokenized sentences from stdin (one a line, lowercased as the "
                       "training data) with a translation run")
    p.add_argument("run_dir")
    _decoding_options(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("bleu", help="decode a split of a translation run; corpus BLEU (sacrebleu, tokenized text)")
    p.add_argument("run_dir")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    _decoding_options(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_bleu)

    p = sub.add_parser("ensemble", help="accuracy of the averaged answer distributions of cloze runs")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--batch-size", type=int, default=0)
    _add_device(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_ensemble)

    p = sub.add_parser("picture", help="query and document attention of a cloze run at each inference step, as a PNG")
    p.add_argument("run_dir")
    p.add_argument("--split", default="test", choices=["valid", "test"])
    p.add_argument("--index", type=int, default=0, help="which question of the split")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--out", help="PNG to write (default: RUN_DIR/attention_SPLIT_INDEX.png)")
    _add_device(p)
    _add_data_root(p)
    p.set_defaults(func=cmd_picture)

    p = sub.add_parser("reproduce",
                       help="the papers' table rows: list them with our numbers and verdicts, or rerun one")
    p.add_argument("target", metavar="list|ROW_ID", help="'list': every row; a row id: train its config and record it")
    p.add_argument("--markdown", action="store_true", help="with list: the markdown of results/REPRODUCTION.md")
    p.add_argument("--long", action="store_true", help="with list: every row in full (long lines), not one short line")
    p.add_argument("--details", metavar="ROW_ID", help="with list: everything about one row")
    p.add_argument("--plot", metavar="PNG", help="with list: also draw the claims' differences beside the papers' "
                   "(results/claims.png)")
    p.add_argument("--seeds", type=int, default=1, metavar="N", help="train seeds 1..N (default 1)")
    p.add_argument("--run-root", default="runs/reproduce", help="run directories: RUN_ROOT/ROW_ID/seedS")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a config value")
    p.add_argument("--results", default=None,
                   help="results file to read and append to (default: $MEMREAD_RESULTS, else results/results.jsonl)")
    p.add_argument("--repo", metavar="DIR", default=None, help="the memread checkout whose reproduction/ folder to "
                   "use (default: the first folder from here up holding reproduction/ and results/results.jsonl)")
    _add_device(p, "train.device: ")
    _add_data_root(p)
    p.set_defaults(func=cmd_reproduce)

    _add_config_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one verb. Ctrl-C (SIGINT) anywhere is one line that says what is kept, where a verb has told it
    (``args.on_interrupt``), and exit status 130; ``--debug`` shows the traceback instead."""
    import os

    try:
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:  # while its modules load
        print("\nmemread: interrupted", file=sys.stderr)
        return 130
    debug = args.debug or os.environ.get("MEMREAD_DEBUG", "") not in ("", "0")
    if os.environ.get("RANK", "0") != "0" and not debug:  # under torchrun process 0 speaks for all: one line, not N
        sys.stderr = open(os.devnull, "w")
    try:
        return args.func(args)
    except KeyboardInterrupt:
        if debug:
            raise
        kept = getattr(args, "on_interrupt", None)  # where it came and what is kept, as the verb says it
        print(f"\nmemread: interrupted{f' {kept}' if kept else ''}", file=sys.stderr)
        return 130
    except MemreadError as e:
        if debug:
            raise
        print(f"memread: error: {e}", file=sys.stderr)
        if os.environ.get("RANK", "0") != "0":  # torchrun: let process 0 say it and end first (the rest are stopped)
            time.sleep(2)
        return 2
    except OSError as e:  # a file the run or the data root cannot read or write
        if debug:
            raise
        from memread.errors import os_error_line

        print(f"memread: error: {os_error_line(e)}", file=sys.stderr)
        return 2
