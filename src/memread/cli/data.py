"""``memread data``: download, list, stories, cloze."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memread.cli.common import SEED, add_data_root, whole


def add_data(sub) -> None:
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
    add_data_root(d)
    d = dsub.add_parser("list", help="every dataset: in the data root or not, download size, checksums, licence")
    d.add_argument("--json", action="store_true", help="one JSON object per dataset, a line each")
    add_data_root(d)
    d = dsub.add_parser("stories", help="write the built-in stories")
    d.add_argument("out_dir")
    d.add_argument("-n", type=whole(1), default=4000, help="training stories (valid and test get a tenth each)")
    d.add_argument("--seed", type=SEED, default=0)
    d = dsub.add_parser("cloze", help="cloze questions from raw books by the CBT recipe, split by book")
    d.add_argument("books", nargs="+", help="raw text books (.txt or .txt.gz), or CBT raw-book files")
    d.add_argument("--out", required=True, help="folder for cloze_{CLASS}_{split}.txt and manifest.json")
    d.add_argument("--valid-books", required=True, help="comma-separated book names (file names without .txt/.gz)")
    d.add_argument("--test-books", required=True, help="comma-separated book names; no test book is used for training")
    d.add_argument("--classes", default="NE,P", help="word classes: NE and P without a tagger; CN and V need --tagger")
    d.add_argument("--stride", type=whole(1), default=1, help="sentences between consecutive 21-sentence windows")
    d.add_argument("--seed", type=SEED, default=0)
    d.add_argument("--tagger", choices=["none", "spacy"], default="none", help="spacy: Penn tags from spaCy (optional)")
    p.set_defaults(func=cmd_data)


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
