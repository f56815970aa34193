"""Ctrl-C that is never lost.

Python runs a SIGINT handler between bytecodes of the main thread. When that moment falls inside a
ctypes callback — numba's LLVM object-cache notifier runs one during every JIT compile — ctypes
prints the KeyboardInterrupt as "Exception ignored" and drops it: `codesign tune` then went on
tuning for another minute. The CLI installs `catching()`, whose handler remembers the request as
well as raising it; loops that run long (the measurement loop) call `check()`, which raises it again.
The dropped exception's "Exception ignored" traceback is not printed: the user pressed Ctrl-C and
sees "interrupted", nothing else.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_requested = False


def _handler(signum: int, frame: FrameType | None) -> None:
    global _requested
    _requested = True
    raise KeyboardInterrupt


def check() -> None:
    """Raise KeyboardInterrupt when a Ctrl-C arrived and something swallowed its exception."""
    if _requested:
        raise KeyboardInterrupt


@contextmanager
def catching() -> Iterator[None]:
    """Install the remembering handler for the block (main thread only, and only over Python's
    default handler: Ray Tune's or a caller's own stays)."""
    global _requested
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    previous_hook = sys.unraisablehook

    def quiet_interrupts(unraisable: sys.UnraisableHookArgs) -> None:
        if not (unraisable.exc_type and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            previous_hook(unraisable)

    _requested = False
    signal.signal(signal.SIGINT, _handler)
    sys.unraisablehook = quiet_interrupts
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.unraisablehook = previous_hook
        _requested = False
