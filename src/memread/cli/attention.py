"""Verbs that show what a trained reader attends to: ``attend``, ``picture``, ``attention-span`` and ``explore``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memread.cli.common import add_data_root, add_device, beside, model_device, trained_lm, whole
from memread.errors import MemreadError


def add_attend(sub) -> None:
    p = sub.add_parser("attend", help="picture of a trained reader's intra-attention over a sentence")
    p.add_argument("run_dir")
    p.add_argument("sentence", help='words separated by spaces, e.g. "the cat sat on the mat"')
    p.add_argument("--out", help="PNG to write (default: RUN_DIR/attention.png)")
    add_device(p)
    add_data_root(p)
    p.set_defaults(func=cmd_attend)


def cmd_attend(args: argparse.Namespace) -> int:
    from memread.tools.attend import attend
    from memread.data.root import data_root

    device = model_device(args)
    out = Path(args.out) if args.out else None
    print(attend(Path(args.run_dir), args.sentence, out, data_root(args.data_root, run=args.run_dir), device))
    return 0


def add_picture(sub) -> None:
    p = sub.add_parser("picture", help="query and document attention of a cloze run at each inference step, as a PNG")
    p.add_argument("run_dir")
    p.add_argument("--split", default="test", choices=["valid", "test"])
    p.add_argument("--index", type=whole(0), default=0, help="which question of the split")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--out", help="PNG to write (default: RUN_DIR/attention_SPLIT_INDEX.png)")
    add_device(p)
    add_data_root(p)
    p.set_defaults(func=cmd_picture)


def cmd_picture(args: argparse.Namespace) -> int:
    from memread.data.root import data_root
    from memread.tools.picture import picture

    device = model_device(args)
    out = Path(args.out) if args.out else beside(Path(args.run_dir), f"attention_{args.split}_{args.index}.png")
    root = data_root(args.data_root, run=args.run_dir)
    print(json.dumps(picture(Path(args.run_dir), root, out, args.split, args.index, args.checkpoint, device)))
    return 0


def add_attention_span(sub) -> None:
    p = sub.add_parser("attention-span",
                       help="average attention by position in the history, and one document's weights")
    p.add_argument("run_dirs", nargs="+", help="runs of attention / kv / kvp readers (or lstmn, over its span)")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--out", default="runs/attention-span", help="folder for the PNGs and attention_by_position.json")
    p.add_argument("--batch-size", type=whole(1), default=1, help="columns the split is read in (1: as evaluation)")
    p.add_argument("--max-batches", type=whole(0), default=0, help="stop after this many batches (0: the whole split)")
    p.add_argument("--document", type=whole(0), default=0, help="which document (or, without documents, the stream's start)")
    p.add_argument("--tokens", type=whole(1), default=40, help="tokens of that document to draw")
    add_device(p)
    add_data_root(p)
    p.set_defaults(func=cmd_attention_span)


def cmd_attention_span(args: argparse.Namespace) -> int:
    from memread.tools.attention_span import (attention_by_position, document_attention, document_png, position_png,
                                              position_table)

    device = model_device(args)
    out = Path(args.out)
    rows, pictures = {}, []
    for run_dir in args.run_dirs:
        cfg, task, model = trained_lm(args, run_dir, device)
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


def add_explore(sub) -> None:
    from memread.explore.view import BEAM, MAX_BEAM, MAX_TOKENS

    p = sub.add_parser("explore", help="a local page (127.0.0.1) showing what a trained reader attends to in typed "
                       "text; --html: one self-contained file")
    p.add_argument("run_dir", help="a run directory or a model archive (memread export)")
    p.add_argument("--port", type=whole(0, 65535), default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--split", default="test", help="the split whose examples the page offers (default test)")
    p.add_argument("--max-tokens", type=whole(1), default=MAX_TOKENS,
                   help=f"the longest input the page reads, in tokens (default {MAX_TOKENS}); longer ones are refused")
    p.add_argument("--html", metavar="OUT.html", help="write the view of the inputs to one HTML file and exit")
    p.add_argument("--text", action="append", default=[], metavar="TEXT",
                   help="with --html: an input, a text or a JSON record (repeatable)")
    p.add_argument("--inputs", metavar="FILE",
                   help="with --html: a JSON-lines file of inputs, as memread predict reads")
    p.add_argument("--beam", type=whole(1, MAX_BEAM), default=BEAM, metavar=f"1..{MAX_BEAM}",
                   help=f"a translation model's beam (default {BEAM}; 1 = greedy decoding); the page can change it")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    add_device(p)
    add_data_root(p)
    p.set_defaults(func=cmd_explore)


def cmd_explore(args: argparse.Namespace) -> int:
    """The explorer page (memread.explore) on 127.0.0.1, its address printed; or, with --html, the same view of
    given inputs as one self-contained HTML file."""
    from memread.data.root import data_root
    from memread.data.text import json_line
    from memread.inference.predictor import load

    predictor = load(args.run_dir, data_root(args.data_root, run=args.run_dir), model_device(args), args.checkpoint)
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
        out = write_html(predictor, items, Path(args.html), args.max_tokens, args.beam)
        print(json.dumps({"html": str(out), "inputs": len(items)}))
        return 0
    from memread.explore.server import serve

    server = serve(predictor, args.port, args.split, args.max_tokens, args.beam)
    print(f"memread explore: {server.url}  ({predictor.kind} model {args.run_dir}; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
