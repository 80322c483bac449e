"""Dataclasses read from plain values: the typed parsing behind every config section and ``--set`` flag.

:func:`from_dict` builds a dataclass from a table (a TOML section), checking every key against the
dataclass's fields and every value against its annotation; :func:`parse_override` reads one
``section.key=value`` flag and :func:`parse_settings` a command's ``key=value`` flags. Errors are one
:class:`MemreadError` naming the file (or ``--set``) and the key (``train.lr``).

**Ranges.** An annotation may carry its bounds, ``Annotated[int, Range(1)]``; the aliases below name
the usual ones (``batch_size: PositiveInt``, ``dropout: DropoutRate``). A value of the right type
outside its range is refused like a wrong type: ``exp.toml: key 'train.batch_size' must be at least
1, got 0``. Ranges work inside lists, tables and optionals (``tuple[Probability, Probability]``,
``dict[str, NonNegFloat]``). Every float must be finite: ``inf`` and ``nan`` are refused, ranged or not
(``key 'train.lr' must be a finite number, got inf``).

A leaf module: it imports nothing of memread but :mod:`memread.errors`, so any part of the library
(a task's config, a bench's options) may use it without importing :mod:`memread.config`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from memread.errors import MemreadError


@dataclass(frozen=True)
class Range:
    """Bounds of a number, for ``Annotated``: ``lo <= x`` (``lo < x`` when ``lo_open``) and ``x <= hi``
    (``x < hi`` when ``hi_open``); ``None`` leaves that side open-ended."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def __post_init__(self) -> None:
        if self.lo is not None and self.hi is not None and self.lo > self.hi:
            raise ValueError(f"Range: lo = {self.lo} is above hi = {self.hi}")

    def __contains__(self, x: Any) -> bool:
        if x != x:  # NaN is in no range
            return False
        if self.lo is not None and not (x > self.lo if self.lo_open else x >= self.lo):
            return False
        if self.hi is not None and not (x < self.hi if self.hi_open else x <= self.hi):
            return False
        return True

    def describe(self) -> str:
        """``"at least 1"``, ``"greater than 0"``, ``"in [0, 1)"`` ...: what ``must be`` is followed by."""
        lo, hi = _number(self.lo), _number(self.hi)
        if self.lo is not None and self.hi is not None:
            return f"in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f"greater than {lo}" if self.lo_open else f"at least {lo}"
        if self.hi is not None:
            return f"less than {hi}" if self.hi_open else f"at most {hi}"
        return "a number"


def _number(x: float | None) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


PositiveInt = Annotated[int, Range(1)]  # sizes, counts, steps: hidden, layers, batch_size, bptt
NonNegInt = Annotated[int, Range(0)]  # the same where 0 means "off", "no cap" or "all"
PositiveFloat = Annotated[float, Range(0, lo_open=True)]  # lr, init_range
NonNegFloat = Annotated[float, Range(0)]  # penalties, thresholds, factors where 0 means "off"
# [0, 1): a dropout rate, a momentum, Adam's betas, a held-out share (1 would drop, keep or hold out everything)
Probability = Annotated[float, Range(0, 1, hi_open=True)]
DropoutRate = Probability
Fraction = Annotated[float, Range(0, 1, lo_open=True)]  # (0, 1]: a factor that shrinks, 1 = unchanged


@dataclass(frozen=True)
class Pattern:
    """A string's form, for ``Annotated``: the whole value matches ``regex``; ``describe`` says it in words."""

    regex: str
    description: str

    def __contains__(self, x: Any) -> bool:
        import re

        return re.fullmatch(self.regex, x) is not None

    def describe(self) -> str:
        return self.description


class _OutOfRange(MemreadError):
    """A value of the right type outside its :class:`Range` (told apart inside unions)."""


class _NotFinite(_OutOfRange):
    """A float that is inf or nan: no config value means either (``0`` is the "off" or "no limit" of the few that
    could), and one such value (``train.lr = inf``) only shows as a run that diverges after its folder is written."""


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _type_name(typing.get_args(tp)[0])
    if origin is Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is dict:
        return "table of " + " = ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return "list of " + ", ".join(_type_name(a) for a in typing.get_args(tp) if a is not Ellipsis)
    if tp is type(None):
        return "none"
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it converted (int -> float, list -> tuple)."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        not_finite = None
        try:
            out = _coerce(value, base, key, where)
        except _NotFinite as e:  # its range speaks first where it has one (nan is in no range)
            out, not_finite = float(value), e
        for extra in extras:
            if isinstance(extra, (Range, Pattern)) and out is not None and out not in extra:
                raise _OutOfRange(f"{where}: key '{key}' must be {extra.describe()}, got {value!r}")
        if not_finite is not None:
            raise not_finite
        return out
    bad = MemreadError(f"{where}: key '{key}' expects {_type_name(tp)}, got {value!r}")
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise bad
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        out_of_range: MemreadError | None = None  # the right type but outside its range: say so
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key, where)
            except _OutOfRange as e:
                out_of_range = out_of_range or e
            except MemreadError:
                continue
        raise out_of_range or bad
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if not isinstance(value, dict):
            raise bad
        return {_coerce(k, key_type, key, where): _coerce(v, value_type, f"{key}.{k}", where) for k, v in value.items()}
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise bad
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], key, where) for v in value)
        if len(value) != len(args):
            raise bad
        return tuple(_coerce(v, a, key, where) for v, a in zip(value, args))
    if tp is bool:
        if not isinstance(value, bool):
            raise bad
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        if not math.isfinite(value):
            raise _NotFinite(f"{where}: key '{key}' must be a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise bad
        return value
    raise MemreadError(f"{where}: key '{key}' has an unsupported type {tp!r}")


def from_dict(cls: type, data: dict, section: str, where: str) -> Any:
    """Build dataclass ``cls`` from ``data``; unknown keys, wrong types and values outside an annotation's
    :class:`Range` name ``section.key``."""
    if not isinstance(data, dict):
        raise MemreadError(f"{where}: '{section}' must be a table, got {data!r}")
    hints = typing.get_type_hints(cls, include_extras=True)  # with the Ranges of Annotated fields
    known = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in known:
            raise MemreadError(
                f"{where}: unknown key '{section}.{key}' (known keys: {', '.join(sorted(known))})"
            )
    kwargs = {k: _coerce(v, hints[k], f"{section}.{k}", where) for k, v in data.items()}
    return cls(**kwargs)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"train.lr=0.5"`` -> (["train", "lr"], 0.5); the value is read as TOML, else as a string."""
    if "=" not in text:
        raise MemreadError(f"--set {text!r}: expected section.key=value")
    key, raw = text.split("=", 1)
    path = key.strip().split(".")
    if len(path) != 2 or not all(path):
        raise MemreadError(f"--set {text!r}: expected section.key=value, e.g. train.lr=0.5")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return path, value


def override_value(value: Any) -> str:
    """A config value as the TOML of a ``--set`` override, what ``parse_override`` reads back as ``value``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(override_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {override_value(v)}" for k, v in value.items()) + " }"
    raise MemreadError(f"--set: cannot write {value!r} as a TOML value")


def parse_settings(options: list[str], types: dict[str, Any], section: str, what: str) -> dict[str, Any]:
    """``["key=value", ...]`` (``--set`` flags of a command) -> typed values; ``types`` maps the known
    keys to their annotations; an unknown key or a wrong type is one clear error naming ``what``."""
    values: dict[str, Any] = {}
    for text in options:
        if "=" not in text:
            raise MemreadError(f"--set {text!r}: expected key=value")
        (_, key), value = parse_override(f"{section}.{text}")
        if key not in types:
            raise MemreadError(f"--set {text!r}: unknown key '{section}.{key}' for {what} (known keys: {', '.join(sorted(types))})")
        values[key] = _coerce(value, types[key], f"{section}.{key}", "--set")
    return values
