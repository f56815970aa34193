"""The board side's content cache of `run_cached`: program parts by sha256, least recently used
first out, bounded in bytes (docs/board.md, "The run protocol").

Only bytes whose sha256 the server has just verified go in, so a digest always names exactly the
bytes it hashes. Each tvm session is its own process, so each session has its own cache: one
client can neither read nor probe (by timing) what another client sent.
"""

from __future__ import annotations

from collections import OrderedDict


class BlobCache:
    """Verified blobs by sha256 hex digest; `put` evicts the least recently used to stay within
    `limit_bytes` and returns what it evicted (the client's view of the cache follows it)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = max(0, int(limit_bytes))
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self.held_bytes = 0

    def __len__(self) -> int:
        return len(self._blobs)

    def __contains__(self, digest: object) -> bool:
        return digest in self._blobs

    def get(self, digest: str) -> bytes | None:
        blob = self._blobs.get(digest)
        if blob is not None:
            self._blobs.move_to_end(digest)
        return blob

    def put(self, digest: str, blob: bytes) -> list[str]:
        """Keep `blob` (already verified to hash to `digest`). Returns the digests no longer held:
        the evicted ones, and `digest` itself when the blob alone exceeds the limit."""
        if digest in self._blobs:
            self._blobs.move_to_end(digest)
            return []
        if len(blob) > self.limit_bytes:
            return [digest]
        evicted = []
        while self.held_bytes + len(blob) > self.limit_bytes:
            old, data = self._blobs.popitem(last=False)
            self.held_bytes -= len(data)
            evicted.append(old)
        self._blobs[digest] = blob
        self.held_bytes += len(blob)
        return evicted


__all__ = ["BlobCache"]
