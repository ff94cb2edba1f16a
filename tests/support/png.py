"""Reading the pixels of a PNG (8-bit RGB or RGBA, not interlaced: what headless Chromium's screenshots are),
with the standard library only, to check what a screenshot shows."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from pathlib import Path


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def pixels(path: Path) -> Counter[tuple[int, int, int]]:
    """How many pixels of each RGB colour the image has."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, "only 8-bit RGB(A), not interlaced"
    step = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), width * step
    counts: Counter[tuple[int, int, int]] = Counter()
    previous = bytearray(stride)
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up, corner = previous[i], previous[i - step] if i >= step else 0
            predictor = (0, left, up, (left + up) // 2, _paeth(left, up, corner))[kind]
            line[i] = (line[i] + predictor) & 0xFF
        counts.update(tuple(line[i : i + 3]) for i in range(0, stride, step))  # type: ignore[misc]
        previous = line
    return counts
