"""The experiment file's JSON Schema and its resolved form: ``memread config schema`` and ``memread config show``.

:func:`experiment_schema` is generated from the config dataclasses themselves -- every ``[data]``, ``[reader]``,
``[head]`` and ``[criterion]`` choice of the registries (``DATASETS``, ``READERS``, ``HEADS``, ``CRITERIA``) and
``[train]`` (:class:`memread.config.TrainConfig`) -- so it cannot drift from what :func:`memread.config.load_experiment`
accepts: a key's type and range come from its annotation (:mod:`memread.typed`: ``PositiveInt`` -> ``"minimum": 1``,
``Fraction`` -> ``"exclusiveMinimum": 0, "maximum": 1``, ``Literal`` -> ``"enum"``, a ``Pattern`` -> ``"pattern"``),
its default from the field, its description from the field's comment (:func:`memread.config.field_comments`). A
section is chosen by its ``name`` (one definition a name); ``[head]`` and ``[criterion]`` without a name are checked
as the data's default head and the dataset's default criterion, and a named one must serve the data's task.

TOML editors validate and complete experiment files with it: Taplo / "Even Better TOML" (VS Code) read a first line
``#:schema ./memread.schema.json``, or a ``[[rule]]`` of ``.taplo.toml`` naming the schema for ``configs/**/*.toml``.
What a schema cannot say is left to memread: an integer written ``1.0`` (JSON Schema counts it an integer),
``inf`` / ``nan`` for a float, and the checks a task makes across sections.

:func:`show_toml` writes an :class:`ExperimentConfig` with every key, defaults filled in, as TOML that loads back to
the same config.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Annotated, Any, Literal

from memread.typed import Pattern, Range

DRAFT = "http://json-schema.org/draft-07/schema#"


def type_schema(tp: Any) -> dict:
    """The JSON Schema of one annotation, as :func:`memread.typed._coerce` checks values against it."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        out = type_schema(base)
        for extra in extras:
            if isinstance(extra, Range):
                if extra.lo is not None:
                    out["exclusiveMinimum" if extra.lo_open else "minimum"] = extra.lo
                if extra.hi is not None:
                    out["exclusiveMaximum" if extra.hi_open else "maximum"] = extra.hi
            elif isinstance(extra, Pattern):
                out["pattern"] = f"^(?:{extra.regex})$"  # typed matches the whole value; JSON Schema searches
        return out
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin in (typing.Union, types.UnionType):
        arms = [type_schema(a) for a in typing.get_args(tp) if a is not type(None)]  # TOML has no null
        return arms[0] if len(arms) == 1 else {"anyOf": arms}
    if origin is dict:
        key, value = typing.get_args(tp)
        if key is not str:
            raise TypeError(f"no JSON Schema for a table keyed by {key!r}")
        return {"type": "object", "additionalProperties": type_schema(value)}
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": type_schema(args[0])}
        return {"type": "array", "items": [type_schema(a) for a in args], "additionalItems": False,
                "minItems": len(args), "maxItems": len(args)}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if tp in simple:
        return {"type": simple[tp]}
    raise TypeError(f"no JSON Schema for the annotation {tp!r}")  # a new kind of annotation: teach it here


def default_of(f: dataclasses.Field) -> Any:
    """A field's default as JSON (tuples as lists), or ``dataclasses.MISSING``."""
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return dataclasses.MISSING
    return json.loads(json.dumps(value))


def _description(cls: type) -> str | None:
    doc = cls.__doc__ or ""
    if not doc or doc.startswith(f"{cls.__name__}("):  # the signature dataclass writes for a class without one
        return None
    return " ".join(doc.strip().split("\n\n")[0].split())


def section_schema(cls: type, name: str | None = None) -> dict:
    """A dataclass as a table: its fields, typed, with their defaults and comments; no other key. ``name``: the
    registry name this definition is for (one config class may serve several: lstm, gru, rnn)."""
    from memread.config import field_comments

    hints = typing.get_type_hints(cls, include_extras=True)
    comments = field_comments(cls)
    properties, required = {}, []
    for f in dataclasses.fields(cls):
        prop = type_schema(hints[f.name])
        if f.name == "name" and name is not None:
            prop = {"const": name}
        default = default_of(f)
        if default is dataclasses.MISSING:
            required.append(f.name)
        elif f.name != "name":
            prop["default"] = default
        if comments.get(f.name):
            prop["description"] = comments[f.name]
        properties[f.name] = prop
    out: dict = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    description = _description(cls)
    if description:
        out["description"] = description
    return out


def experiment_schema() -> dict:
    """The JSON Schema (draft-07) of an experiment file: ``[data]``, ``[reader]``, ``[head]``, ``[criterion]``,
    ``[train]``."""
    from memread.config import SECTIONS, TrainConfig
    from memread.criteria import CRITERIA
    from memread.data.pipelines import DATASETS
    from memread.heads import DEFAULT_HEADS, HEADS, heads_for
    from memread.readers import READERS

    registries = {"data": DATASETS, "reader": READERS, "head": HEADS, "criterion": CRITERIA}
    definitions: dict = {}
    properties: dict = {}
    for section, registry in registries.items():
        for name, entry in registry.items():
            definitions[f"{section}.{name}"] = section_schema(entry.Config, name)
        choice = {"oneOf": [{"$ref": f"#/definitions/{section}.{n}"} for n in registry]}
        table: dict = {"type": "object", "properties": {"name": {"enum": list(registry)}}}
        if section in ("head", "criterion"):  # a name is optional: the data's default (checked below)
            table.update({"if": {"required": ["name"]}, "then": choice})
        else:
            table.update({"required": ["name"], **choice})
        properties[section] = table
    definitions["train"] = section_schema(TrainConfig)
    properties["train"] = {"$ref": "#/definitions/train"}
    properties["data"]["description"] = "the corpus, its vocabulary and batching (memread.data.pipelines.DATASETS)"
    properties["reader"]["description"] = "the reader and its sizes (memread.readers.READERS)"
    properties["head"]["description"] = ("what surrounds the reader (memread.heads.HEADS); without a name, the "
                                         "default head of the data's task")
    properties["criterion"]["description"] = ("the loss and metrics (memread.criteria.CRITERIA); without a name, "
                                              "the dataset's default")

    rules = []
    for task in sorted({d.task for d in DATASETS.values()}):
        datasets = [n for n, d in DATASETS.items() if d.task == task]
        data_is = {"properties": {"data": {"properties": {"name": {"enum": datasets}}, "required": ["name"]}},
                   "required": ["data"]}
        criteria = [n for n, c in CRITERIA.items() if task in c.tasks]
        rules.append({"if": data_is, "then": {"properties": {  # a head and criterion that serve the data's task
            "head": {"properties": {"name": {"enum": list(heads_for(task))}}},
            "criterion": {"properties": {"name": {"enum": criteria}}}}}})
        rules.append({"if": {**data_is, "properties": {**data_is["properties"],
                                                        "head": {"not": {"required": ["name"]}}}},
                      "then": {"properties": {"head": {"$ref": f"#/definitions/head.{DEFAULT_HEADS[task]}"}}}})
    for name, dataset in DATASETS.items():  # [criterion] without a name: the dataset's own
        rules.append({"if": {"properties": {"data": {"properties": {"name": {"const": name}}, "required": ["name"]},
                                            "criterion": {"not": {"required": ["name"]}}}, "required": ["data"]},
                      "then": {"properties": {"criterion": {"$ref": f"#/definitions/criterion.{dataset.criterion}"}}}})
    return {
        "$schema": DRAFT,
        "title": "memread experiment",
        "description": "An experiment file of memread (memread train CONFIG): data + reader + head + criterion + "
                       "train. Generated by `memread config schema` from the config dataclasses.",
        "type": "object",
        "properties": {s: properties[s] for s in SECTIONS},
        "required": ["data", "reader"],
        "additionalProperties": False,
        "allOf": rules,
        "definitions": definitions,
    }


# ----------------------------------------------------------------------------- the resolved experiment as TOML


def toml_value(value: Any) -> str:
    """A config value as TOML (strings as basic strings, tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):  # JSON's escapes are TOML's; non-ASCII kept as it is (TOML has no surrogates)
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_value(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def show_toml(cfg: Any, source: str = "") -> str:
    """``cfg`` (an :class:`ExperimentConfig`) as a TOML experiment file with every key."""
    from memread.config import SECTIONS

    lines = [f"# {source}: every key, defaults filled in (memread config show)" if source else
             "# every key, defaults filled in (memread config show)"]
    for section in SECTIONS:
        lines += ["", f"[{section}]"]
        table = getattr(cfg, section)
        for f in dataclasses.fields(table):
            lines.append(f"{f.name} = {toml_value(getattr(table, f.name))}")
    return "\n".join(lines) + "\n"
