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

The verbs live beside their parsers: one module per group of verbs (train, evaluate, predict, attention, data,
bench, reproduce, config, quickstart), each with an ``add_VERB(sub)`` that adds the verb's parser above its
handler ``cmd_VERB(args)``; shared flags and checks are in :mod:`memread.cli.common`.
"""

from __future__ import annotations

import argparse
import sys
import time

from memread.cli import attention, bench, config, data, evaluate, predict, quickstart, reproduce, train
from memread.errors import MemreadError

# every verb's parser, in the order `memread --help` lists them
PARSERS = (quickstart.add_quickstart, train.add_train, predict.add_export, predict.add_predict, attention.add_explore,
           evaluate.add_eval, evaluate.add_compare, bench.add_bench, attention.add_attend, data.add_data,
           bench.add_match_params, evaluate.add_cbt_lm, attention.add_attention_span, evaluate.add_curves,
           predict.add_translate, predict.add_bleu, evaluate.add_ensemble, attention.add_picture,
           reproduce.add_reproduce, config.add_config)


class Parser(argparse.ArgumentParser):
    """argparse's parser whose errors (a flag out of its range, an unknown flag, a missing argument) are one line
    ``memread: error: ...`` like every other refusal, naming the verb's ``--help``, and exit status 2; the verbs'
    parsers are of this class too (``add_subparsers`` makes them so)."""

    def error(self, message: str):
        verb = self.prog.removeprefix("memread").strip()  # "compare", "data stories"; "" for memread itself
        self.exit(2, f"memread: error: {verb + ': ' if verb else ''}{message} (`{self.prog} --help` shows the "
                     f"usage)\n")


def build_parser() -> argparse.ArgumentParser:
    from memread import __version__

    parser = Parser(prog="memread", description="Memory-augmented neural readers.")
    parser.add_argument("--version", action="version", version=f"memread {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (also: MEMREAD_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in PARSERS:
        add(sub)
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
    except SystemExit as e:  # --help and --version end here (0); a refused flag is its status (2), returned
        if e.code in (0, None):
            raise
        return e.code
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
    except BrokenPipeError:  # the reader of the output left (`memread reproduce list | head`): no message
        if debug:
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush goes nowhere instead of raising again
        return 141  # 128 + SIGPIPE, as a shell reports a command a closed pipe ended
    except OSError as e:  # a file the run or the data root cannot read or write
        if debug:
            raise
        from memread.errors import os_error_line

        print(f"memread: error: {os_error_line(e)}", file=sys.stderr)
        return 2
