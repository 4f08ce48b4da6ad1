# SPDX-License-Identifier: MIT
"""ctypes bindings to the real ggml: libggml-base.so of npm's @node-llama-cpp/linux-x64 (pinned in .ci/install-deps),
a prebuilt llama.cpp. Its GGUF API writes and reads files (gguf_init_empty, gguf_set_*, gguf_add_tensor,
gguf_write_to_file, gguf_init_from_file, gguf_get_*), its type traits give the reference dequantize (to_float), and
ggml_quantize_chunk the reference quantize. Used by check_with_ggml.py (gguf.peer) and make_ggml_fixture.py.

Metadata values travel in one canonical form, the one ggml_peer_probe prints: ints as ints, float32 and float64 as
the integers of their bits, bools as bools, strings as the hex of their bytes, arrays as lists; types by name
("uint32", "array[string]")."""
import ctypes
import os
import struct

PACKAGE = "@node-llama-cpp/linux-x64"
VERSION = "3.22.1"

# GGUF value types, by id (gguf.h's enum gguf_type).
VALUE_TYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
               "uint64", "int64", "float64"]
SCALAR = {"uint8": ("B", ctypes.c_uint8), "int8": ("b", ctypes.c_int8), "uint16": ("H", ctypes.c_uint16),
          "int16": ("h", ctypes.c_int16), "uint32": ("I", ctypes.c_uint32), "int32": ("i", ctypes.c_int32),
          "float32": ("f", ctypes.c_float), "bool": ("?", ctypes.c_bool), "uint64": ("Q", ctypes.c_uint64),
          "int64": ("q", ctypes.c_int64), "float64": ("d", ctypes.c_double)}
GETTER = {"uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16", "uint32": "u32", "int32": "i32",
          "float32": "f32", "bool": "bool", "uint64": "u64", "int64": "i64", "float64": "f64"}

GGML_MAX_DIMS = 4


def library_path(ggml_dir):
    """Where .ci/install-deps puts libggml-base.so under `ggml_dir` (a folder holding node_modules)."""
    return os.path.join(ggml_dir, "node_modules", PACKAGE, "bins", "linux-x64", "libggml-base.so")


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def canonical_scalar(type_name, raw):
    """A value as ctypes read it, in the canonical form."""
    if type_name == "float32":
        return f32_bits(raw)
    if type_name == "float64":
        return f64_bits(raw)
    if type_name == "bool":
        return bool(raw)
    return int(raw)


def from_canonical(type_name, value):
    """The Python value ctypes takes for a canonical value."""
    if type_name == "float32":
        return struct.unpack("<f", struct.pack("<I", value))[0]
    if type_name == "float64":
        return struct.unpack("<d", struct.pack("<Q", value))[0]
    return value


class TypeTraits(ctypes.Structure):  # ggml.h's struct ggml_type_traits
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


class InitParams(ctypes.Structure):  # struct ggml_init_params
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class GgufInitParams(ctypes.Structure):  # struct gguf_init_params
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.POINTER(ctypes.c_void_p))]


TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64)


class Ggml:
    def __init__(self, path):
        lib = ctypes.CDLL(path)
        self.lib = lib
        p, i64, sz, cs = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t, ctypes.c_char_p
        sig = {
            "ggml_get_type_traits": (ctypes.POINTER(TypeTraits), [ctypes.c_int]),
            "ggml_quantize_chunk": (sz, [ctypes.c_int, p, p, i64, i64, i64, p]),
            "ggml_quantize_requires_imatrix": (ctypes.c_bool, [ctypes.c_int]),
            "ggml_init": (p, [InitParams]),
            "ggml_free": (None, [p]),
            "ggml_new_tensor": (p, [p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(i64)]),
            "ggml_set_name": (p, [p, cs]),
            "ggml_get_data": (p, [p]),
            "ggml_nbytes": (sz, [p]),
            "ggml_get_tensor": (p, [p, cs]),
            "gguf_init_empty": (p, []),
            "gguf_init_from_file": (p, [cs, GgufInitParams]),
            "gguf_free": (None, [p]),
            "gguf_get_version": (ctypes.c_uint32, [p]),
            "gguf_get_alignment": (sz, [p]),
            "gguf_get_data_offset": (sz, [p]),
            "gguf_get_n_kv": (i64, [p]),
            "gguf_get_key": (cs, [p, i64]),
            "gguf_get_kv_type": (ctypes.c_int, [p, i64]),
            "gguf_get_arr_type": (ctypes.c_int, [p, i64]),
            "gguf_get_arr_n": (sz, [p, i64]),
            "gguf_get_arr_data": (p, [p, i64]),
            "gguf_get_arr_str": (p, [p, i64, sz]),
            "gguf_get_val_str": (p, [p, i64]),
            "gguf_get_n_tensors": (i64, [p]),
            "gguf_get_tensor_offset": (sz, [p, i64]),
            "gguf_get_tensor_name": (cs, [p, i64]),
            "gguf_get_tensor_ne": (ctypes.POINTER(i64), [p, i64]),
            "gguf_get_tensor_type": (ctypes.c_int, [p, i64]),
            "gguf_get_tensor_size": (sz, [p, i64]),
            "gguf_set_val_str": (None, [p, cs, cs]),
            "gguf_set_arr_data": (None, [p, cs, ctypes.c_int, p, sz]),
            "gguf_set_arr_str": (None, [p, cs, ctypes.POINTER(cs), sz]),
            "gguf_add_tensor": (None, [p, p]),
            "gguf_write_to_file": (ctypes.c_bool, [p, cs, ctypes.c_bool]),
        }
        for name, ctype in SCALAR.items():
            sig["gguf_get_val_" + GETTER[name]] = (ctype[1], [p, i64])
            sig["gguf_set_val_" + GETTER[name]] = (None, [p, cs, ctype[1]])
        for name, (restype, argtypes) in sig.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes

    # Type traits, dequantize and quantize.

    def traits(self, type_id):
        t = self.lib.ggml_get_type_traits(type_id).contents
        return {"name": t.type_name.decode(), "block_size": t.blck_size, "type_size": t.type_size,
                "quantized": t.is_quantized, "to_float": t.to_float, "from_float_ref": t.from_float_ref}

    def type_ids(self):
        """Every type id ggml defines now (not the removed ones, whose block size is 0)."""
        return [i for i in range(64) if i < 43 and self.traits(i)["block_size"] > 0]

    def to_float(self, type_id, blocks):
        """ggml's reference dequantize (the type traits' to_float) of whole blocks: float32 bytes."""
        t = self.traits(type_id)
        n = len(blocks) // t["type_size"] * t["block_size"]
        out = (ctypes.c_float * n)()
        src = ctypes.create_string_buffer(bytes(blocks), len(blocks))
        TO_FLOAT(t["to_float"])(ctypes.cast(src, ctypes.c_void_p), out, n)
        return bytes(out)

    def quantize(self, type_id, floats, n_per_row):
        """ggml_quantize_chunk over rows of `n_per_row` float32 values (no importance matrix): the blocks."""
        t = self.traits(type_id)
        n = len(floats) // 4
        src = ctypes.create_string_buffer(bytes(floats), len(floats))
        dst = ctypes.create_string_buffer(n // t["block_size"] * t["type_size"])
        written = self.lib.ggml_quantize_chunk(type_id, src, dst, 0, n // n_per_row, n_per_row, None)
        return dst.raw[:written]

    # GGUF files.

    def write_gguf(self, path, kvs, tensors):
        """Writes `path` with ggml's own writer: kvs [(key, type name, canonical value)] in order (general.alignment
        among them sets the alignment), tensors [(name, type id, ne (ggml order), bytes)]."""
        ctx = self.lib.gguf_init_empty()
        for key, type_name, value in kvs:
            k = key.encode()
            if type_name == "string":
                self.lib.gguf_set_val_str(ctx, k, bytes.fromhex(value))
            elif type_name.startswith("array["):
                inner = type_name[6:-1]
                if inner == "string":
                    items = (ctypes.c_char_p * max(1, len(value)))(*[bytes.fromhex(v) for v in value])
                    self.lib.gguf_set_arr_str(ctx, k, items, len(value))
                else:
                    fmt = SCALAR[inner][0]
                    data = struct.pack("<%d%s" % (len(value), fmt), *[from_canonical(inner, v) for v in value])
                    buf = ctypes.create_string_buffer(data, max(1, len(data)))
                    self.lib.gguf_set_arr_data(ctx, k, VALUE_TYPES.index(inner), buf, len(value))
            else:
                getattr(self.lib, "gguf_set_val_" + GETTER[type_name])(ctx, k, from_canonical(type_name, value))
        size = sum(len(data) + 1024 for _, _, _, data in tensors) + 1024 * 1024
        gctx = self.lib.ggml_init(InitParams(size, None, False))
        for name, type_id, ne, data in tensors:
            ne_array = (ctypes.c_int64 * len(ne))(*ne)
            t = self.lib.ggml_new_tensor(gctx, type_id, len(ne), ne_array)
            self.lib.ggml_set_name(t, name.encode())
            if self.lib.ggml_nbytes(t) != len(data):
                raise ValueError("%s: ggml holds %d bytes, given %d" % (name, self.lib.ggml_nbytes(t), len(data)))
            ctypes.memmove(self.lib.ggml_get_data(t), bytes(data), len(data))
            self.lib.gguf_add_tensor(ctx, t)
        ok = self.lib.gguf_write_to_file(ctx, os.fsencode(path), False)
        self.lib.ggml_free(gctx)
        self.lib.gguf_free(ctx)
        if not ok:
            raise RuntimeError("gguf_write_to_file failed for " + path)

    def read_gguf(self, path):
        """gguf_init_from_file with the data loaded: version, alignment, data offset, kvs in the canonical form,
        tensors (name, type id, ne (4 values), offset in the data section, size, the bytes ggml loaded). None when
        ggml refuses the file."""
        gctx = ctypes.c_void_p()
        ctx = self.lib.gguf_init_from_file(os.fsencode(path), GgufInitParams(False, ctypes.pointer(gctx)))
        if not ctx:
            return None
        out = {"version": self.lib.gguf_get_version(ctx), "alignment": self.lib.gguf_get_alignment(ctx),
               "data_offset": self.lib.gguf_get_data_offset(ctx), "kvs": [], "tensors": []}
        for i in range(self.lib.gguf_get_n_kv(ctx)):
            key = self.lib.gguf_get_key(ctx, i).decode()
            type_name = VALUE_TYPES[self.lib.gguf_get_kv_type(ctx, i)]
            if type_name == "array":
                inner = VALUE_TYPES[self.lib.gguf_get_arr_type(ctx, i)]
                n = self.lib.gguf_get_arr_n(ctx, i)
                if inner == "string":
                    value = [ctypes.string_at(self.lib.gguf_get_arr_str(ctx, i, j)).hex() for j in range(n)]
                else:
                    fmt = SCALAR[inner][0]
                    raw = ctypes.string_at(self.lib.gguf_get_arr_data(ctx, i), n * struct.calcsize(fmt)) if n else b""
                    value = [canonical_scalar(inner, v) for v in struct.unpack("<%d%s" % (n, fmt), raw)]
                type_name = "array[%s]" % inner
            elif type_name == "string":
                value = ctypes.string_at(self.lib.gguf_get_val_str(ctx, i)).hex()
            else:
                value = canonical_scalar(type_name, getattr(self.lib, "gguf_get_val_" + GETTER[type_name])(ctx, i))
            out["kvs"].append([key, type_name, value])
        for i in range(self.lib.gguf_get_n_tensors(ctx)):
            name = self.lib.gguf_get_tensor_name(ctx, i)
            ne = self.lib.gguf_get_tensor_ne(ctx, i)
            size = self.lib.gguf_get_tensor_size(ctx, i)
            t = self.lib.ggml_get_tensor(gctx, name)
            data = ctypes.string_at(self.lib.ggml_get_data(t), self.lib.ggml_nbytes(t))
            out["tensors"].append([name.decode(), self.lib.gguf_get_tensor_type(ctx, i),
                                   [ne[d] for d in range(GGML_MAX_DIMS)], self.lib.gguf_get_tensor_offset(ctx, i),
                                   size, data])
        self.lib.ggml_free(gctx)
        self.lib.gguf_free(ctx)
        return out


class LlamaSplitNames:
    """llama.cpp's split file names, from its libllama (beside libggml-base.so in the same package):
    llama_split_path(prefix, no, count), no from 0, and llama_split_prefix(path, no, count), its inverse."""

    def __init__(self, ggml_library):
        # Its RUNPATH ($ORIGIN) finds the libggml libraries it links.
        lib = ctypes.CDLL(os.path.join(os.path.dirname(ggml_library), "libllama.v0.5.0.so"))
        for function in (lib.llama_split_path, lib.llama_split_prefix):
            function.restype = ctypes.c_int
            function.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        self.lib = lib

    def path(self, prefix, no, count):
        out = ctypes.create_string_buffer(4096)
        self.lib.llama_split_path(out, len(out), prefix.encode(), no, count)
        return out.value.decode()

    def prefix(self, path, no, count):
        """The prefix of `path`, or None when llama.cpp does not read it as part `no` of `count`."""
        out = ctypes.create_string_buffer(4096)
        n = self.lib.llama_split_prefix(out, len(out), path.encode(), no, count)
        return out.value.decode() if n > 0 else None


def n_dims(ne):
    """The dims ggml writes for extents `ne`: trailing 1s dropped, at least one (ggml_n_dims)."""
    n = len(ne)
    while n > 1 and ne[n - 1] == 1:
        n -= 1
    return n
