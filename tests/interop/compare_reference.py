#!/usr/bin/python3
"""Compare two file descriptions (torch_reference.py vs `tensorfile inspect --json --hash`).

    python3 tests/interop/compare_reference.py A.json B.json

Each input holds one or more JSON objects (one per .pt file, in the same order; any
whitespace between them). Entries are matched by path; fields are compared exactly,
except: storage ids are compared as a partition (the same entries share a storage on
both sides, whatever the numbers); sha256 only when both sides have it; float values
bit for bit (so 0.0 != -0.0) but NaN equals NaN ("nan"/"inf"/"-inf" strings stand for
non-finite values). Prints every difference; exit status 1 on any, 0 when all match.
Needs only the Python standard library.
"""
import json
import math
import struct
import sys


def read_objects(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    decoder, pos, objects = json.JSONDecoder(), 0, []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return objects
        obj, pos = decoder.raw_decode(text, pos)
        objects.append(obj)


def same_float(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return (math.isnan(a) and math.isnan(b)) or struct.pack("<d", a) == struct.pack("<d", b)


def same_value(kind, a, b):
    if kind == "float":
        return same_float(a, b)
    if kind == "complex":
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == 2 \
            and all(same_float(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def compare(a, b, where, report):
    for key in sorted((set(a) | set(b)) - {"tensors", "values"}):
        if a.get(key) != b.get(key):
            report(f"{where}: {key}: {a.get(key)!r} != {b.get(key)!r}")
    for section in ("tensors", "values"):
        left = {e["path"]: e for e in a.get(section, [])}
        right = {e["path"]: e for e in b.get(section, [])}
        for path in left.keys() - right.keys():
            report(f"{where}: {section} {path!r}: only in A")
        for path in right.keys() - left.keys():
            report(f"{where}: {section} {path!r}: only in B")
        common = [p for p in left if p in right]
        if common != [p for p in right if p in left]:
            report(f"{where}: {section}: entries in a different order")
        storage_a_to_b, storage_b_to_a = {}, {}
        for path in common:
            x, y = left[path], right[path]
            for field in sorted(x.keys() | y.keys()):
                if field == "sha256" and not (field in x and field in y):
                    continue
                u, v = x.get(field), y.get(field)
                if field == "storage":
                    ok = (u is None) == (v is None) and storage_a_to_b.setdefault(u, v) == v \
                        and storage_b_to_a.setdefault(v, u) == u
                elif field == "value":
                    ok = same_value(x.get("type"), u, v)
                else:
                    ok = u == v and type(u) is type(v)
                if not ok:
                    report(f"{where}: {section} {path!r}: {field}: {u!r} != {v!r}"
                           + (" (storage sharing differs)" if field == "storage" else ""))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    docs_a, docs_b = read_objects(sys.argv[1]), read_objects(sys.argv[2])
    problems = []
    if len(docs_a) != len(docs_b):
        problems.append(f"{len(docs_a)} objects in A, {len(docs_b)} in B")
    for i, (a, b) in enumerate(zip(docs_a, docs_b)):
        compare(a, b, f"object {i}", problems.append)
    for line in problems:
        print(line)
    print(f"{len(problems)} difference(s)" if problems else f"OK: {len(docs_a)} object(s) match")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
