"""The hand-written recurrences in float32 under ``torch.autocast``, on any device.

Training with ``train.precision = "bf16-mixed"`` or ``"16-mixed"`` runs the model under
``torch.autocast(device_type, dtype)``: matmuls and linear layers in bfloat16 / float16, parameters
and their gradients in float32. The custom autograd Functions of the readers (the LSTMN layer, the
NSE loop, the LSTMN fusion decoder's tapes, the window attention, the IAA's deferred reads) and the
compiled CPU loops do not fit that scheme: they write into preallocated buffers (``out=``, in-place
updates) whose dtype is their input's, mix those inputs with float32 parameters, and run backward
passes that autocast does not cover, so mixed dtypes raise there. And a recurrence rounded to
bfloat16's 8-bit mantissa at every one of hundreds of steps drifts from the float32 model.

So they run in float32: :func:`in_float32` (or the decorator :func:`float32_under_autocast`) calls a
function with autocast switched off for its inputs' device type and its floating inputs cast to
float32, when autocast is on for that device type, and returns its (float32) results; the layers
after it are cast down again by autocast as usual. Without autocast it calls the function as it is
(one flag lookup), so float32 and float64 models are unchanged. Since the inputs are float32, the
compiled CPU loops (:mod:`memread._compiled`, float32 / float64 only) still run under CPU autocast.

(``torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32)`` does the same for one device
type fixed when the function is defined; a reader runs on whichever device its inputs are on.)
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import torch
from torch import Tensor

F = TypeVar("F", bound=Callable[..., Any])


def autocast_enabled(device_type: str) -> bool:
    """Whether ``torch.autocast`` is on for ``device_type`` here (False for a type it does not know)."""
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except TypeError:  # torch < 2.4: no device argument
        if device_type == "cpu":
            return bool(torch.is_autocast_cpu_enabled())
        return device_type == "cuda" and bool(torch.is_autocast_enabled())
    except RuntimeError:  # a device type without autocast (meta, ...)
        return False


def _first_tensor(obj: Any) -> Tensor | None:
    if isinstance(obj, Tensor):
        return obj
    if isinstance(obj, (list, tuple)):
        for item in obj:
            if (t := _first_tensor(item)) is not None:
                return t
    elif isinstance(obj, dict):
        return _first_tensor(list(obj.values()))
    return None


def autocast_device_type(*args: Any) -> str | None:
    """The device type of the first tensor in ``args`` (nested in lists, tuples and dicts) when autocast
    is on for it, else None."""
    t = _first_tensor(args)
    if t is None:
        return None
    device_type = t.device.type
    return device_type if autocast_enabled(device_type) else None


def to_float32(obj: Any) -> Any:
    """``obj`` with every floating tensor of less than 32 bits cast to float32 (float64 stays, as autocast
    leaves it), through lists, tuples and dicts; anything else as it is."""
    if isinstance(obj, Tensor):
        return obj.float() if obj.is_floating_point() and obj.dtype not in (torch.float32, torch.float64) else obj
    if isinstance(obj, list):
        return [to_float32(x) for x in obj]
    if isinstance(obj, tuple):
        items = [to_float32(x) for x in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
        return {k: to_float32(v) for k, v in obj.items()}
    return obj


def in_float32(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; under autocast for the inputs' device type, with autocast off there and
    the floating inputs in float32 (see the module docstring)."""
    device_type = autocast_device_type(args, kwargs)
    if device_type is None:
        return fn(*args, **kwargs)
    with torch.autocast(device_type, enabled=False):
        return fn(*to_float32(args), **to_float32(kwargs))


def float32_under_autocast(fn: F) -> F:
    """Decorator: every call of ``fn`` through :func:`in_float32` (for methods too: ``self`` is no tensor)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return in_float32(fn, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


# --------------------------------------------------------------------------------- entering autocast

_ONEDNN_RNN: dict[torch.dtype, bool] = {}  # per autocast dtype: whether oneDNN's fused CPU LSTM runs in it here


def onednn_rnn_runs(dtype: torch.dtype) -> bool:
    """Whether torch's fused CPU LSTM (oneDNN's kernel: ``nn.LSTM``, ``nn.GRU``) runs, forward and backward, under
    CPU autocast to ``dtype`` on this machine; tried once a process on a tiny LSTM. oneDNN builds its bfloat16 LSTM
    only where the CPU has the instructions for it: on an AVX2-only CPU (an AMD EPYC here) it refuses with "could
    not create a primitive descriptor for the LSTM forward propagation primitive"."""
    if dtype not in _ONEDNN_RNN:
        lstm = torch.nn.LSTM(2, 2, batch_first=True)
        try:  # asked first inside evaluation's no_grad, too: the backward needs a graph
            with torch.inference_mode(False), torch.enable_grad(), torch.autocast("cpu", dtype=dtype):
                out, _ = lstm(torch.zeros(1, 2, 2))
                out.float().sum().backward()
            _ONEDNN_RNN[dtype] = True
        except RuntimeError:
            _ONEDNN_RNN[dtype] = False
    return _ONEDNN_RNN[dtype]


class _Autocast:
    """``torch.autocast(device_type, dtype)``, with oneDNN off for its extent where its fused CPU LSTM does not run
    in ``dtype`` here (:func:`onednn_rnn_runs`): the LSTMs then run on ATen's own kernels (in float32, as CPU
    autocast leaves an LSTM it does not fuse), and the rest of the model as autocast has it."""

    def __init__(self, device_type: str, dtype: torch.dtype | None):
        self.autocast = torch.autocast(device_type, dtype=dtype, enabled=dtype is not None)
        self.onednn_off = device_type == "cpu" and dtype is not None and not onednn_rnn_runs(dtype)

    def __enter__(self):
        if self.onednn_off:
            self.was = torch.backends.mkldnn.enabled
            torch.backends.mkldnn.enabled = False
        return self.autocast.__enter__()

    def __exit__(self, *exc):
        try:
            return self.autocast.__exit__(*exc)
        finally:
            if self.onednn_off:
                torch.backends.mkldnn.enabled = self.was


def autocast(device_type: str, dtype: torch.dtype | None) -> _Autocast:
    """What training and evaluation enter for ``train.precision``: ``torch.autocast(device_type, dtype)`` (off for
    ``dtype`` None), on a CPU whose oneDNN cannot run the fused LSTM in ``dtype`` with oneDNN off meanwhile."""
    return _Autocast(device_type, dtype)
