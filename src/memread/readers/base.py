"""The common reader interface.

A reader turns token embeddings into per-token states::

    out = reader(x, mask, state=None)      # x: (B, T, E) embeddings, mask: (B, T) bool, True = real
    out.states     # (B, T, H)  one output state per token (zeros are not guaranteed at padding)
    out.memory     # (B, S, H)  what the reader keeps and can attend over (e.g. its hidden tape)
    out.state      # anything: pass it back as ``state`` to continue reading the next segment
    out.attention  # (B, T, S)  optional trace of what each token attended to
    out.layer_attention  # [(B, T, S)] with attention, a reader with several attending layers (deep LSTMN)

Every reader has ``input_size`` and ``output_size`` attributes. Tasks build an embedding of
``input_size`` and a head over ``output_size``, so any reader drops into any task.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor


@dataclass
class ReaderOutput:
    states: Tensor  # (B, T, H)
    memory: Tensor | None = None  # (B, S, H)
    memory_mask: Tensor | None = None  # (B, S) bool
    state: Any = None
    attention: Tensor | None = None  # (B, T, S)
    # with attention, a reader whose layers each attend (a deep LSTMN): every layer's (B, T, S), bottom first
    layer_attention: list[Tensor] | None = None


def attention_trace(out: ReaderOutput, name: str = "attention") -> dict[str, Any]:
    """A reader's weights after ``return_attention=True``, by name: ``name`` (B, T, S) its ``attention``, and
    where the reader has them ``name_layers`` (B, L, T, S) every layer's weights, bottom first (a deep LSTMN;
    the last is ``attention``) and ``name_shared``, a list of (B, T, S_n): the keys over each shared memory
    (MMA-NSE). Empty for a reader that returns no attention."""
    trace: dict[str, Any] = {}
    if out.attention is not None:
        trace[name] = out.attention
    if out.layer_attention is not None:
        trace[f"{name}_layers"] = torch.stack(list(out.layer_attention), dim=1)
    state = out.state if isinstance(out.state, dict) else {}
    if state.get("shared_attention"):
        trace[f"{name}_shared"] = list(state["shared_attention"])
    return trace


def detach_state(state: Any) -> Any:
    """Detach every tensor in a (nested) recurrent state, so BPTT stops at segment boundaries."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return state.detach()
    if isinstance(state, tuple):
        return tuple(detach_state(s) for s in state)
    if isinstance(state, list):
        return [detach_state(s) for s in state]
    if isinstance(state, dict):
        return {k: detach_state(v) for k, v in state.items()}
    if dataclasses.is_dataclass(state):
        return dataclasses.replace(state, **{f.name: detach_state(getattr(state, f.name)) for f in dataclasses.fields(state)})
    return state


def flatten_state(state: Any, prefix: str = "state") -> dict[str, Tensor]:
    """Flatten a nested tuple/list/dict state of tensors into ``{path: tensor}`` (for checkpoints)."""
    out: dict[str, Tensor] = {}
    if state is None:
        return out
    if isinstance(state, Tensor):
        out[prefix] = state
    elif isinstance(state, (tuple, list)):
        for i, s in enumerate(state):
            out.update(flatten_state(s, f"{prefix}.{i}"))
    elif isinstance(state, dict):
        for k, v in state.items():
            out.update(flatten_state(v, f"{prefix}.{k}"))
    else:
        raise TypeError(f"cannot checkpoint a reader state of type {type(state).__name__}")
    return out


def state_structure(state: Any) -> Any:
    """JSON-able description of a state's nesting, to rebuild it with :func:`unflatten_state`."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return "T"
    if isinstance(state, tuple):
        return {"tuple": [state_structure(s) for s in state]}
    if isinstance(state, list):
        return {"list": [state_structure(s) for s in state]}
    if isinstance(state, dict):
        return {"dict": {k: state_structure(v) for k, v in state.items()}}
    raise TypeError(f"cannot checkpoint a reader state of type {type(state).__name__}")


def unflatten_state(structure: Any, flat: dict[str, Tensor], prefix: str = "state") -> Any:
    if structure is None:
        return None
    if structure == "T":
        return flat[prefix]
    if "tuple" in structure:
        return tuple(unflatten_state(s, flat, f"{prefix}.{i}") for i, s in enumerate(structure["tuple"]))
    if "list" in structure:
        return [unflatten_state(s, flat, f"{prefix}.{i}") for i, s in enumerate(structure["list"])]
    return {k: unflatten_state(v, flat, f"{prefix}.{k}") for k, v in structure["dict"].items()}
