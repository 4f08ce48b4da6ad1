#!/usr/bin/python3
"""Write tensorfile's generated torch.save corpus (tests/data/torch_gen/) with real torch.

    /usr/bin/python3 tests/interop/make_torch_fixtures.py --out DIR

Each fixture is named by what it covers; all values are fixed (no random numbers), so
a rerun with the same torch gives the same bytes. The committed copy was written by
torch 1.13 (Debian python3-torch). CI reruns this into a temporary directory and
checks tensorfile against torch.load there (via torch_reference.py), so the files need
not be byte-identical with other torch versions.
"""
import argparse
import collections
import io
import math
import os
import pickle
import pickletools
import zipfile

import torch

FIXTURES = []
INF, NAN = math.inf, math.nan


def fixture(fn):
    FIXTURES.append(fn)
    return fn


def t(values, dtype):
    return torch.tensor(values, dtype=dtype)


# -- dtypes ---------------------------------------------------------------------------

SPECIAL = {
    torch.bool: [False, True, True, False, True],
    torch.uint8: [0, 1, 127, 128, 255],
    torch.int8: [-128, -1, 0, 1, 127],
    torch.int16: [-2**15, -1, 0, 1, 2**15 - 1],
    torch.int32: [-2**31, -1, 0, 1, 2**31 - 1],
    torch.int64: [-2**63, -1, 0, 1, 2**63 - 1],
    torch.float16: [0.0, -0.0, 1.0, -2.5, 65504.0, 2.0**-24, 0.1, INF, -INF, NAN],
    torch.bfloat16: [0.0, -0.0, 1.0, -2.5, 3.3895313892515355e38, 2.0**-133, 0.1, INF, -INF, NAN],
    torch.float32: [0.0, -0.0, 1.0, -2.5, 3.4028234663852886e38, 2.0**-149, 0.1, INF, -INF, NAN],
    torch.float64: [0.0, -0.0, 1.0, -2.5, 1.7976931348623157e308, 5e-324, 0.1, INF, -INF, NAN],
    torch.complex64: [0j, 1 + 2j, -1.5 - 0.25j, complex(INF, -0.0), complex(NAN, 1.0)],
    torch.complex128: [0j, 1 + 2j, -1.5 - 0.25j, complex(INF, -0.0), complex(NAN, 1.0)],
}


for _dtype in SPECIAL:
    def _write(out, dtype=_dtype):
        """'special': edge values of the dtype; 'grid': a 2x3 arange."""
        grid = torch.arange(6).reshape(2, 3)
        if dtype == torch.bool:
            grid = grid % 2 == 1
        else:
            grid = grid.to(dtype) * (1 - 1j if dtype.is_complex else 1)
        torch.save({"special": t(SPECIAL[dtype], dtype), "grid": grid},
                   out(f"dtype_{str(dtype).removeprefix('torch.')}.pt"))
    fixture(_write)


@fixture
def quantized_qdtypes(out):
    values = torch.tensor([0.0, 0.5, 1.0, 1.5])
    torch.save({str(d).removeprefix("torch."): torch.quantize_per_tensor(values, 0.5, 1, d)
                for d in (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2)},
               out("quantized_qdtypes.pt"))


# -- shapes, views, strides -----------------------------------------------------------

@fixture
def zero_dim_and_empty(out):
    b = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    c = torch.arange(4, dtype=torch.int16)
    torch.save({
        "f32_0d": torch.tensor(3.5), "i64_0d": torch.tensor(-7), "bool_0d": torch.tensor(True),
        "c128_0d": torch.tensor(1 - 2j, dtype=torch.complex128),
        "bf16_0d": torch.tensor(0.5, dtype=torch.bfloat16),
        "empty_f32": torch.empty(0), "empty_2x0_i32": torch.empty(2, 0, dtype=torch.int32),
        "empty_0x3x4_f64": torch.zeros(0, 3, 4, dtype=torch.float64),
        "scalar_view_offset6": b[1, 2],           # 0-d view into a 12-element storage
        "empty_slice_offset2": c[2:2],            # 0 elements, offset 2, storage of 4
    }, out("zero_dim_and_empty.pt"))


@fixture
def views_shared_storage(out):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    other = torch.arange(5, dtype=torch.int64)
    torch.save({
        "row2": base[2],                           # a view met before its base
        "base": base, "col3": base[:, 3], "block": base[1:3, 2:5], "t": base.t(),
        "flat_tail": base.view(-1)[17:], "diag": base.diagonal(),
        "expanded_row": base[0].expand(3, 6), "again": base, "reshaped": base.view(2, 12),
        "other_tail": other[1:],                   # base never saved; storage still whole
    }, out("views_shared_storage.pt"))


@fixture
def strides_noncontiguous(out):
    x = torch.arange(24, dtype=torch.int32).reshape(2, 3, 4)
    torch.save({
        "permuted": x.permute(2, 0, 1), "step2": x[:, :, ::2],
        "channels_last": torch.arange(24, dtype=torch.float32).reshape(2, 3, 2, 2)
                              .contiguous(memory_format=torch.channels_last),
        "stride0": torch.tensor([1.0, 2.0]).expand(3, 2),
        "scalar_expanded": torch.tensor(7, dtype=torch.int8).expand(2, 2),
        "overlapping": torch.arange(6.0).as_strided((3, 3), (1, 1)),
    }, out("strides_noncontiguous.pt"))


@fixture
def root_transposed_view(out):
    x = torch.arange(12, dtype=torch.float16).reshape(3, 4)
    torch.save(x[1:, 1:].t(), out("root_transposed_view.pt"))  # offset 5, stride (1, 4)


# -- state dicts and optimizers -------------------------------------------------------

def fixed_linear(n_in, n_out):
    lin = torch.nn.Linear(n_in, n_out)
    with torch.no_grad():
        weight = torch.arange(n_in * n_out, dtype=torch.float32).reshape(n_out, n_in)
        lin.weight.copy_(weight / 8 - 0.5)
        lin.bias.copy_(torch.arange(n_out, dtype=torch.float32) / 4 - 0.25)
    return lin


@fixture
def state_dict_linear_bn(out):
    model = torch.nn.Sequential(fixed_linear(4, 3), torch.nn.BatchNorm1d(3))
    model(torch.arange(16, dtype=torch.float32).reshape(4, 4) / 4)  # updates running stats
    torch.save(model.state_dict(), out("state_dict_linear_bn.pt"))


def trained_optimizer(make):
    model = fixed_linear(3, 2)
    opt = make(model.parameters())
    for _ in range(2):
        opt.zero_grad()
        model(torch.tensor([[1.0, 2.0, -1.0]])).sum().backward()
        opt.step()
    return opt.state_dict()


@fixture
def optimizer_sgd_momentum(out):
    sd = trained_optimizer(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                     weight_decay=0.01))
    torch.save(sd, out("optimizer_sgd_momentum.pt"))


@fixture
def optimizer_adam_amsgrad(out):
    sd = trained_optimizer(lambda p: torch.optim.Adam(p, lr=1e-3, betas=(0.9, 0.999),
                                                      amsgrad=True))
    torch.save(sd, out("optimizer_adam_amsgrad.pt"))


@fixture
def state_dict_1100_entries(out):
    # 1100 storages: SETITEMS batches of 1000, LONG_BINPUT, data/1000.. records
    sd = collections.OrderedDict((f"blocks.{i}.scale", torch.tensor([i], dtype=torch.int32))
                                 for i in range(1100))
    torch.save(sd, out("state_dict_1100_entries.pt"))


@fixture
def many_storages_12(out):
    # records data/0, data/1, data/10, data/11, data/2 ... (string order)
    torch.save([torch.full((i + 1,), i, dtype=torch.int16) for i in range(12)],
               out("many_storages_12.pt"))


# -- python values --------------------------------------------------------------------

@fixture
def nested_containers(out):
    shared = [1, "two"]
    torch.save({
        "ints": [0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31, 2**31, 2**40, -2**40,
                 2**63 - 1, -2**63, 2**64, 2**70, -2**100],
        "floats": [0.0, -0.0, 1.5, -2.25, 0.1, 1e-300, 5e-324, 1.7976931348623157e308,
                   INF, -INF, NAN],
        "complex": [0j, 1 + 2j, complex(-1.5, 0.25), complex(INF, -0.0)],
        "strs": ["", "ascii", "héllo wörld", "日本語", "emoji \U0001F642", "x" * 300],
        "bytes": [b"", b"\x00\xff", bytes(range(256)) * 2],
        "bools": [True, False], "none": None,
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        "set_ints": {3, 1, 2, 100, -5}, "set_mixed": {2.5, -1, 7, (1, 2)},
        "frozenset_tuples": frozenset({(1, 2), (0, 5)}),
        "int_keys": {0: "zero", 1: "one", -1: "minus one", 10: "ten", 2: "two"},
        "key/with~slash": "escaped in paths",
        "nested": {"a": [{"b": [1, {"c": None}]}], "empty_dict": {}, "empty_list": []},
        "shared_list": shared, "shared_list_again": shared,
        "tensor_in_list": [torch.tensor([1, 2], dtype=torch.int64), "after"],
    }, out("nested_containers.pt"))


@fixture
def parameter_requires_grad(out):
    p = torch.nn.Parameter(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    torch.save({
        "param": p,
        "param_frozen": torch.nn.Parameter(torch.tensor([5.0, 6.0]), requires_grad=False),
        "leaf_requires_grad": torch.tensor([7.0, 8.0], requires_grad=True),
        "param_data_row1": p.data[1],               # plain tensor sharing the Parameter's storage
        "plain": torch.tensor([9.0]),
    }, out("parameter_requires_grad.pt"))


@fixture
def storage_bare(out):
    torch.save(torch.tensor([1.5, -2.0, 3.25, 0.0, 1e300], dtype=torch.float64).storage(),
               out("storage_bare.pt"))


@fixture
def storages_with_views(out):
    base = torch.arange(6, dtype=torch.int16)
    untyped = torch.tensor([1, 2, 3, 250], dtype=torch.uint8).storage()._storage
    torch.save({"typed": base.storage(), "view_after_storage": base[2:],
                "untyped": untyped},                # GLOBAL torch.storage UntypedStorage
               out("storages_with_views.pt"))


@fixture
def torch_objects(out):
    torch.save({
        "devices": [torch.device("cpu"), torch.device("cuda", 0), torch.device("cuda"),
                    torch.device("cuda", 1), torch.device("meta")],
        "dtypes": [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                   torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex32,
                   torch.complex64, torch.complex128, torch.qint8, torch.quint8, torch.qint32,
                   torch.quint4x2],
        "size": torch.Size([2, 3, 4]), "size_empty": torch.Size([]),
        "layout": torch.strided,  # (torch.memory_format objects cannot be pickled in 1.13)
    }, out("torch_objects.pt"))


@fixture
def root_int(out):
    torch.save(2**40, out("root_int.pt"))


def protocol_object():
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    return {"weight": w, "views": [w[1], w.t()], "lr": 0.01, "steps": 2**40,
            "name": "πρωτόκολλο", "blob": bytes(range(16)), "buf": bytearray(b"\x01\x02"),
            "flags": (True, None), "ids": {1, 2, 3}, "nested": {"k": [1.5, -0.0]}}


for _protocol in (2, 3, 4, 5):
    def _write(out, protocol=_protocol):
        torch.save(protocol_object(), out(f"pickle_protocol_{protocol}.pt"),
                   pickle_protocol=protocol)
    fixture(_write)


# -- container variants ---------------------------------------------------------------

def canonical_legacy(raw):
    """Legacy files key storages by pointer value; renumber them from 1000000000 in pickle
    order and re-sort the data blocks so that reruns give the same bytes."""
    ends, pos = [], 0
    for _ in range(5):
        for _op, _arg, at in pickletools.genops(raw[pos:]):
            pass
        pos += at + 1
        ends.append(pos)
    storage_types = {}

    class Recorder(pickle.Unpickler):
        def persistent_load(self, pid):
            storage_types[pid[2]] = pid[1]

        def find_class(self, module, name):
            if module == "torch._utils":  # rebuild functions: the tensors are not needed
                return lambda *args: None
            return super().find_class(module, name)

    Recorder(io.BytesIO(raw[ends[2]:ends[3]])).load()
    new_key = {old: str(1000000000 + i) for i, old in enumerate(storage_types)}
    blocks, pos = {}, ends[4]
    for old in pickle.loads(raw[ends[3]:ends[4]]):
        numel = int.from_bytes(raw[pos:pos + 8], "little")
        size = 8 + numel * torch._utils._element_size(storage_types[old].dtype)
        blocks[new_key[old]], pos = raw[pos:pos + size], pos + size
    assert pos == len(raw)
    obj_pickle, ops = bytearray(), list(pickletools.genops(raw[ends[2]:ends[3]]))
    for (op, arg, at), (_, _, nxt) in zip(ops, ops[1:] + [(None, None, ends[3] - ends[2])]):
        chunk = raw[ends[2] + at:ends[2] + nxt]
        if op.name == "BINUNICODE" and arg in new_key:
            key = new_key[arg].encode()
            chunk = b"X" + len(key).to_bytes(4, "little") + key
        obj_pickle += chunk
    keys = sorted(blocks)
    return (raw[:ends[2]] + bytes(obj_pickle) + pickle.dumps(keys, protocol=2)
            + b"".join(blocks[k] for k in keys))


@fixture
def legacy_format(out):
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    buf = io.BytesIO()
    torch.save({"base": base, "row1": base[1], "t": base.t(), "ids": torch.arange(3),
                "param": torch.nn.Parameter(torch.tensor([0.5, -0.5], dtype=torch.float64)),
                "lr": 0.1, "name": "legacy"}, buf, _use_new_zipfile_serialization=False)
    with open(out("legacy_format.pt"), "wb") as f:
        f.write(canonical_legacy(buf.getvalue()))


def small_object():
    return {"weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
            "bias": torch.tensor([0.5, -0.5]), "step": 3, "name": "layer"}


@fixture
def buffer_prefix_archive(out):
    buf = io.BytesIO()
    torch.save(small_object(), buf)             # saved to a stream: prefix "archive/"
    with open(out("buffer_prefix_archive.pt"), "wb") as f:
        f.write(buf.getvalue())


def rezip(path, rename=None, compression=zipfile.ZIP_STORED, version_first=False):
    """Rewrite a torch zip with stdlib zipfile (no 64-byte alignment, no data descriptors)."""
    with zipfile.ZipFile(path) as z:
        entries = [(i.filename, z.read(i)) for i in z.infolist()]
    if version_first:
        entries.sort(key=lambda e: not e[0].endswith("/version"))
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries:
            if rename:
                name = rename + name[name.index("/"):]
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data,
                       compress_type=compression)


@fixture
def prefix_renamed(out):
    torch.save(small_object(), out("prefix_renamed.pt"))
    rezip(out("prefix_renamed.pt"), rename="renamed")


@fixture
def zip_deflated(out):
    torch.save(small_object(), out("zip_deflated.pt"))
    rezip(out("zip_deflated.pt"), compression=zipfile.ZIP_DEFLATED)


@fixture
def version_record_first(out):
    torch.save(small_object(), out("version_record_first.pt"))
    rezip(out("version_record_first.pt"), version_first=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)

    def out(name):
        return os.path.join(args.out, name)

    for write in FIXTURES:
        write(out)
    total = 0
    for name in sorted(os.listdir(args.out)):
        if name.endswith(".pt"):
            size = os.path.getsize(out(name))
            total += size
            print(f"{size:8d}  {name}")
    print(f"{total:8d}  total ({len(FIXTURES)} fixtures, torch {torch.__version__})")


if __name__ == "__main__":
    main()
