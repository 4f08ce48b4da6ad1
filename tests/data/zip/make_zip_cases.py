#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the zip and raw-DEFLATE fixtures of tests/test_zip_reader.cpp (stdlib only).
#
# Generated with Debian's /usr/bin/python3 3.11.2 (zlib 1.2.13). Run from anywhere:
#     python3 tests/data/zip/make_zip_cases.py [path/to/tests/data/torch]
# The output is deterministic for a given zlib version; other zlib versions may pick different
# Huffman codes, which the tests do not depend on (they check sizes and CRCs of the inflated data).
import pathlib
import sys
import zipfile
import zlib

HERE = pathlib.Path(__file__).resolve().parent
TORCH = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent / "torch"
EPOCH = (1980, 1, 1, 0, 0, 0)


def rewrite(source, target, compression):
    """Copies every entry of `source`, in order and under the same names, with `compression`."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            out = zipfile.ZipInfo(info.filename, date_time=EPOCH)
            out.compress_type = compression
            out.external_attr = 0o644 << 16
            dst.writestr(out, src.read(info.filename), compresslevel=9)


class XorShift:
    """A tiny deterministic generator, so the data does not depend on Python's `random`."""

    def __init__(self, seed):
        self.state = seed

    def next(self):
        x = self.state
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self.state = x
        return x


def text(size, seed):
    """Word soup with a skewed vocabulary and every byte value once, so that some Huffman codes are
    long (more than 10 bits) and matches of many lengths and distances occur."""
    rng = XorShift(seed)
    words = [b"tensor", b"storage", b"the", b"a", b"zip", b"deflate", b"huffman", b"of", b"and", b"data",
             b"float32", b"offset", b"stride", b"pickle", b"archive", b"central", b"directory", b"\n"]
    out = bytearray()
    rare = list(range(256))
    while len(out) < size:
        r = rng.next()
        out += words[min(r % len(words), (r >> 8) % len(words), (r >> 16) % len(words))] + b" "
        if r % 97 == 0 and rare:
            out.append(rare.pop())
    return bytes(out[:size])


def noise(size, seed):
    rng = XorShift(seed)
    return bytes(rng.next() & 0xFF for _ in range(size))


def raw_deflate(data, level, strategy, mem_level):
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15, mem_level, strategy)
    return compressor.compress(data) + compressor.flush()


def main():
    rewrite(TORCH / "state_dict_linear_bn.pt", HERE / "state_dict_deflated.zip", zipfile.ZIP_DEFLATED)
    rewrite(TORCH / "state_dict_linear_bn.pt", HERE / "state_dict_python_stored.zip", zipfile.ZIP_STORED)

    far = noise(25000, 7)
    # name: (data, level, strategy, memory level); a low memory level makes zlib end blocks sooner
    cases = {
        "stored": (noise(65000, 1) + bytes(1000), 0, zlib.Z_DEFAULT_STRATEGY, 9),  # two stored blocks
        "fixed": (text(20000, 2), 9, zlib.Z_FIXED, 9),  # fixed Huffman blocks only
        "dynamic": (text(100000, 3), 9, zlib.Z_DEFAULT_STRATEGY, 5),  # many dynamic blocks, long codes
        "huffman_only": (text(5000, 4), 9, zlib.Z_HUFFMAN_ONLY, 9),  # literals only
        "rle": (bytes(3000) + b"ab" * 2000 + bytes(range(256)) * 3, 9, zlib.Z_RLE, 9),  # distances 1 and 2
        "far": (far + far + far[:1000] * 3, 9, zlib.Z_DEFAULT_STRATEGY, 9),  # distance code 29, length 258
        "empty": (b"", 9, zlib.Z_DEFAULT_STRATEGY, 9),
    }
    lines = []
    for name, (data, level, strategy, mem_level) in cases.items():
        stream = raw_deflate(data, level, strategy, mem_level)
        assert zlib.decompress(stream, -15) == data
        (HERE / f"inflate_{name}.deflate").write_bytes(stream)
        lines.append(f"{name} {len(data)} {zlib.crc32(data):08x}\n")
    (HERE / "inflate_cases.txt").write_text("".join(lines))


if __name__ == "__main__":
    main()
