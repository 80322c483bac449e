"""Dataclasses read from plain values: the typed parsing behind every config section and ``--set`` flag.

:func:`from_dict` builds a dataclass from a table (a TOML section), checking every key against the
dataclass's fields and every value against its annotation; :func:`parse_override` reads one
``section.key=value`` flag and :func:`parse_settings` a command's ``key=value`` flags. Errors are one
:class:`MemreadError` naming the file (or ``--set``) and the key (``train.lr``).

A leaf module: it imports nothing of memread but :mod:`memread.errors`, so any part of the library
(a task's config, a bench's options) may use it without importing :mod:`memread.config`.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from typing import Any, Literal

from memread.errors import MemreadError


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
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
    bad = MemreadError(f"{where}: key '{key}' expects {_type_name(tp)}, got {value!r}")
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise bad
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key, where)
            except MemreadError:
                continue
        raise bad
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
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise bad
        return value
    raise MemreadError(f"{where}: key '{key}' has an unsupported type {tp!r}")


def from_dict(cls: type, data: dict, section: str, where: str) -> Any:
    """Build dataclass ``cls`` from ``data``; unknown keys and wrong types name ``section.key``."""
    if not isinstance(data, dict):
        raise MemreadError(f"{where}: '{section}' must be a table, got {data!r}")
    hints = typing.get_type_hints(cls)
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
