"""The Xilinx .bit file header (design, part, tool version, date) and which board a part fits.

Layout (Xilinx bitstream format, as written by `write_bitstream`): a 2-byte big-endian length
(9) and 9 preamble bytes `0f f0 0f f0 0f f0 0f f0 00`, a 2-byte field (1), then tagged fields:
`a` design (`name;UserID=...;Version=<tool>`), `b` part, `c` date, `d` time — each a 1-byte tag,
a 2-byte big-endian length and a NUL-terminated string — and `e`, a 1-byte tag with a 4-byte
big-endian length of the configuration data that fills the rest of the file.

The part in the header is die + package (e.g. `7z020clg484`); VTA's PYNQ builds target the
xc7z020clg484 and run on the PYNQ-Z1's xc7z020clg400 because the design uses no package pins, so
a bitstream fits a board when the dies match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from codesign.errors import ConfigError

PREAMBLE = b"\x00\x09\x0f\xf0\x0f\xf0\x0f\xf0\x0f\xf0\x00\x00\x01"
MAX_HEADER = 4096  # a real header is ~100 bytes; refuse to scan further
_PART = re.compile(r"^(?:xc)?(?P<die>7[a-z]\d{2,3}s?|z[uq]\d+(?:eg|ev|cg|dr)|[a-z]*\d+[a-z]*?)"
                   r"-?(?P<pkg>[a-z]{2,4}\d{3,4})?(?:-.*)?$")


@dataclass(frozen=True)
class BitHeader:
    design: str  # e.g. vta_wrapper
    user_id: str | None
    tool_version: str | None  # Vivado version that wrote the file, e.g. 2018.3
    part: str  # as in the header, e.g. 7z020clg484
    date: str  # yyyy/mm/dd
    time: str  # hh:mm:ss
    header_bytes: int
    data_bytes: int  # length of the configuration data ('e' field)

    @property
    def die(self) -> str:
        return die_of(self.part)

    def to_dict(self) -> dict[str, object]:
        return {"design": self.design, "user_id": self.user_id, "tool_version": self.tool_version,
                "part": self.part, "date": self.date, "time": self.time,
                "header_bytes": self.header_bytes, "data_bytes": self.data_bytes}


def die_of(part: str) -> str:
    """The die of a Xilinx part name: xc7z020clg400-1 -> 7z020, xczu3eg-sbva484-1-e -> zu3eg."""
    m = _PART.match(part.strip().lower())
    return m.group("die") if m else part.strip().lower()


def parse_header(data: bytes, source: str = ".bit file", file_size: int | None = None) -> BitHeader:
    """Parse the header of a .bit file given its first bytes (at least the header). With
    `file_size`, a file shorter than header + configuration data is refused as truncated."""
    if not data.startswith(PREAMBLE):
        raise ConfigError(f"{source}: not a Xilinx .bit file (the header does not start with the .bit preamble)")
    pos = len(PREAMBLE)
    fields: dict[str, str] = {}
    while True:
        if pos >= len(data) or pos > MAX_HEADER:
            raise ConfigError(f"{source}: truncated .bit header (no 'e' field in the first {min(len(data), MAX_HEADER)} bytes)")
        tag = chr(data[pos])
        if tag == "e":
            if pos + 5 > len(data):
                raise ConfigError(f"{source}: truncated .bit header (the 'e' length is cut off)")
            length = int.from_bytes(data[pos + 1:pos + 5], "big")
            header_bytes = pos + 5
            break
        if tag not in "abcd":
            raise ConfigError(f"{source}: malformed .bit header: unexpected field tag {tag!r} at byte {pos}")
        if pos + 3 > len(data):
            raise ConfigError(f"{source}: truncated .bit header (field {tag!r})")
        n = int.from_bytes(data[pos + 1:pos + 3], "big")
        raw = data[pos + 3:pos + 3 + n]
        if len(raw) < n:
            raise ConfigError(f"{source}: truncated .bit header (field {tag!r})")
        fields[tag] = raw.rstrip(b"\x00").decode("ascii", errors="replace")
        pos += 3 + n
    missing = [t for t in "abcd" if t not in fields]
    if missing:
        raise ConfigError(f"{source}: malformed .bit header: missing field(s) {', '.join(missing)} "
                          "(a: design, b: part, c: date, d: time)")
    if file_size is not None and file_size < header_bytes + length:
        raise ConfigError(f"{source}: truncated .bit file: {file_size} bytes, the header announces "
                          f"{header_bytes + length} ({length} bytes of configuration data)")
    parts = fields["a"].split(";")
    kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    return BitHeader(design=parts[0], user_id=kv.get("UserID"), tool_version=kv.get("Version"),
                     part=fields["b"], date=fields["c"], time=fields["d"], header_bytes=header_bytes,
                     data_bytes=length)


def read_header(path: str | Path) -> BitHeader:
    """Header of a .bit file on disk; refuses a missing, unreadable or truncated file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(MAX_HEADER)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such .bit file") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise ConfigError(f"{path}: cannot read this .bit file ({exc.__class__.__name__})") from None
    if size == 0:
        raise ConfigError(f"{path}: empty .bit file")
    return parse_header(head, str(path), file_size=size)


def check_part(part: str, board_part: str, board_name: str, source: str) -> None:
    """Refuse a bitstream built for another die than the board's FPGA."""
    if die_of(part) != die_of(board_part):
        raise ConfigError(f"{source}: built for part {part} (die {die_of(part)}), which is not the FPGA of "
                          f"board {board_name} ({board_part}, die {die_of(board_part)})")


def make_header(design: str, part: str, date: str, time: str, data_bytes: int,
                tool_version: str = "2018.3") -> bytes:
    """A .bit header with these fields (test fixtures, and the emulated board's uploads)."""
    out = bytearray(PREAMBLE)
    for tag, text in (("a", f"{design};UserID=0XFFFFFFFF;Version={tool_version}"), ("b", part), ("c", date),
                      ("d", time)):
        raw = text.encode("ascii") + b"\x00"
        out += tag.encode() + len(raw).to_bytes(2, "big") + raw
    out += b"e" + int(data_bytes).to_bytes(4, "big")
    return bytes(out)


__all__ = ["BitHeader", "PREAMBLE", "parse_header", "read_header", "die_of", "check_part", "make_header"]
