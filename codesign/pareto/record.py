"""`JsonRecord`: a frozen dataclass read from one JSON object and written back to the same bytes.

The sweep's files (trials.jsonl, pareto.json) cross modules and outlive versions of the code, so
their rows are typed records inside the code (attribute access) and plain dicts only at the file
boundary (`from_json` / `to_json`). Two rules keep old files loading and rewriting unchanged:

- keys this version does not know are kept in `extra` and written back;
- a record read from a file remembers the file's key order (`key_order`) and writes exactly those
  keys in that order (a key missing from an older file is not added as null). A record built in
  code (no `key_order`) writes its fields in declaration order, leaving out the `OMIT` fields
  that hold their default -- the order the code on main wrote.

Nested records (`NESTED`: field -> record type) load from an object or a list of objects and are
held as a record or a tuple of records (`NESTED_MAP`: an object of them, held as a dict). Values are stored as read (no int -> float coercion: that
would change the bytes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cache
from typing import Any, ClassVar, Self

# What a JSON value is, for the fields that stay free-form (`hw`, `resources`, knobs, ...).
JsonObject = dict[str, Any]


@dataclass(frozen=True)
class JsonRecord:
    extra: JsonObject = field(default_factory=dict, kw_only=True, compare=False, repr=False)
    key_order: tuple[str, ...] = field(default=(), kw_only=True, compare=False, repr=False)

    NESTED: ClassVar[dict[str, type[JsonRecord]]] = {}  # field -> record type (an object or a list of them)
    NESTED_MAP: ClassVar[dict[str, type[JsonRecord]]] = {}  # field -> record type of each value of an object
    OMIT: ClassVar[frozenset[str]] = frozenset()  # left out of a record built in code when at their default

    @classmethod
    @cache
    def names(cls) -> tuple[str, ...]:
        """The JSON keys of the record's fields, in declaration order."""
        return tuple(f.name for f in fields(cls) if f.name not in ("extra", "key_order"))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        names = set(cls.names())
        known: dict[str, Any] = {}
        for key, value in data.items():
            if key in names:
                sub, by_name = cls.NESTED.get(key), cls.NESTED_MAP.get(key)
                if sub is not None:
                    value = _load(sub, value)
                elif by_name is not None and isinstance(value, Mapping):
                    value = {k: _load(by_name, v) for k, v in value.items()}
                known[key] = value
        return cls(**cls.coerce(known), extra={k: v for k, v in data.items() if k not in names},
                   key_order=tuple(data))

    @classmethod
    def of(cls, value: Self | Mapping[str, Any]) -> Self:
        """A record as is, or a JSON object read into one."""
        return value if isinstance(value, cls) else cls.from_json(value)  # type: ignore[arg-type]

    @classmethod
    def coerce(cls, known: dict[str, Any]) -> dict[str, Any]:
        """Hook: normalise the known values read from a file (default: as read)."""
        return known

    def built(self) -> Self:
        """The record as if built in code: written in declaration order (its nested records keep theirs)."""
        return replace(self, key_order=())

    def to_json(self) -> JsonObject:
        values = {name: _dump(getattr(self, name)) for name in self.names()}
        defaults = _defaults(type(self))
        if self.key_order:
            out = {k: values[k] if k in values else self.extra[k] for k in self.key_order
                   if k in values or k in self.extra}
            # Set in code after the file was read (a confirmed design's measured latency): appended.
            out.update((k, v) for k, v in values.items() if k not in out and v != defaults.get(k))
        else:
            out = {k: v for k, v in values.items() if k not in self.OMIT or v != defaults.get(k)}
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out

    def get(self, key: str, default: Any = None) -> Any:
        """The value of a JSON key, known field or extra (`default` when absent or null): for keys
        named at run time (an objective, a sort column)."""
        value = getattr(self, key) if key in self.names() else self.extra.get(key)
        return default if value is None else value


@cache
def _defaults(cls: type[JsonRecord]) -> dict[str, Any]:
    """Each field's default as written (a tuple of records: a list)."""
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.default is not MISSING:
            out[f.name] = _dump(f.default)
        elif f.default_factory is not MISSING:
            out[f.name] = _dump(f.default_factory())
    return out


def _load(sub: type[JsonRecord], value: Any) -> Any:
    if isinstance(value, Mapping):
        return sub.from_json(value)
    if isinstance(value, list):
        return tuple(sub.from_json(v) if isinstance(v, Mapping) else v for v in value)
    return value


def _dump(value: Any) -> Any:
    if isinstance(value, JsonRecord):
        return value.to_json()
    if isinstance(value, tuple):
        return [_dump(v) for v in value]
    if isinstance(value, Mapping) and any(isinstance(v, JsonRecord) for v in value.values()):
        return {k: _dump(v) for k, v in value.items()}
    return value


__all__ = ["JsonObject", "JsonRecord"]
