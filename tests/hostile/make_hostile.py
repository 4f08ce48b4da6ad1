#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the hostile corpus: crafted torch files (corpus/*.pt) and tensordict trees (tensordict/*/),
# each attacking one check of the loader. The error each must raise is in expected.tsv, which
# test_hostile.cpp reads; this script only writes inputs. Symlink cases are made by the test itself
# (a committed symlink to /etc would be fragile). Deterministic: rerunning gives the same bytes.
#   python3 tests/hostile/make_hostile.py
import os, shutil, struct, zlib

here = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(here, "corpus")
TREES = os.path.join(here, "tensordict")


class P:
    """A pickle writer in the style of tests/torch/torch_file_builder.hpp."""
    def __init__(self): self.b = bytearray()
    def op(self, c): self.b += bytes([c]) if isinstance(c, int) else c.encode("latin1"); return self
    def raw(self, data): self.b += data; return self
    def proto(self, v=2): return self.op(0x80).raw(bytes([v]))
    def glob(self, m, n): return self.op("c").raw(f"{m}\n{n}\n".encode())
    def mark(self): return self.op("(")
    def tup(self): return self.op("t")
    def stop(self): return self.op(".")
    def none(self): return self.op("N")
    def i32(self, v): return self.op("J").raw(struct.pack("<i", v))
    def i64(self, v):  # LONG1 with 8 bytes
        return self.op(0x8a).raw(bytes([8]) + struct.pack("<q", v))
    def integer(self, v): return self.i32(v) if -2**31 <= v < 2**31 else self.i64(v)
    def s(self, text): d = text.encode(); return self.op("X").raw(struct.pack("<I", len(d)) + d)
    def ints(self, vs):
        self.mark()
        for v in vs: self.integer(v)
        return self.tup()
    def storage(self, typ, key, numel, loc="cpu"):
        return self.mark().s("storage").glob("torch", typ).s(key).s(loc).integer(numel).tup().op("Q")
    def tensor(self, typ, key, numel, offset, size, stride):
        self.glob("torch._utils", "_rebuild_tensor_v2").mark()
        self.storage(typ, key, numel).integer(offset).ints(size).ints(stride).op(0x89)
        return self.glob("collections", "OrderedDict").op(")").op("R").tup().op("R")
    def bytes_(self): return bytes(self.b)


def u16(v): return struct.pack("<H", v)
def u32(v): return struct.pack("<I", v)
def u64(v): return struct.pack("<Q", v)


def zip_(records, prefix="archive", entry_count=None, central_hook=None, eocd_hook=None, method=None):
    """Stored zip like torch_zip(); records: list of (name, data) or (name, data, dict of overrides)."""
    out, central = bytearray(), bytearray()
    for rec in records:
        name, data = rec[0], rec[1]
        o = rec[2] if len(rec) > 2 else {}
        full = o.get("full") or f"{prefix}/{name}".encode()
        m = o.get("method", 0)
        payload = o.get("payload", data)
        crc = o.get("crc", zlib.crc32(data))
        size = o.get("size", len(data))
        csize = o.get("csize", len(payload))
        offset = o.get("offset", len(out))
        if "offset" not in o:
            out += u32(0x04034b50) + u16(20) + u16(0) + u16(m) + u16(0) + u16(0) + u32(crc) + u32(csize) + u32(size)
            out += u16(len(full)) + u16(len(o.get("local_extra", b""))) + (o.get("local_name") or full)
            out += o.get("local_extra", b"") + payload
        extra = o.get("extra", b"")
        central += u32(0x02014b50) + u16(20) + u16(20) + u16(0) + u16(m) + u16(0) + u16(0) + u32(crc)
        central += u32(o.get("central_csize", csize)) + u32(o.get("central_size", size)) + u16(len(full))
        central += u16(len(extra)) + u16(0) + u16(0) + u16(0) + u32(0) + u32(o.get("central_offset", offset))
        central += full + extra
    cd_offset = len(out)
    out += central
    n = len(records) if entry_count is None else entry_count
    eocd = u32(0x06054b50) + u16(0) + u16(0) + u16(n) + u16(n) + u32(len(central)) + u32(cd_offset) + u16(0)
    if eocd_hook: eocd = eocd_hook(eocd, bytes(out), cd_offset, len(central))
    out += eocd
    return bytes(out)


SIX = struct.pack("<6f", 0, 1, 2, 3, 4, 5)


def torch_file(pickle, record=SIX, extra=()):
    return zip_([("data.pkl", pickle), ("data/0", record), ("version", b"3\n"), *extra])


def one_tensor(numel=6, offset=0, size=(6,), stride=(1,), typ="FloatStorage"):
    return P().proto().tensor(typ, "0", numel, offset, list(size), list(stride)).stop().bytes_()


def plain(pickle):  # a zip holding only data.pkl and version
    return zip_([("data.pkl", pickle), ("version", b"3\n")])


cases = {}

# --- tensor geometry -------------------------------------------------------------------------
cases["numel_larger_than_record"] = torch_file(one_tensor(numel=1000, size=(1000,)))
cases["numel_smaller_than_record"] = torch_file(one_tensor(numel=2, size=(2,)))
cases["stride_leaves_storage"] = torch_file(one_tensor(size=(3, 2), stride=(500, 1)))
cases["offset_leaves_storage"] = torch_file(one_tensor(offset=10, size=(1,)))
cases["view_end_leaves_storage"] = torch_file(one_tensor(offset=1, size=(6,)))
cases["negative_size"] = torch_file(one_tensor(size=(-1,)))
cases["negative_stride"] = torch_file(one_tensor(size=(6,), stride=(-1,)))
cases["negative_offset"] = torch_file(one_tensor(offset=-1, size=(1,)))
cases["negative_numel"] = torch_file(one_tensor(numel=-6, size=(1,)))
cases["numel_times_itemsize_overflow"] = torch_file(one_tensor(numel=2**62, size=(1,), typ="DoubleStorage"))
cases["size_product_overflow"] = torch_file(one_tensor(size=(2**40, 2**40), stride=(0, 0)))
cases["stride_times_size_overflow"] = torch_file(one_tensor(size=(2, 2), stride=(2**62, 1)))
cases["size_stride_rank_mismatch"] = torch_file(one_tensor(size=(2, 3), stride=(1,)))
cases["storage_record_missing"] = plain(one_tensor())
cases["storage_key_escapes"] = torch_file(P().proto().tensor("FloatStorage", "../../etc/passwd", 6, 0, [6], [1]).stop().bytes_())
cases["storage_unknown_type"] = torch_file(P().proto().tensor("EvilStorage", "0", 6, 0, [6], [1]).stop().bytes_())
cases["persid_not_a_tuple"] = torch_file(P().proto().s("storage").op("Q").stop().bytes_())

# --- declared lengths larger than the file ----------------------------------------------------
cases["binunicode_past_end"] = plain(P().proto().op("X").raw(u32(0x7FFFFFFF) + b"abc").bytes_())
cases["binunicode8_past_end"] = plain(P().proto(4).op(0x8d).raw(u64(2**60) + b"abc").bytes_())
cases["binbytes8_past_end"] = plain(P().proto(4).op(0x8e).raw(u64(2**63 - 1) + b"abc").bytes_())
cases["binbytes_past_end"] = plain(P().proto(3).op("B").raw(u32(0xFFFFFFFF) + b"abc").bytes_())
cases["short_binstring_past_end"] = plain(P().proto().op("U").raw(bytes([200]) + b"abc").bytes_())
cases["frame_past_end"] = plain(P().proto(4).op(0x95).raw(u64(2**40)).none().stop().bytes_())
cases["long4_huge"] = plain(P().proto().op(0x8b).raw(u32(0x7FFFFFFF) + b"\x01" * 16).bytes_())
cases["long1_past_end"] = plain(P().proto().op(0x8a).raw(bytes([100]) + b"\x01" * 4).bytes_())
cases["truncated_opcode_argument"] = plain(P().proto().op("J").raw(b"\x01\x02").bytes_())
cases["no_stop"] = plain(P().proto().none().bytes_())

# --- stack, mark and memo abuse -----------------------------------------------------------------
depth = P().proto()
for _ in range(5000): depth.op("]")
for _ in range(4999): depth.op("a")
cases["deep_nesting_lists"] = plain(depth.stop().bytes_())
tup = P().proto()
for _ in range(5000): tup.mark()
for _ in range(5000): tup.tup()
cases["deep_nesting_marks"] = plain(tup.stop().bytes_())
cases["memo_get_missing"] = plain(P().proto().op("h").raw(b"\x05").stop().bytes_())
cases["memo_long_get_missing"] = plain(P().proto().op("j").raw(u32(0xFFFFFFFF)).stop().bytes_())
cases["memo_put_empty_stack"] = plain(P().proto().op("q").raw(b"\x00").none().stop().bytes_())
cases["memoize_empty_stack"] = plain(P().proto(4).op(0x94).none().stop().bytes_())
cyc = P().proto().op("]").op("q").raw(b"\x00").op("h").raw(b"\x00").op("a").stop()  # l = []; l.append(l)
cases["memo_cycle_list_contains_itself"] = plain(cyc.bytes_())
cases["mark_left_open"] = plain(P().proto().mark().none().stop().bytes_())
cases["tuple_without_mark"] = plain(P().proto().none().tup().stop().bytes_())
cases["pop_mark_without_mark"] = plain(P().proto().none().op("1").stop().bytes_())
cases["append_empty_stack"] = plain(P().proto().op("a").stop().bytes_())
cases["setitem_on_list"] = plain(P().proto().op("]").none().none().op("s").stop().bytes_())
cases["append_on_tensor"] = torch_file(P().proto().tensor("FloatStorage", "0", 6, 0, [6], [1]).none().op("a").stop().bytes_())
cases["setitem_on_tensor"] = torch_file(P().proto().tensor("FloatStorage", "0", 6, 0, [6], [1]).s("k").none().op("s").stop().bytes_())
cases["stop_with_two_objects"] = plain(P().proto().none().none().stop().bytes_())
cases["stop_with_empty_stack"] = plain(P().proto().stop().bytes_())
cases["unhashable_dict_key"] = plain(P().proto().op("}").op("]").none().op("s").stop().bytes_())
cases["unknown_opcode"] = plain(P().proto().op(0xFF).stop().bytes_())
cases["global_os_system"] = plain(P().proto().glob("os", "system").s("echo pwned").op(0x85).op("R").stop().bytes_())
cases["reduce_on_non_global"] = plain(P().proto().none().op(")").op("R").stop().bytes_())

# --- the zip layer --------------------------------------------------------------------------------
pk = one_tensor()
cases["zip_not_a_zip"] = b"this is not a torch file at all\n" * 4
cases["zip_empty"] = b""
cases["zip_duplicate_names"] = zip_([("data.pkl", pk), ("data/0", SIX), ("data/0", SIX), ("version", b"3\n")])
cases["zip_overlapping_entries"] = zip_([("data.pkl", pk), ("data/0", SIX), ("version", b"3\n"),
                                         ("data/1", SIX, {"offset": 0})])
# data/1's local header and data lie inside data/0's data: two entries share bytes
inner_name = b"archive/data/1"
inner = u32(0x04034b50) + u16(20) + u16(0) + u16(0) + u16(0) + u16(0) + u32(zlib.crc32(SIX)) + u32(24) + u32(24)
inner += u16(len(inner_name)) + u16(0) + inner_name + SIX
_pre = zip_([("data.pkl", pk)])
_outer_at = _pre.find(b"PK\x01\x02")  # where data/0's local header starts in the final file
_inner_at = _outer_at + 30 + len(b"archive/data/0")
cases["zip_entry_inside_another"] = zip_([("data.pkl", pk), ("data/0", inner), ("version", b"3\n"),
                                          ("data/1", SIX, {"offset": _inner_at})])
cases["zip_entry_outside_prefix"] = zip_([("data.pkl", pk), ("data/0", SIX), ("version", b"3\n"),
                                          ("x", b"evil", {"full": b"other/evil"})])
cases["zip_entry_dotdot"] = zip_([("data.pkl", pk), ("data/0", SIX), ("version", b"3\n"),
                                  ("x", b"evil", {"full": b"archive/../../evil"})])
cases["zip_entry_absolute"] = zip_([("data.pkl", pk), ("data/0", SIX), ("version", b"3\n"),
                                    ("x", b"evil", {"full": b"/archive/evil"})])
cases["zip_local_name_differs"] = zip_([("data.pkl", pk), ("data/0", SIX, {"local_name": b"archive/data/9"}),
                                        ("version", b"3\n")])
cases["zip_entry_offset_past_end"] = zip_([("data.pkl", pk), ("data/0", SIX, {"central_offset": 0x7FFFFFF0}),
                                           ("version", b"3\n")])
cases["zip_stored_size_past_end"] = zip_([("data.pkl", pk), ("data/0", SIX, {"central_csize": 0x7FFFFFF0,
                                          "central_size": 0x7FFFFFF0}), ("version", b"3\n")])
cases["zip_stored_sizes_disagree"] = zip_([("data.pkl", pk), ("data/0", SIX, {"central_size": 4}), ("version", b"3\n")])
cases["zip_entry_count_lies"] = zip_([("data.pkl", pk), ("data/0", SIX), ("version", b"3\n")], entry_count=65535)
cases["zip_directory_offset_lies"] = zip_([("data.pkl", pk), ("data/0", SIX), ("version", b"3\n")],
                                          eocd_hook=lambda e, o, cd, n: e[:16] + u32(0x7FFFFFF0) + e[20:])
cases["zip_encrypted_entry"] = zip_([("data.pkl", pk), ("data/0", SIX), ("version", b"3\n")])
# set the encryption flag (bit 0) in the second central header
_b = bytearray(cases["zip_encrypted_entry"]); _c = _b.find(b"PK\x01\x02", _b.find(b"PK\x01\x02") + 4); _b[_c + 8] |= 1
cases["zip_encrypted_entry"] = bytes(_b)
cases["zip_unknown_method"] = zip_([("data.pkl", pk), ("data/0", SIX, {"method": 12}), ("version", b"3\n")])
cases["zip_bad_crc_verified"] = zip_([("data.pkl", pk), ("data/0", SIX, {"crc": 0x12345678}), ("version", b"3\n")])


def zip64_eocd(sizes_lie=None, locator_offset=None, count=None):
    def hook(eocd, body, cd, n):
        z64_off = len(body)
        cnt = 3 if count is None else count
        z64 = u32(0x06064b50) + u64(44) + u16(45) + u16(45) + u32(0) + u32(0) + u64(cnt) + u64(cnt)
        z64 += u64(n if sizes_lie is None else sizes_lie) + u64(cd)
        loc = u32(0x07064b50) + u32(0) + u64(z64_off if locator_offset is None else locator_offset) + u32(1)
        e = u32(0x06054b50) + u16(0) + u16(0) + u16(0xFFFF) + u16(0xFFFF) + u32(0xFFFFFFFF) + u32(0xFFFFFFFF) + u16(0)
        return z64 + loc + e
    return hook


recs = [("data.pkl", pk), ("data/0", SIX), ("version", b"3\n")]
cases["zip64_valid"] = zip_(recs, eocd_hook=zip64_eocd())  # a control: must load
cases["zip64_locator_past_end"] = zip_(recs, eocd_hook=zip64_eocd(locator_offset=2**40))
cases["zip64_directory_size_lies"] = zip_(recs, eocd_hook=zip64_eocd(sizes_lie=2**62))
cases["zip64_entry_count_lies"] = zip_(recs, eocd_hook=zip64_eocd(count=2**60))
extra64 = u16(1) + u16(16) + u64(2**62) + u64(2**62)  # zip64 extra: size, csize
cases["zip64_extra_sizes_lie"] = zip_([("data.pkl", pk), ("data/0", SIX, {"central_size": 0xFFFFFFFF,
                                       "central_csize": 0xFFFFFFFF, "extra": extra64}), ("version", b"3\n")])
cases["zip64_extra_truncated"] = zip_([("data.pkl", pk), ("data/0", SIX, {"central_size": 0xFFFFFFFF,
                                       "extra": u16(1) + u16(2) + b"\x00\x00"}), ("version", b"3\n")])

# --- deflate --------------------------------------------------------------------------------------
def deflate(data):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


bomb = deflate(b"\0" * (16 << 20))  # 16 MiB of zeros in ~16 KiB
cases["deflate_bomb_declared_small"] = zip_([("data.pkl", pk), ("data/0", SIX, {"method": 8, "payload": bomb}),
                                             ("version", b"3\n")])
cases["deflate_bomb_declared_huge"] = zip_([("data.pkl", pk), ("data/0", b"\0" * 24, {"method": 8, "payload": bomb,
                                            "size": 0xFFFFFFF0}), ("version", b"3\n")])
cases["deflate_truncated_stream"] = zip_([("data.pkl", pk), ("data/0", SIX, {"method": 8, "payload": deflate(SIX)[:3]}),
                                          ("version", b"3\n")])
cases["deflate_garbage_stream"] = zip_([("data.pkl", pk), ("data/0", SIX, {"method": 8, "payload": b"\xff" * 16}),
                                        ("version", b"3\n")])
cases["deflate_pickle_bomb"] = zip_([("data.pkl", pk, {"method": 8, "payload": bomb}), ("data/0", SIX), ("version", b"3\n")])

# --- tensordict trees -----------------------------------------------------------------------------
def meta(entries, shape=(2,)):
    import json
    d = dict(entries)
    d.update({"shape": list(shape), "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"})
    return json.dumps(d)


def leaf(shape=(2,), dtype="torch.float32"):
    return {"device": "cpu", "shape": list(shape), "dtype": dtype, "is_nested": False}


trees = {
    "td_key_dotdot": {"meta.json": meta({"..": leaf()}), "%2E%2E.memmap": b"\0" * 8},
    "td_key_dotdot_slash": {"meta.json": meta({"../outside": leaf()})},
    "td_key_absolute": {"meta.json": meta({"/etc/passwd": leaf()})},
    "td_subdir_dotdot": {"meta.json": meta({"..": {"type": "TensorDict"}})},
    "td_file_too_short": {"meta.json": meta({"a": leaf((2, 1000))}), "a.memmap": b"\0" * 8},
    "td_negative_shape": {"meta.json": meta({"a": leaf((-2,))}), "a.memmap": b"\0" * 8},
    "td_shape_overflow": {"meta.json": meta({"a": leaf((2, 2**62))}), "a.memmap": b"\0" * 8},
    "td_huge_shape_number": {"meta.json": meta({"a": leaf((2, 10**30))}), "a.memmap": b"\0" * 8},
    "td_unknown_dtype": {"meta.json": meta({"a": leaf((2,), "torch.evil")}), "a.memmap": b"\0" * 8},
    "td_deep_json": {"meta.json": '{"a": ' + "[" * 2000 + "]" * 2000 + "}"},
    "td_deep_json_objects": {"meta.json": '{"a": ' + '{"b": ' * 2000 + "1" + "}" * 2000 + "}"},
    "td_bad_json": {"meta.json": '{"a": {"device": "cpu", "shape": [2'},
    "td_no_meta": {"a.memmap": b"\0" * 8},
    "td_undeclared_subdir": {"meta.json": meta({}), "sub/meta.json": meta({})},
}

if __name__ == "__main__":
    shutil.rmtree(CORPUS, ignore_errors=True)
    shutil.rmtree(TREES, ignore_errors=True)
    os.makedirs(CORPUS)
    for name, blob in sorted(cases.items()):
        with open(os.path.join(CORPUS, name + ".pt"), "wb") as f:
            f.write(blob)
    for name, files in sorted(trees.items()):
        for rel, blob in files.items():
            path = os.path.join(TREES, name, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(blob.encode() if isinstance(blob, str) else blob)
    print(f"{len(cases)} torch files, {len(trees)} tensordict trees")
