#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""gguf.peer: tensorfile against the real ggml (libggml-base.so of npm's @node-llama-cpp/linux-x64, see
ggml_peer.py), through ggml_peer_probe:

  a. files ggml writes (every scalar metadata type and an array of each, every tensor type ggml defines, several
     alignments) read by tensorfile's front door (load and open, heap, mmap, threads, memory) with the same
     metadata, names, shapes, offsets and bytes, and dequantize() of them equal to ggml's to_float;
  b. dequantize() equal to ggml's to_float bit for bit on random and edge blocks, for every type both read;
  c. quantize() to Q8_0 and Q4_0 equal to ggml_quantize_chunk's bytes;
  d. files save_gguf writes (every metadata type, alignments 1 to 4096, Q8_0 and Q4_0 tensors, a GGUF load written
     back) read by gguf_init_from_file with the same metadata, tensor infos, offsets and data;
  e. a split model save_gguf writes: its parts named as libllama's llama_split_path names them (and read back by
     llama_split_prefix), each read by gguf_init_from_file with llama.cpp's split keys, the tensors in order.

usage: check_with_ggml.py PROBE --ggml-dir DIR   (DIR holds node_modules/@node-llama-cpp/linux-x64)
Without the library: exit 77 (CTest's skip, the reason printed), or 1 with CI=true or TENSORFILE_REQUIRE_GGML=1.
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_peer  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)
    return ok


def probe(program, *args):
    run = subprocess.run([program, *map(str, args)], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError("%s %s exited %d: %s" % (program, " ".join(map(str, args)), run.returncode, run.stderr))
    return json.loads(run.stdout)


def every_kv(rng):
    """One key of each scalar type at its edges and an array of each, in the canonical form."""
    f32, f64 = ggml_peer.f32_bits, ggml_peer.f64_bits
    text = "h\u00e9llo \u2581w\u00f6rld \"q\"\n".encode().hex()
    return [
        ["general.architecture", "string", b"llama".hex()],
        ["t.u8", "uint8", 255], ["t.i8", "int8", -128], ["t.u16", "uint16", 65535], ["t.i16", "int16", -32768],
        ["t.u32", "uint32", 2**32 - 1], ["t.i32", "int32", -2**31], ["t.f32", "float32", f32(-1.5e-40)],
        ["t.bool", "bool", True], ["t.bool_false", "bool", False], ["t.str", "string", text],
        ["t.empty", "string", ""], ["t.u64", "uint64", 2**64 - 1], ["t.i64", "int64", -2**63],
        ["t.f64", "float64", f64(-0.0)], ["t.f64_big", "float64", f64(1.7976931348623157e308)],
        ["t.f32_inf", "float32", 0x7F800000],
        ["a.u8", "array[uint8]", [0, 1, 255]], ["a.i8", "array[int8]", [-128, 127]],
        ["a.u16", "array[uint16]", [0, 65535]], ["a.i16", "array[int16]", [-32768, 32767]],
        ["a.u32", "array[uint32]", [rng.randrange(2**32) for _ in range(5)]],
        ["a.i32", "array[int32]", [-2**31, 2**31 - 1, 0]], ["a.f32", "array[float32]", [f32(0.1), f32(-3e38), 1]],
        ["a.bool", "array[bool]", [True, False, True]],
        ["a.str", "array[string]", [b"<s>".hex(), "", "\u2581the".encode().hex(), "a\u00ffb".encode().hex()]],
        ["a.u64", "array[uint64]", [0, 2**64 - 1]], ["a.i64", "array[int64]", [-2**63, 2**63 - 1]],
        ["a.f64", "array[float64]", [f64(0.1), f64(5e-324)]], ["a.empty", "array[int32]", []],
        ["a.empty_str", "array[string]", []],
    ]


# The block types ggml_quantize_chunk writes without an importance matrix (q8_1 and q8_K it does not write; the
# lattice types need their grids set up, slow, and random bytes serve as well).
QUANTIZED_BY_GGML = {2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 34, 35, 39, 40, 41, 42}


def random_tensors(ggml, rng):
    """A tensor of every type ggml defines: plain ones of random bytes, block ones quantized by ggml where it
    quantizes without an importance matrix, else random bytes. Shapes of 1 to 4 dims, some with trailing 1s."""
    shapes = [[2], [3, 2], [1, 2, 3], [2, 1, 1, 2], [1, 1]]
    tensors = []
    for index, type_id in enumerate(ggml.type_ids()):
        t = ggml.traits(type_id)
        shape = list(shapes[index % len(shapes)])
        shape[0] *= t["block_size"]
        count = 1
        for extent in shape:
            count *= extent
        nbytes = count // t["block_size"] * t["type_size"]
        if type_id in QUANTIZED_BY_GGML:
            floats = struct.pack("<%df" % count, *[rng.gauss(0, 1) for _ in range(count)])
            data = ggml.quantize(type_id, floats, shape[0])
        else:
            data = rng.randbytes(nbytes)
        tensors.append(["t.%s" % t["name"], type_id, shape, data])
    return tensors


def torch_shape(ne):
    return list(reversed(ne[:ggml_peer.n_dims(ne)]))


def check_load(where, got, kvs, tensors):
    check(got["metadata"] == kvs, "%s: metadata differs from what ggml wrote:\n  %s\n  %s" % (where, got["metadata"],
                                                                                              kvs))
    check([t[0] for t in got["tensors"]] == [t[0] for t in tensors], "%s: tensor names" % where)
    for (name, type_id, shape, data), (_, want_type, want_ne, want_data) in zip(got["tensors"], tensors):
        t = ggml.traits(want_type)
        want_shape = torch_shape(want_ne)
        if t["block_size"] > 1:  # block types load as uint8 raw blocks, a row in bytes
            want_shape[-1] = want_ne[0] // t["block_size"] * t["type_size"]
        check(type_id == want_type, "%s: %s has ggml type %d, expected %d" % (where, name, type_id, want_type))
        check(shape == want_shape, "%s: %s has shape %s, expected %s" % (where, name, shape, want_shape))
        check(bytes.fromhex(data) == want_data, "%s: %s bytes differ" % (where, name))


def check_dump(program, label, path, back, kvs, tensors):
    """tensorfile's front door on `path` (every way the probe loads) against what ggml wrote there (`kvs`, `tensors`
    as (name, type id, ne, bytes)) and what ggml reads of it (`back`): metadata, names, shapes, bytes, offsets, and
    dequantize() of every tensor against ggml's to_float."""
    got = probe(program, "dump", path)
    for mode, load in got["loads"].items():
        check_load("%s/%s" % (label, mode), load, kvs, tensors)
    check(len(got["entries"]) == len(back["tensors"]), "%s: %d entries" % (label, len(got["entries"])))
    for entry, info in zip(got["entries"], back["tensors"]):
        name, type_id, shape, nbytes, offset = entry
        check(shape == torch_shape(info[2]), "%s: entry %s shape %s in elements" % (label, name, shape))
        check(nbytes == info[4], "%s: entry %s holds %d bytes, ggml %d" % (label, name, nbytes, info[4]))
        check(offset == back["data_offset"] + info[3], "%s: entry %s at byte %d, ggml's data offset + tensor offset %d"
              % (label, name, offset, back["data_offset"] + info[3]))
    for name, type_id, _, data in tensors:
        if name in got["dequantized"] and ggml.traits(type_id)["to_float"]:
            check(bytes.fromhex(got["dequantized"][name]) == ggml.to_float(type_id, data),
                  "%s: dequantize(loaded, %s) differs from ggml's to_float" % (label, name))
    print("%s: %d keys, %d tensors, %d loads agree with ggml; dequantize() of %d agrees with to_float" %
          (label, len(kvs), len(tensors), len(got["loads"]), len(got["dequantized"])))


def part_a(program, tmp, rng):
    """Files ggml writes, read by tensorfile."""
    tensors = random_tensors(ggml, rng)
    kvs = every_kv(rng)
    path = os.path.join(tmp, "ggml.gguf")
    ggml.write_gguf(path, kvs, tensors)
    back = ggml.read_gguf(path)
    check(back is not None and back["kvs"] == kvs, "a: ggml reads back its own metadata")
    check([[t[0], t[1], t[2], t[5]] for t in back["tensors"]] ==
          [[n, ty, ne + [1] * (4 - len(ne)), d] for n, ty, ne, d in tensors], "a: ggml reads back its own tensors")
    check_dump(program, "a/ggml.gguf (%d types)" % len({t[1] for t in tensors}), path, back, kvs, tensors)
    # ggml's writer keeps padding to 32 when general.alignment is set on a new context (the key changes, the padding
    # does not), so ggml writes other alignments only for a context read from a file, and writing one of those back
    # crashes in this build (ggml_backend_tensor_get on the infos' buffer field). Other alignments are part d's, ggml
    # reading save_gguf's files; here ggml and tensorfile both refuse what the writer makes of the key.
    path = os.path.join(tmp, "ggml_align64_key.gguf")
    ggml.write_gguf(path, [["general.alignment", "uint32", 64]] + kvs, tensors)
    run = subprocess.run([program, "dump", path], capture_output=True, text=True)
    refused = run.returncode == 1 and "is not a multiple of the alignment 64" in run.stderr
    check(ggml.read_gguf(path) is None and refused,
          "a/align64_key: ggml and tensorfile refuse a file whose offsets break its general.alignment: " + run.stderr)
    print("a/align64_key: ggml's writer pads to 32 under general.alignment 64; ggml and tensorfile both refuse it")


# Where each type's f16 scales are in a block (bytes from the block's start), for the edge blocks.
SCALE_OFFSETS = {1: [0], 30: [0], 2: [0], 3: [0, 2], 6: [0], 7: [0, 2], 8: [0], 10: [80, 82], 11: [108], 12: [0, 2],
                 13: [0, 2], 14: [208]}
EDGE_F16 = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00, 0x7C00, 0xFC00,
            0x7E00, 0x7C01, 0xFFFF]


def edge_blocks(type_id, type_size, rng):
    """Blocks of random quants with each edge f16 in every scale field (and all scales at once), then blocks of one
    byte repeated (all quants and scales at their extremes)."""
    blocks = []
    for value in EDGE_F16:
        for offsets in [[o] for o in SCALE_OFFSETS[type_id]] + [SCALE_OFFSETS[type_id]]:
            block = bytearray(rng.randbytes(type_size))
            for o in offsets:
                block[o:o + 2] = struct.pack("<H", value)
            blocks.append(bytes(block))
    for byte in (0x00, 0xFF, 0x80, 0x7F, 0x01, 0x55, 0xAA):
        blocks.append(bytes([byte]) * type_size)
    return b"".join(blocks)


def part_b(program, tmp, rng):
    """dequantize() against ggml's to_float, bit for bit."""
    both, ggml_only = [], []
    for type_id in ggml.type_ids():
        t = ggml.traits(type_id)
        if not t["to_float"]:
            continue
        size = t["type_size"]
        blocks = rng.randbytes(size * 200)
        if type_id in SCALE_OFFSETS:
            blocks += edge_blocks(type_id, size, rng)
        src, out = os.path.join(tmp, "blocks"), os.path.join(tmp, "floats")
        with open(src, "wb") as f:
            f.write(blocks)
        if not probe(program, "dequantize", type_id, src, out)["supported"]:
            ggml_only.append(t["name"])
            continue
        both.append(t["name"])
        with open(out, "rb") as f:
            ours = f.read()
        theirs = ggml.to_float(type_id, blocks)
        if not check(ours == theirs, "b: dequantize %s differs from ggml's to_float" % t["name"]):
            n = len(theirs) // 4
            a, b = struct.unpack("<%dI" % n, ours[:4 * n]), struct.unpack("<%dI" % n, theirs)
            bad = [i for i in range(n) if a[i] != b[i]]
            i = bad[0]
            block = i // t["block_size"]
            print("   %d of %d floats differ; first at %d (block %d %s): ours %08x, ggml %08x" %
                  (len(bad), n, i, block, blocks[block * size:(block + 1) * size].hex(), a[i], b[i]))
    print("b: dequantize() equals ggml's to_float bit for bit for %s" % ", ".join(both))
    print("b: ggml dequantizes, tensorfile does not: %s" % ", ".join(ggml_only))


def float_blocks(rng):
    """Rows of 32 floats: Gaussian at many magnitudes, zeros, one value, exact ties, f16 subnormal and overflowing
    scales, a negative or positive extreme first or last."""
    rows = []
    for scale in (1.0, 1e-3, 1e-6, 1e-9, 1e-30, 1e-40, 1e3, 1e6, 6e4, 1e20):
        for _ in range(8):
            rows.append([rng.gauss(0, scale) for _ in range(32)])
    rows.append([0.0] * 32)
    rows.append([-0.0] * 32)
    rows.append([1.0] * 32)
    rows.append([-1.0] * 32)
    rows.append([float(i - 16) for i in range(32)])  # q4_0's max is -16: exact ties at .5
    rows.append([float(i) / 2 for i in range(32)])
    rows.append([float(i) * 127 / 31 for i in range(32)])
    rows.append([(i % 3 - 1) * 0.5 for i in range(32)])
    rows.append([3e38 if i == 5 else 1.0 for i in range(32)])
    rows.append([-3e38 if i == 31 else 1.0 for i in range(32)])
    rows.append([1.0 if i == 0 else -0.9999 for i in range(32)])
    rows.append([-1.0 if i == 0 else 0.9999 for i in range(32)])
    rows.append([1e-45 * (i + 1) for i in range(32)])
    for _ in range(40):
        exponent = rng.randrange(-30, 30)
        rows.append([rng.choice([-1, 1]) * rng.randrange(0, 256) * 2.0 ** exponent for _ in range(32)])
    return struct.pack("<%df" % (32 * len(rows)), *[x for row in rows for x in row]), len(rows)


def part_c(program, tmp, rng):
    """quantize() to Q8_0 and Q4_0 against ggml_quantize_chunk."""
    floats, rows = float_blocks(rng)
    src, out = os.path.join(tmp, "floats"), os.path.join(tmp, "blocks")
    with open(src, "wb") as f:
        f.write(floats)
    for type_id in (8, 2):
        t = ggml.traits(type_id)
        check(probe(program, "quantize", type_id, src, out)["supported"], "c: tensorfile quantizes %s" % t["name"])
        with open(out, "rb") as f:
            ours = f.read()
        theirs = ggml.quantize(type_id, floats, 32)
        if not check(ours == theirs, "c: quantize %s differs from ggml_quantize_chunk" % t["name"]):
            size = t["type_size"]
            bad = [b for b in range(rows) if ours[b * size:(b + 1) * size] != theirs[b * size:(b + 1) * size]]
            b = bad[0]
            print("   %d of %d blocks differ; first %d: floats %s\n   ours %s\n   ggml %s" %
                  (len(bad), rows, b, struct.unpack("<32f", floats[b * 128:(b + 1) * 128]),
                   ours[b * size:(b + 1) * size].hex(), theirs[b * size:(b + 1) * size].hex()))
        else:
            print("c: quantize %s equals ggml_quantize_chunk on %d blocks" % (t["name"], rows))


def part_d(program, tmp):
    """Files save_gguf writes, read by ggml. Returns what the probe wrote."""
    written = probe(program, "save", tmp)
    for given in written["files"]:
        label = os.path.basename(given["path"])
        back = ggml.read_gguf(given["path"])
        if not check(back is not None, "d/%s: gguf_init_from_file refuses it" % label):
            continue
        alignment = given["alignment"]
        kvs = given["metadata"]
        if alignment != 32:
            kvs = kvs + [["general.alignment", "uint32", alignment]]
        check(back["version"] == 3, "d/%s: version %d" % (label, back["version"]))
        check(back["alignment"] == alignment, "d/%s: ggml's alignment %d" % (label, back["alignment"]))
        check(back["data_offset"] % alignment == 0, "d/%s: data offset %d" % (label, back["data_offset"]))
        check(back["kvs"] == kvs, "d/%s: metadata as ggml reads it:\n  %s\n  %s" % (label, back["kvs"], kvs))
        entries = probe(program, "dump", given["path"])["entries"]
        check(len(back["tensors"]) == len(given["tensors"]), "d/%s: tensor count" % label)
        expected_offset = 0
        for (name, type_id, ne, offset, size, data), (want_name, plain_type, shape, want_bytes), entry in zip(
                back["tensors"], given["tensors"], entries):
            want_bytes = bytes.fromhex(want_bytes)
            want_type = plain_type
            # .gguf.quantize: float32 tensors of 2+ dims whose rows are whole blocks of 32.
            if given["quantize"] and plain_type == 0 and len(shape) >= 2 and shape[-1] % 32 == 0:
                want_type = {"q8_0": 8, "q4_0": 2}[given["quantize"]]
                want_bytes = ggml.quantize(want_type, want_bytes, shape[-1])
            want_ne = list(reversed(shape)) + [1] * (4 - len(shape))
            check(name == want_name, "d/%s: tensor %s, expected %s" % (label, name, want_name))
            check(type_id == want_type, "d/%s: %s is ggml type %d, expected %d" % (label, name, type_id, want_type))
            check(ne == want_ne, "d/%s: %s ne %s, expected %s" % (label, name, ne, want_ne))
            check(offset == expected_offset and offset % alignment == 0,
                  "d/%s: %s at %d, expected %d" % (label, name, offset, expected_offset))
            check(size == len(want_bytes), "d/%s: %s size %d" % (label, name, size))
            check(data == want_bytes, "d/%s: %s data as ggml loads it" % (label, name))
            check(entry[4] == back["data_offset"] + offset, "d/%s: %s tensorfile's entry offset" % (label, name))
            expected_offset += (size + alignment - 1) // alignment * alignment
        print("d/%s: ggml reads %d keys and %d tensors as given (alignment %d%s)" %
              (label, len(kvs), len(back["tensors"]), alignment,
               ", " + given["quantize"] if given["quantize"] else ""))
    # A GGUF load written back at alignment 256: ggml reads the same as it read of the file loaded.
    source = ggml.read_gguf(os.path.join(tmp, "q8_0_64.gguf"))
    again = ggml.read_gguf(written["rewritten"])
    if check(again is not None, "d/rewritten: gguf_init_from_file refuses it"):
        want_kvs = [kv if kv[0] != "general.alignment" else ["general.alignment", "uint32", 256]
                    for kv in source["kvs"]]
        check(again["kvs"] == want_kvs, "d/rewritten: metadata\n  %s\n  %s" % (again["kvs"], want_kvs))
        check(again["alignment"] == 256, "d/rewritten: alignment %d" % again["alignment"])
        check([t[:3] + t[4:] for t in again["tensors"]] == [t[:3] + t[4:] for t in source["tensors"]],
              "d/rewritten: tensors (names, types, ne, sizes, data)")
        check(all(t[3] % 256 == 0 for t in again["tensors"]), "d/rewritten: offsets aligned to 256")
        print("d/rewritten_256.gguf: a GGUF load of q8_0_64.gguf written back reads the same in ggml")
    # Arrays of arrays: GGUF allows them (gguf-py writes them, tensorfile reads and writes them), ggml refuses them.
    nested = probe(program, "dump", written["nested"])["loads"]["load"]["metadata"]
    # The probe writes it as "array[array[int32]]", and a load names that type again (GgufKeyInfo::type_name).
    check(nested == [["a.nested", "array[array[int32]]", [[1, 2], [3]]]], "d/nested: tensorfile reads %s" % nested)
    check(ggml.read_gguf(written["nested"]) is None, "d/nested: ggml reads an array of arrays")
    print("d/nested.gguf: an array of arrays, which tensorfile reads back and ggml refuses (ggml has no nested arrays)")
    return written


def part_e(written, names):
    """A split model save_gguf writes, against llama.cpp's naming and ggml's reader."""
    split = written["split"]
    prefix, parts = split["prefix"], split["parts"]
    plain = {t[0]: t for t in written["files"][0]["tensors"]}  # plain_32.gguf: the same tensors, not quantized
    seen = []
    for k, path in enumerate(parts):
        label = "e/" + os.path.basename(path)
        check(names.path(prefix, k, len(parts)) == path,
              "%s: llama_split_path gives %s" % (label, names.path(prefix, k, len(parts))))
        check(names.prefix(path, k, len(parts)) == prefix, "%s: llama_split_prefix gives %s" %
              (label, names.prefix(path, k, len(parts))))
        back = ggml.read_gguf(path)
        if not check(back is not None, "%s: gguf_init_from_file refuses it" % label):
            continue
        kvs = {kv[0]: kv[1:] for kv in back["kvs"]}
        check(kvs.get("split.no") == ["uint16", k] and kvs.get("split.count") == ["uint16", len(parts)] and
              kvs.get("split.tensors.count") == ["int32", len(plain)], "%s: split keys %s" % (label, back["kvs"]))
        check(("general.architecture" in kvs) == (k == 0), "%s: the metadata only in the first part" % label)
        for name, type_id, ne, offset, size, data in back["tensors"]:
            want = plain.get(name)
            if check(want is not None, "%s: tensor %s was not saved" % (label, name)):
                check(type_id == want[1] and data == bytes.fromhex(want[3]),
                      "%s: %s type %d or data differ" % (label, name, type_id))
            seen.append(name)
    check(seen == list(plain), "e: the parts' tensors %s, saved %s" % (seen, list(plain)))
    print("e/split.gguf: %d parts named as llama_split_path names them, read by ggml with llama.cpp's split keys"
          % len(parts))


def main():
    global ggml
    parser = argparse.ArgumentParser()
    parser.add_argument("probe")
    parser.add_argument("--ggml-dir", required=True)
    args = parser.parse_args()
    library = ggml_peer.library_path(args.ggml_dir)
    if not os.path.isfile(library):
        required = os.environ.get("CI") == "true" or os.environ.get("TENSORFILE_REQUIRE_GGML") == "1"
        print("gguf.peer: %s not found: the real ggml is not installed (bash .ci/install-deps installs npm's %s@%s "
              "there); %s" % (library, ggml_peer.PACKAGE, ggml_peer.VERSION,
                              "a failure under CI=true / TENSORFILE_REQUIRE_GGML=1" if required
                              else "NOT RUN (skipped)"))
        return 1 if required else 77
    ggml = ggml_peer.Ggml(library)
    rng = random.Random(45)
    with tempfile.TemporaryDirectory(prefix="gguf_peer_") as tmp:
        part_a(args.probe, tmp, rng)
        part_b(args.probe, tmp, rng)
        part_c(args.probe, tmp, rng)
        part_e(part_d(args.probe, tmp), ggml_peer.LlamaSplitNames(library))
    if failures:
        print("gguf.peer: %d checks failed" % len(failures))
        return 1
    print("gguf.peer: tensorfile and ggml %s agree" % ggml_peer.VERSION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
