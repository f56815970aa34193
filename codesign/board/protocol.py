"""What travels between a board server and its clients over `tvm.rpc`, in one place.

Requests are plain RPC arguments (bytes, str, int, float). Every reply is one bytes blob:

    MAGIC b"VTARSP\\x01" | u32 header length | header JSON | payload | u32 CRC-32 of all before

The header holds `ok` and, on failure, `error` (one line) and `kind` (`refused`: the request is
wrong; `runtime`: the device failed; `timeout`: the device never signalled done). A `run` reply's
payload is the output regions' bytes in `header["outputs"]` order. Nothing is pickled.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

from codesign.errors import BoardError

MAGIC = b"VTARSP\x01"
PREFIX = "codesign.board."
INFO, PROGRAM, RUN = PREFIX + "info", PREFIX + "program", PREFIX + "run"
FUNCTIONS = (INFO, PROGRAM, RUN)
# The session constructor the tvm.rpc protocol itself calls when a client connects; the only
# global function a board session keeps besides FUNCTIONS.
SESSION_CONSTRUCTOR = "rpc.LocalSession"
DEFAULT_PORT = 9091  # VTA's board port (vta-docs/vta.md §6)
DEFAULT_MAX_PAYLOAD = 64 << 20  # bytes per request: a 4 MB bitstream or a large layer's program
KINDS = ("refused", "runtime", "timeout")


def encode(header: dict[str, Any], payload: bytes = b"") -> bytes:
    head = json.dumps(header, sort_keys=True).encode()
    body = MAGIC + struct.pack("<I", len(head)) + head + payload
    return body + struct.pack("<I", zlib.crc32(body))


def decode(blob: bytes, source: str = "board") -> tuple[dict[str, Any], bytes]:
    blob = bytes(blob)
    if len(blob) < len(MAGIC) + 8 or not blob.startswith(MAGIC):
        raise BoardError(f"{source}: reply is not a codesign board reply (is this a codesign board server?)")
    body, (crc,) = blob[:-4], struct.unpack("<I", blob[-4:])
    if zlib.crc32(body) != crc:
        raise BoardError(f"{source}: reply checksum mismatch (corrupted in transit)")
    (hlen,) = struct.unpack_from("<I", body, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(body[start:start + hlen])
    except ValueError as exc:
        raise BoardError(f"{source}: reply header is not JSON ({exc})") from None
    return header, body[start + hlen:]


def error(message: str, kind: str = "refused") -> bytes:
    return encode({"ok": False, "error": message, "kind": kind})


class RemoteError(BoardError):
    """A board's refusal or failure; `kind` is one of KINDS."""

    def __init__(self, message: str, kind: str = "refused") -> None:
        super().__init__(message)
        self.kind = kind


def check(header: dict[str, Any], source: str) -> dict[str, Any]:
    if not header.get("ok", False):
        raise RemoteError(f"{source}: {header.get('error', 'unknown error')}", str(header.get("kind", "refused")))
    return header


__all__ = ["encode", "decode", "error", "check", "RemoteError", "FUNCTIONS", "INFO", "PROGRAM", "RUN",
           "DEFAULT_PORT", "DEFAULT_MAX_PAYLOAD", "SESSION_CONSTRUCTOR"]
