"""What travels between a board server and its clients over `tvm.rpc`, in one place.

Requests of `info`, `program` and `run` are plain RPC arguments (bytes, str, int, float). Every
reply, and the one argument of `run_cached`, is one bytes blob:

    MAGIC | u32 header length | header JSON | payload | u32 CRC-32 of all before

(MAGIC b"VTARSP\\x01" for replies, b"VTAREQ\\x01" for requests). A reply's header holds `ok`
and, on failure, `error` (one line) and `kind` (`refused`: the request is wrong; `runtime`: the
device failed; `timeout`: the device never signalled done; `missing`: a `run_cached` request
named a part by digest that this session does not hold, listed in `missing`). A run reply's
payload is the output regions' bytes in `header["outputs"]` order (or nothing, when the request
asked for their sha256 only). Nothing is pickled.

`run_cached` (docs/board.md, "The run protocol"): the request's header lists the program blob's
parts (`Program.blob_parts`) as {nbytes, sha256, inline[, zlib]}; the payload holds the inline
parts (a part with `zlib` is that many bytes of zlib data that must inflate to exactly `nbytes`).
A part of at least CACHE_MIN_PART bytes carries its sha256: the board checks it against the bytes
it received and keeps those bytes (per session, LRU, at most `cache_bytes`), so the client names
that part by digest only from then on. The reply says what the board evicted, which keeps the
client's view of the cache exact; a part it no longer holds is a `missing` refusal and the client
sends it again -- never a guess.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

from codesign.errors import BoardError

MAGIC = b"VTARSP\x01"
REQUEST_MAGIC = b"VTAREQ\x01"
PREFIX = "codesign.board."
INFO, PROGRAM, RUN, RUN_CACHED = PREFIX + "info", PREFIX + "program", PREFIX + "run", PREFIX + "run_cached"
# A deployed network (docs/board.md, "Over RPC"): `load_network(bundle)` verifies and loads a
# .vtanet bundle for this session; `infer(request)` runs it on one input. An infer request is one
# blob (REQUEST_MAGIC, header {"dtype", "shape"}, payload the input's bytes); its reply's payload is
# the int8 outputs' bytes, its header their shapes and the per-step wall and device ms.
LOAD_NETWORK, INFER = PREFIX + "load_network", PREFIX + "infer"
FUNCTIONS = (INFO, PROGRAM, RUN, RUN_CACHED, LOAD_NETWORK, INFER)
INFER_DTYPES = ("int8", "float32")
# The session constructor the tvm.rpc protocol itself calls when a client connects; the only
# global function a board session keeps besides FUNCTIONS.
SESSION_CONSTRUCTOR = "rpc.LocalSession"
DEFAULT_PORT = 9091  # VTA's board port (docs/vta.md §6)
DEFAULT_MAX_PAYLOAD = 64 << 20  # bytes per request: a 4 MB bitstream or a large layer's program
KINDS = ("refused", "runtime", "timeout", "missing")
# Parts of a program blob smaller than this travel inline every time: a digest would not pay off.
CACHE_MIN_PART = 4096
# Bytes of verified parts a board session keeps (`codesign board serve --cache-bytes`): a PYNQ-Z1
# has 512 MB, and one tuning task's inputs and weights are at most a few MB.
DEFAULT_CACHE_BYTES = 64 << 20
OUTPUT_MODES = ("bytes", "sha256")  # what a run reply carries of the outputs
_HEX = frozenset("0123456789abcdef")


def is_sha256(text: Any) -> bool:
    return isinstance(text, str) and len(text) == 64 and set(text) <= _HEX


def encode(header: dict[str, Any], payload: bytes = b"", magic: bytes = MAGIC) -> bytes:
    head = json.dumps(header, sort_keys=True).encode()
    body = b"".join((magic, struct.pack("<I", len(head)), head, payload))
    return body + struct.pack("<I", zlib.crc32(body))


def decode(blob: bytes, source: str = "board", magic: bytes = MAGIC) -> tuple[dict[str, Any], memoryview]:
    """(header, payload); the payload is a view into `blob` (no copy of a large payload)."""
    what = "request" if magic == REQUEST_MAGIC else "reply"
    view = memoryview(blob)
    if len(view) < len(magic) + 8 or view[:len(magic)] != magic:
        raise BoardError(f"{source}: {what} is not a codesign board {what}"
                         + (" (is this a codesign board server?)" if what == "reply" else ""))
    body, (crc,) = view[:-4], struct.unpack("<I", view[-4:])
    if zlib.crc32(body) != crc:
        raise BoardError(f"{source}: {what} checksum mismatch (corrupted in transit)")
    (hlen,) = struct.unpack_from("<I", body, len(magic))
    start = len(magic) + 4
    try:
        header = json.loads(bytes(body[start:start + hlen]))
    except ValueError as exc:
        raise BoardError(f"{source}: {what} header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise BoardError(f"{source}: {what} header is not a JSON object")
    return header, body[start + hlen:]


def error(message: str, kind: str = "refused", **extra: Any) -> bytes:
    return encode({**extra, "ok": False, "error": message, "kind": kind})


class RemoteError(BoardError):
    """A board's refusal or failure; `kind` is one of KINDS, `header` the whole reply header."""

    def __init__(self, message: str, kind: str = "refused", header: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.header = header or {}


def check(header: dict[str, Any], source: str) -> dict[str, Any]:
    if not header.get("ok", False):
        raise RemoteError(f"{source}: {header.get('error', 'unknown error')}", str(header.get("kind", "refused")),
                          header)
    return header


__all__ = ["encode", "decode", "error", "check", "is_sha256", "RemoteError", "FUNCTIONS", "INFO", "PROGRAM", "RUN",
           "RUN_CACHED", "MAGIC", "REQUEST_MAGIC", "DEFAULT_PORT", "DEFAULT_MAX_PAYLOAD", "DEFAULT_CACHE_BYTES",
           "CACHE_MIN_PART", "OUTPUT_MODES", "SESSION_CONSTRUCTOR", "LOAD_NETWORK", "INFER", "INFER_DTYPES"]
