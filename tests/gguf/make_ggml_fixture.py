#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes tests/data/gguf/ggml_small.gguf with the real ggml's own GGUF writer (gguf_write_to_file of npm's
@node-llama-cpp/linux-x64@3.22.1, see ggml_peer.py), and ggml_small.dequantized.f32: ggml's to_float of its two
block tensors (blk.0.ffn_down.weight, then blk.0.ffn_up.weight), float32 little-endian. test_gguf_fixture.cpp reads
both. Deterministic: the same ggml writes the same bytes.

usage: make_ggml_fixture.py [--ggml-dir DIR] [OUT_DIR]   (DIR defaults to ~/.cache/tensorfile-ggml)
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_peer  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--ggml-dir", default=os.path.expanduser("~/.cache/tensorfile-ggml"))
    parser.add_argument("out_dir", nargs="?", default=os.path.join(here, "..", "data", "gguf"))
    args = parser.parse_args()
    ggml = ggml_peer.Ggml(ggml_peer.library_path(args.ggml_dir))
    f32 = ggml_peer.f32_bits
    kvs = [
        ["general.architecture", "string", b"llama".hex()],
        ["general.name", "string", "tensorfile fixture \u2581".encode().hex()],
        ["general.quantization_version", "uint32", 2],
        ["llama.block_count", "uint32", 1],
        ["llama.rope.freq_base", "float32", f32(10000.0)],
        ["llama.attention.layer_norm_rms_epsilon", "float32", f32(1e-5)],
        ["tokenizer.ggml.tokens", "array[string]", [t.encode().hex() for t in ["<s>", "</s>", "\u2581hi"]]],
        ["tokenizer.ggml.scores", "array[float32]", [f32(0.0), f32(-1.5), f32(2.25)]],
        ["tokenizer.ggml.token_type", "array[int32]", [3, 3, 1]],
        ["t.u8", "uint8", 200], ["t.i8", "int8", -100], ["t.u16", "uint16", 60000], ["t.i16", "int16", -30000],
        ["t.i32", "int32", -2000000000], ["t.bool", "bool", True], ["t.u64", "uint64", 2**64 - 2],
        ["t.i64", "int64", -(2**62)], ["t.f64", "float64", ggml_peer.f64_bits(0.1)],
    ]
    # Source floats exact in float32: (i - 20) * 0.375 and, for Q4_K, a sawtooth of 1/64 steps.
    down = struct.pack("<64f", *[(i - 20) * 0.375 for i in range(64)])
    up = struct.pack("<256f", *[((i * 37) % 101 - 50) / 64.0 for i in range(256)])
    q8 = ggml.quantize(8, down, 32)
    q4k = ggml.quantize(12, up, 256)
    tensors = [
        ["token_embd.weight", 0, [4, 2], struct.pack("<8f", *[0.5 * i - 1.0 for i in range(8)])],
        ["blk.0.attn_norm.weight", 1, [8], struct.pack("<8H", 0x3C00, 0x4000, 0xC200, 0x0000, 0x8000, 0x7BFF,
                                                        0x0001, 0x3555)],
        ["blk.0.ffn_down.weight", 8, [32, 2], q8],
        ["blk.0.ffn_up.weight", 12, [256], q4k],
        ["h.i32", 26, [3, 1], struct.pack("<3i", -7, 0, 2147483647)],
    ]
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, "ggml_small.gguf")
    ggml.write_gguf(path, kvs, tensors)
    back = ggml.read_gguf(path)
    assert back is not None and back["kvs"] == kvs, "ggml reads back what it wrote"
    with open(os.path.join(args.out_dir, "ggml_small.dequantized.f32"), "wb") as f:
        f.write(ggml.to_float(8, q8) + ggml.to_float(12, q4k))
    print("wrote %s (%d bytes)" % (path, os.path.getsize(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
