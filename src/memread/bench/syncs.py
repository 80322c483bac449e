"""Host synchronisations in a reader's training step: the calls that make the CPU wait for the device.

A time loop captured in a CUDA graph (or run by ``torch.compile(mode="reduce-overhead")``) must make none: a
``.item()``, a ``bool(tensor)`` or a ``nonzero`` inside it reads a value back from the GPU, which stalls the
launch queue and cannot be captured at all. This finds them on the CPU, without a GPU: every aten call of a
forward and backward pass is seen by a ``TorchDispatchMode``, and those that read a tensor's value back to the host
(:data:`SYNCING`) are listed with the line of memread that made them. A copy to the host (``.cpu()``) is no such
call on the CPU, where it copies nothing: on a GPU ``pack_padded_sequence``'s ``lengths.cpu()`` waits too, and is
not listed here::

    python -m memread.bench.syncs [READER ...]      # one JSON line a reader and case

Cases (the shapes a GPU run meets): ``stream``, a full batch read on from a carried state (a BPTT segment after
the first: a language model on a stream); ``padded``, a right-padded batch read from nothing (sentences, texts).
Each reader runs its ``"function"`` backend where it has one: the Python loop a GPU runs.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
import traceback
from pathlib import Path
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops that read a tensor's value back to the host (``.item()``, ``bool(t)``, ``int(t)``, ``t.tolist()``,
# ``torch.equal``, and the shape-from-data ops)
SYNCING = frozenset({"aten._local_scalar_dense.default", "aten.is_nonzero.default", "aten.equal.default",
                     "aten.nonzero.default", "aten.masked_select.default", "aten.unique_consecutive.default",
                     "aten._unique2.default", "aten.repeat_interleave.Tensor"})
PACKAGE = str(Path(__file__).resolve().parents[1])  # src/memread


class _Watch(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.found: collections.Counter[tuple[str, str]] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if name in SYNCING:
            here = [f for f in traceback.extract_stack() if f.filename.startswith(PACKAGE) and f.filename != __file__]
            where = (f"{Path(here[-1].filename).relative_to(Path(PACKAGE).parent)}:{here[-1].lineno}"
                     if here else "outside memread")
            self.found[name.removeprefix("aten.").removesuffix(".default"), where] += 1
        return func(*args, **(kwargs or {}))


def host_syncs(step: Callable[[], object]) -> list[dict]:
    """Run ``step()`` (a forward and backward pass, say) and return its host synchronisations, one dict per op and
    line of memread that made it: ``{"op", "where", "count"}``, most frequent first; ``[]`` where there are none."""
    watch = _Watch()
    with watch:
        step()
    return [{"op": op, "where": where, "count": n} for (op, where), n in watch.found.most_common()]


def _reader(name: str, hidden: int = 12, input_size: int = 8):
    """A small ``name`` reader on its ``"function"`` backend where it has one (the loop a GPU runs)."""
    from memread.bench.readers import reader_config
    from memread.readers import READERS, build_reader

    fields = {f.name for f in dataclasses.fields(READERS[name].Config)}
    options = {"backend": '"function"', "n": "3", "span": "5"}  # ngram's n, the LSTMN's window of a stream's tape
    return build_reader(reader_config(name, hidden, [f"{k}={v}" for k, v in options.items() if k in fields]),
                        input_size)


def reader_syncs(name: str, case: str = "stream", B: int = 4, T: int = 7) -> list[dict]:
    """:func:`host_syncs` of one training step of reader ``name`` (small sizes, float32, the CPU) in ``case``:
    ``"stream"`` (full rows, read on from the state of a first segment; readers that carry no state read from
    nothing) or ``"padded"`` (rows of different lengths, no state)."""
    from memread.readers import READERS
    from memread.readers.base import detach_state

    torch.manual_seed(0)
    reader = _reader(name)
    x = torch.randn(B, T, 8, requires_grad=True)
    if case == "stream":
        mask = torch.ones(B, T, dtype=torch.bool)
        state = detach_state(reader(x.detach(), mask).state) if READERS[name].carries_state else None
    elif case == "padded":
        mask = torch.arange(T).unsqueeze(0) < torch.tensor([T, T - 2, 3, 1][:B]).unsqueeze(1)
        state = None
    else:
        raise ValueError(f"case {case!r}: 'stream' or 'padded'")

    def step():
        out = reader(x, mask, state) if state is not None else reader(x, mask)
        out.states.sum().backward()

    return host_syncs(step)


def main(argv: list[str] | None = None) -> int:
    from memread.readers import READERS

    ap = argparse.ArgumentParser(prog="python -m memread.bench.syncs", description=__doc__.splitlines()[0])
    ap.add_argument("readers", nargs="*", metavar="READER", help=f"default: all of {', '.join(sorted(READERS))}")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.readers) - set(READERS))
    if unknown:
        ap.error(f"unknown readers {unknown}; registered: {', '.join(sorted(READERS))}")
    for name in args.readers or sorted(READERS):
        for case in ("stream", "padded"):
            found = reader_syncs(name, case)
            print(json.dumps({"reader": name, "case": case, "syncs": sum(f["count"] for f in found), "found": found}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
