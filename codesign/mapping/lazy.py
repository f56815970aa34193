"""`lazy`: `functools.cached_property` without its lock.

Python 3.11's cached_property takes a class-wide RLock on every first access; the timing fast path
reads ~15 of them per evaluated schedule (a fresh `Mapping` and its kernels each time), where the
lock is a measurable part of the evaluation. The values are pure functions of frozen fields, so a
race computes one twice, harmlessly. A non-data descriptor: once stored in the instance's
`__dict__`, the attribute is read from there without calling the descriptor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class lazy(Generic[T]):  # noqa: N801 - reads as the decorator it replaces
    def __init__(self, fn: Callable[[Any], T]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> T:
        if obj is None:
            return self  # type: ignore[return-value]
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


class derived:  # noqa: N801 - reads as `lazy`
    """A lazy attribute computed together with others by one `fill(obj)`, which stores all of them
    in the instance's `__dict__`: the first read of any runs it once, every later read of each is
    the plain attribute. For values one pass derives together (a fresh `Mapping`'s loop-nest counts,
    all read by the lowering of every evaluated schedule), one call instead of a descriptor call,
    a function and its generators each."""

    def __init__(self, fill: Callable[[Any], None], doc: str = "") -> None:
        self.fill = fill
        self.name = ""
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        self.fill(obj)
        return obj.__dict__[self.name]
