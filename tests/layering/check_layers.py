#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Fails when a header under include/tensorfile includes a tensorfile header of a higher layer or of another format,
# or when a header's namespaces do not match its folder, or when a header's bodies belong to no part of the compiled
# library.
"""Check the layering of tensorfile's headers, and that their folders say what is public.

Layers, low to high (a header may include its own layer and the layers below it):
  detail/**                       the leaf layer: only detail/**, core/error.hpp and core/file_modes.hpp
  core/                           dtype, device, storage, tensor, value, print
  backends/                       storage owners (mmap, borrowed)
  io/, formats/<X>/, interop/     siblings: io/ does not include formats/, formats/<X>/ not formats/<Y>/
                                  (formats/<X>/detail/ counts as formats/<X>/; formats/*.hpp and formats/detail/
                                  are shared by every format and include only core/, detail/ and each other)
  cuda/, remote/                  the device backend and streaming loader; remote storage (HTTP, S3)
  tensorfile.hpp, cuda.hpp        the umbrella headers (tensorfile.hpp leaves CUDA out), and verify.hpp, scan.hpp,
                                  state_dict.hpp, checkpoint.hpp and remote.hpp, which span every format
  version.hpp, config.hpp         include nothing (config.hpp only detail/mode_check.hpp, the link-time check of
                                  its mode), included by anyone

Namespaces match folders: a header in a detail/ folder declares only in a `detail` namespace (outside its
`#if TENSORFILE_DEFINITIONS` block, where the bodies of public functions may stand); any other header is public and
opens on its API, so the first namespace it opens is not a `detail` one.

Library parts: a header's entry bodies stand under `#if TENSORFILE_DEFINITIONS_OF(<its path, '/' as '_'>)`, and
config.hpp assigns that name to a part (`#define TENSORFILE_PART_<name> N`); helpers that other headers' bodies use
stand before it, under `#if TENSORFILE_DEFINITIONS`.

Usage: check_layers.py [INCLUDE_DIR]      check the tree (default: include/ next to tests/)
       check_layers.py --self-test        check a temporary tree with known good and bad includes
"""

import pathlib
import re
import sys
import tempfile

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"](tensorfile/[^">]+)[">]')
NAMESPACE_RE = re.compile(r"^namespace ([A-Za-z_:]+) \{")
CLOSE_RE = re.compile(r"^\}  // namespace\b")
DEFINITIONS_RE = re.compile(r"^#if TENSORFILE_DEFINITIONS(?:_OF\((\w+)\)|\b)")
PART_RE = re.compile(r"^#define TENSORFILE_PART_(\w+) (\d+)$", re.M)

DETAIL, CORE, BACKENDS, SIBLINGS, CUDA, UMBRELLA = range(6)
LAYER_NAMES = {DETAIL: "detail/", CORE: "core/", BACKENDS: "backends/", SIBLINGS: "io/, formats/ and interop/",
               CUDA: "cuda/", UMBRELLA: "the umbrella headers"}


# The core headers that depend on nothing (the errors, the map and read modes), which the leaf layer may use.
LEAF_CORE_HEADERS = ("tensorfile/core/error.hpp", "tensorfile/core/file_modes.hpp")


def classify(header):
    """(rank, group) of a header path such as 'tensorfile/core/tensor.hpp'; None when it is in no layer.

    group separates the siblings of one rank: 'io', 'formats-root', 'formats/<X>'."""
    parts = header.split("/")
    if len(parts) < 2 or parts[0] != "tensorfile":
        return None
    rest = parts[1:]
    if len(rest) == 1:
        if rest[0] in ("version.hpp", "config.hpp"):
            return (None, "version")
        if rest[0] in ("tensorfile.hpp", "cuda.hpp", "verify.hpp", "state_dict.hpp", "scan.hpp", "checkpoint.hpp",
                       "remote.hpp"):
            return (UMBRELLA, rest[0])
        return None
    top = rest[0]
    if top == "detail":
        return (DETAIL, "detail")
    if top == "core":
        return (CORE, "core")
    if top == "backends":
        return (BACKENDS, "backends")
    if top == "io":
        return (SIBLINGS, "io")
    if top == "interop":  # exchange with other frameworks (DLPack): core/ and backends/ only
        return (SIBLINGS, "interop")
    if top == "formats":
        if len(rest) == 2 or rest[1] == "detail":
            return (SIBLINGS, "formats-root")
        return (SIBLINGS, "formats/" + rest[1])
    if top == "cuda":
        return (CUDA, "cuda")
    if top == "remote":  # remote storage over libcurl (tensorfile::remote): a byte source above the formats
        return (CUDA, "remote")
    return None


def rule_broken(includer, included):
    """The rule that `includer` including `included` breaks, or None when the include is allowed."""
    src, dst = classify(includer), classify(included)
    if src is None:
        return f"{includer} is in no layer (detail/, core/, backends/, io/, formats/<X>/, cuda/ or the root)"
    if dst is None:
        return f"{included} is in no layer (detail/, core/, backends/, io/, formats/<X>/, cuda/ or the root)"
    (src_rank, src_group), (dst_rank, dst_group) = src, dst
    if src_group == "version":
        if includer == "tensorfile/config.hpp" and included == "tensorfile/detail/mode_check.hpp":
            return None
        return "version.hpp and config.hpp include nothing (config.hpp: only detail/mode_check.hpp)"
    if dst_group == "version":
        return None
    if src_rank == DETAIL:
        if dst_rank == DETAIL or included in LEAF_CORE_HEADERS:
            return None
        return "detail/ may include only detail/, tensorfile/core/error.hpp and tensorfile/core/file_modes.hpp"
    if src_group == "formats-root" and dst_rank not in (DETAIL, CORE) and dst_group != "formats-root":
        return "a header shared by the formats (formats/*.hpp) may include only core/, detail/ and formats/*.hpp"
    if src_group == "tensorfile.hpp" and dst_group in ("cuda", "cuda.hpp"):
        return "tensorfile.hpp leaves CUDA out (that is tensorfile/cuda.hpp)"
    if dst_rank > src_rank:
        return f"{LAYER_NAMES[src_rank]} may not include a higher layer ({LAYER_NAMES[dst_rank]})"
    if dst_rank == src_rank == SIBLINGS and src_group != dst_group:
        if src_group.startswith("formats/") and dst_group == "formats-root":
            return None
        if src_group.startswith("formats/") and dst_group.startswith("formats/"):
            return f"{src_group}/ may not include another format ({dst_group}/)"
        return f"{src_group}/ and {dst_group}/ are siblings and may not include each other"
    if dst_rank == src_rank == UMBRELLA and src_group == "tensorfile.hpp" and dst_group == "cuda.hpp":
        return "tensorfile.hpp leaves CUDA out (that is tensorfile/cuda.hpp)"
    return None


def namespace_rules_broken(header, text):
    """(line, rule) for each namespace of `header` (its text) that does not match its folder."""
    in_detail_folder = "detail" in header.split("/")[:-1]
    broken = []
    opened = []  # the namespaces open at each line, outermost first (closed by clang-format's "}  // namespace")
    first = True
    in_definitions = False
    for number, line in enumerate(text.splitlines(), start=1):
        if DEFINITIONS_RE.match(line):
            in_definitions = True
        if CLOSE_RE.match(line) and opened:
            opened.pop()
            continue
        match = NAMESPACE_RE.match(line)
        if not match:
            continue
        name = match.group(1)
        is_detail = any("detail" in outer.split("::") for outer in opened + [name])
        opened.append(name)
        if in_detail_folder and not is_detail and not in_definitions:
            broken.append((number, f"namespace {name} in a detail/ folder: its declarations belong in a detail "
                                   "namespace (or the header in a public folder)"))
        if not in_detail_folder and first and is_detail:
            broken.append((number, f"a public header opens on namespace {name}: its API comes first (or the header "
                                   "belongs in a detail/ folder)"))
        first = False
    return broken


def check(include_dir):
    """Print each violation as file:line: rule and a summary line; return the includers, one per violation."""
    include_dir = pathlib.Path(include_dir)
    headers = sorted(p for p in (include_dir / "tensorfile").rglob("*") if p.suffix in (".hpp", ".h"))
    includes = 0
    violations = []
    for path in headers:
        includer = path.relative_to(include_dir).as_posix()
        text = path.read_text(encoding="utf-8")
        for number, broken in namespace_rules_broken(includer, text):
            violations.append(includer)
            print(f"{path}:{number}: {broken}")
        for number, line in enumerate(text.splitlines(), start=1):
            match = INCLUDE_RE.match(line)
            if not match:
                continue
            includes += 1
            included = match.group(1)
            broken = rule_broken(includer, included)
            if broken is None and not (include_dir / included).is_file():
                broken = f"{included} does not exist"
            if broken is not None:
                violations.append(includer)
                print(f"{path}:{number}: includes {included}: {broken}")
    # Each definitions block names its own header, which config.hpp assigns to one of the library's parts (a block
    # in no part would be compiled by no part: undefined references in compiled mode only).
    config = include_dir / "tensorfile" / "config.hpp"
    parts = dict(PART_RE.findall(config.read_text(encoding="utf-8"))) if config.is_file() else {}
    for path in headers:
        includer = path.relative_to(include_dir).as_posix()
        expected = includer.removeprefix("tensorfile/").removesuffix(".hpp").replace("/", "_")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = DEFINITIONS_RE.match(line)
            if not match or match.group(1) is None:  # a block of helpers, compiled by every part that uses them
                continue
            if match.group(1) != expected:
                violations.append(includer)
                print(f"{path}:{number}: the definitions block names {match.group(1)}; expected {expected}")
            elif expected not in parts:
                violations.append(includer)
                print(f"{path}:{number}: config.hpp assigns {expected} to no library part (TENSORFILE_PART_{expected})")
    print(f"checked {includes} includes in {len(headers)} headers: {len(violations)} violations")
    return violations


SELF_TEST_TREE = {
    # path: (included headers, expected violations)
    "tensorfile/version.hpp": ([], 0),
    "tensorfile/detail/bytes/a.hpp": (["tensorfile/detail/posix/b.hpp", "tensorfile/core/error.hpp"], 0),
    "tensorfile/detail/posix/b.hpp": (["tensorfile/core/tensor.hpp"], 1),
    "tensorfile/core/error.hpp": ([], 0),
    "tensorfile/core/tensor.hpp": (["tensorfile/core/error.hpp", "tensorfile/detail/bytes/a.hpp",
                                    "tensorfile/backends/mmap.hpp"], 1),
    "tensorfile/backends/mmap.hpp": (["tensorfile/core/tensor.hpp", "tensorfile/io/from_file.hpp"], 1),
    "tensorfile/io/from_file.hpp": (["tensorfile/backends/mmap.hpp", "tensorfile/formats/x/load.hpp"], 1),
    "tensorfile/formats/format.hpp": (["tensorfile/core/tensor.hpp", "tensorfile/backends/mmap.hpp"], 1),
    "tensorfile/formats/x/load.hpp": (["tensorfile/formats/format.hpp", "tensorfile/formats/x/detail/p.hpp",
                                       "tensorfile/formats/y/load.hpp", "tensorfile/version.hpp"], 2),
    "tensorfile/formats/x/detail/p.hpp": (["tensorfile/formats/x/load.hpp", "tensorfile/cuda/backend.hpp",
                                           "tensorfile/formats/x/missing.hpp"], 2),
    "tensorfile/formats/y/load.hpp": (["tensorfile/io/from_file.hpp"], 1),
    "tensorfile/formats/y/detail/d.hpp": (["tensorfile/formats/y/load.hpp"], 0),
    "tensorfile/formats/detail/shared.hpp": (["tensorfile/core/error.hpp"], 0),
    "tensorfile/formats/y/uses_shared.hpp": (["tensorfile/formats/detail/shared.hpp"], 0),
    "tensorfile/cuda/backend.hpp": (["tensorfile/formats/x/load.hpp", "tensorfile/tensorfile.hpp"], 1),
    "tensorfile/tensorfile.hpp": (["tensorfile/formats/y/load.hpp", "tensorfile/cuda/backend.hpp"], 1),
    "tensorfile/cuda.hpp": (["tensorfile/tensorfile.hpp", "tensorfile/cuda/backend.hpp"], 0),
    "tensorfile/misc/z.hpp": (["tensorfile/core/error.hpp"], 1),
    "tensorfile/detail/bytes/c.hpp": ([], 1),
    "tensorfile/config.hpp": ([], 0),
    "tensorfile/formats/y/save.hpp": ([], 2),
}


# Lines planted in the self-test tree: each header's count in SELF_TEST_TREE includes these.
NAMESPACE_PLANTS = {
    # the library parts (d.hpp's block has one), a block naming another header (1) and one in no part (1)
    "tensorfile/config.hpp": ["#define TENSORFILE_PART_formats_y_detail_d 1"],
    "tensorfile/formats/y/save.hpp": ["#if TENSORFILE_DEFINITIONS_OF(formats_y_load)", "#endif",
                                      "#if TENSORFILE_DEFINITIONS_OF(formats_y_save)", "#endif"],
    # a public header opening on detail (1), and one whose detail part follows its API (0)
    "tensorfile/formats/x/load.hpp": ["namespace tensorfile::detail {", "}  // namespace tensorfile::detail",
                                      "namespace tensorfile {", "}  // namespace tensorfile"],
    "tensorfile/formats/y/load.hpp": ["namespace tensorfile {", "}  // namespace tensorfile",
                                      "namespace tensorfile::detail {", "}  // namespace tensorfile::detail"],
    # a detail header declaring public names (1), and one defining a public function in its definitions (0)
    "tensorfile/detail/bytes/c.hpp": ["namespace tensorfile {", "}  // namespace tensorfile"],
    "tensorfile/formats/y/detail/d.hpp": ["namespace tensorfile::detail {", "namespace impl {", "}  // namespace impl",
                                          "}  // namespace tensorfile::detail",
                                          "#if TENSORFILE_DEFINITIONS_OF(formats_y_detail_d)",
                                          "namespace tensorfile {", "}  // namespace tensorfile", "#endif"],
}


def self_test():
    """Build a tree with known violations and require the check to find exactly those."""
    expected = {header: count for header, (_, count) in SELF_TEST_TREE.items() if count}
    with tempfile.TemporaryDirectory() as root:
        for header, (included, _) in SELF_TEST_TREE.items():
            path = pathlib.Path(root) / header
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = ["// SPDX-License-Identifier: MIT"]
            lines += [f'#include "{name}"' for name in included]
            lines += NAMESPACE_PLANTS.get(header, [])
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        reported = check(root)
    found = {header: reported.count(header) for header in set(reported)}
    if found != expected:
        print(f"self-test FAILED: expected violations per header {expected}, found {found}")
        return 1
    print(f"self-test passed: the {len(reported)} planted violations were all reported, and nothing else")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    include_dir = argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[2] / "include"
    return 1 if check(include_dir) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
