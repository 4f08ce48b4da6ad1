#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Tested documentation: compiles every ```cpp block of README.md, CONTRIBUTING.md and docs/*.md against include/
# (header-only, or against the built compiled library), runs the programs, and checks the tool's flags the shell
# blocks name, the option fields OPTIONS.md must list and every relative link. A README that lies fails this test.
"""Check the C++ snippets, tool commands and option reference of tensorfile's documentation.

Block kinds, by the words after ```cpp (or an HTML comment `<!-- snippet: WORDS -->` on the line before):
  (none)      a whole translation unit; run when it defines main()
  fragment    statements, compiled as the body of main() after the usual includes (hoisting its #include lines)
  run         with fragment: also run it
  cuda        needs <tensorfile/cuda.hpp> and cudart: compiled (never run) where --cuda-include is given
  remote      needs <tensorfile/remote.hpp>: linked with libcurl (it names servers: use it without run)
Programs run in a fresh temporary directory holding a copy of tests/data, so relative paths such as
tests/data/torch/state_dict_linear_bn.pt work and whatever they write is thrown away.
"""
import argparse
import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

FRAGMENT_PRELUDE = """#include <tensorfile/tensorfile.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <span>
#include <string>
#include <vector>
"""
MAIN_RE = re.compile(r"^\s*(?:int|auto)\s+main\s*\(", re.MULTILINE)
SHELL_INFOS = {"sh", "bash", "shell", "console"}


class Block:
    def __init__(self, path, line, info, text):
        self.path, self.line, self.text = path, line, text
        words = info.split()
        self.lang = words[0] if words else ""
        self.words = set(words[1:])

    @property
    def where(self):
        return f"{self.path}:{self.line}"


def blocks_of(path, shown):
    """Every fenced block of one Markdown file, with the line its body starts on."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = re.match(r"^(\s*)(`{3,})(.*)$", lines[i])
        if not opening:
            i += 1
            continue
        fence, info = opening.group(2), opening.group(3).strip()
        previous = lines[i - 1].strip() if i > 0 else ""
        marker = re.match(r"^<!--\s*snippet:\s*(.*?)\s*-->$", previous)
        if marker:
            info = f"{info} {marker.group(1)}"
        body, j = [], i + 1
        while j < len(lines) and not re.match(rf"^\s*{fence}\s*$", lines[j]):
            body.append(lines[j])
            j += 1
        if j == len(lines):
            sys.exit(f"{shown}:{i + 1}: a ``` block that is never closed")
        found.append(Block(shown, i + 2, info, "\n".join(body) + "\n"))
        i = j + 1
    return found


def translation_unit(block):
    """The source file a block compiles as, with #line directives so that errors name the Markdown line."""
    if "fragment" not in block.words:
        return f'#line {block.line} "{block.path}"\n{block.text}'
    includes, body = [], []
    for offset, text in enumerate(block.text.splitlines()):
        (includes if text.lstrip().startswith("#include") else body).append((offset, text))
    head = FRAGMENT_PRELUDE + ("#include <tensorfile/cuda.hpp>\n" if "cuda" in block.words else "")
    head += "".join(f'#line {block.line + offset} "{block.path}"\n{text}\n' for offset, text in includes)
    lines = "".join(f'#line {block.line + offset} "{block.path}"\n{text}\n' for offset, text in body)
    return f"{head}\nnamespace tf = tensorfile;\n\nint main() {{\n{lines}  return 0;\n}}\n"


def runs(block):
    if "cuda" in block.words:
        return False
    return "run" in block.words if "fragment" in block.words else bool(MAIN_RE.search(block.text))


class Checker:
    def __init__(self, args, scratch):
        self.args, self.scratch = args, scratch
        self.root = args.root
        self.flags = ["-std=c++20", "-O0", "-pthread", f"-I{self.root / 'include'}"]
        self.libraries = ["-lfmt"]
        if args.compiled:  # the bodies come from the built library: a block compiles in 2-3 s rather than 12-20
            self.flags.append("-DTENSORFILE_SEPARATE_COMPILATION")
            self.libraries.insert(0, str(args.compiled))

    def compile(self, index, block):
        source = self.scratch / f"block{index}.cpp"
        source.write_text(translation_unit(block), encoding="utf-8")
        binary = self.scratch / f"block{index}"
        command = [self.args.cxx, *self.flags, str(source), "-o", str(binary), *self.libraries]
        if "remote" in block.words:
            command.append("-lcurl")
        if "cuda" in block.words:
            command[1:1] = [f"-I{self.args.cuda_include}"]
            command += [f"-L{self.args.cuda_lib}", "-lcudart", "-ldl"]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            return f"{block.where}: does not compile:\n{result.stderr.strip()}"
        if not runs(block):
            return None
        workdir = self.scratch / f"run{index}"
        shutil.copytree(self.root / "tests/data", workdir / "tests/data", symlinks=True)
        try:
            result = subprocess.run([str(binary)], cwd=workdir, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return f"{block.where}: ran past 120 s"
        if result.returncode != 0:
            return f"{block.where}: exited {result.returncode}:\n{(result.stdout + result.stderr).strip()}"
        return None


def tool_commands(blocks):
    """(block, command, flags) for each `tensorfile COMMAND ...` line of a shell block."""
    for block in blocks:
        if block.lang not in SHELL_INFOS:
            continue
        for text in block.text.splitlines():
            text = re.sub(r"\s#.*$", "", text).strip()
            text = re.sub(r"^\$\s+", "", text)
            words = text.split()
            if len(words) < 2 or words[0] not in ("tensorfile", "build/tools/tensorfile/tensorfile"):
                continue
            flags = sorted({w.split("=")[0] for w in words[2:] if w.startswith("--")})
            yield block, words[1], flags


def check_tool(tool, blocks, root):
    """Every flag a shell block gives `tensorfile COMMAND` is in that command's --help (or, without the program
    built, in the tool's sources)."""
    errors, helps, checked = [], {}, 0
    sources = "".join(p.read_text(encoding="utf-8") for p in sorted((root / "tools/tensorfile").glob("*.cpp")))
    for block, command, flags in tool_commands(blocks):
        if tool:
            if command not in helps:
                result = subprocess.run([tool, command, "--help"], capture_output=True, text=True)
                helps[command] = result.stdout if result.returncode == 0 else None
            text = helps[command]
            checked += 1
            if text is None:
                errors.append(f"{block.where}: `tensorfile {command}` is no command (its --help fails)")
                continue
            missing = [f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text)]
        else:
            missing = [f for f in flags if f'OptionSpec{{"{f[2:]}"' not in sources]  # args.hpp's spelling
            checked += 1
        if missing:
            errors.append(f"{block.where}: `tensorfile {command}` has no {', '.join(missing)}")
    return errors, checked


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def check_links(files, root):
    """Every relative link of the Markdown files names a file that exists, and a #fragment one of its headings."""
    errors, checked = [], 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        prose = re.sub(r"^(\s*)(`{3,}).*?^\1\2\s*$", "", text, flags=re.MULTILINE | re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"^[a-z]+:", target):
                continue
            name, _, fragment = target.partition("#")
            linked = (path.parent / name).resolve() if name else path
            checked += 1
            if not linked.exists():
                errors.append(f"{path.relative_to(root)}: links to {target}, which does not exist")
            elif fragment and linked.suffix == ".md":
                headings = re.findall(r"^#+\s+(.*)$", linked.read_text(encoding="utf-8"), flags=re.MULTILINE)
                if fragment not in {anchor(h) for h in headings}:
                    errors.append(f"{path.relative_to(root)}: links to {target}, a heading {linked.name} lacks")
    return errors, checked


def option_fields(header):
    """The dotted field names of LoadOptions and SaveOptions (LoadLimits as `limits.`), parsed from options.hpp."""
    text = re.sub(r"//[^\n]*", "", header.read_text(encoding="utf-8"))
    while True:  # initializers and enum bodies hold no ';': drop them, keeping the struct bodies
        shorter = re.sub(r"\{[^{};]*\}", "", text)
        if shorter == text:
            break
        text = shorter
    fields = {"LoadOptions": [], "SaveOptions": [], "LoadLimits": []}
    stack = []
    for token in re.finditer(r"struct\s+(\w+)\s*\{|\}\s*(\w*)\s*;|([^;{}]+);", text):
        if token.group(1):
            stack.append([token.group(1), []])
        elif token.group(0).startswith("}"):
            name, members = stack.pop() if stack else (None, [])
            if token.group(2) and stack:  # a nested struct's member: `} torch;`
                stack[-1][1] += [f"{token.group(2)}.{m}" for m in members]
            elif name in fields:
                fields[name] = members
        elif stack:
            statement = token.group(3).split("=")[0].strip()
            if statement.startswith(("using", "class", "friend")) or not statement:
                continue
            stack[-1][1].append(re.findall(r"\w+", statement)[-1])
    load = [f for f in fields["LoadOptions"] if f != "limits"] + [f"limits.{f}" for f in fields["LoadLimits"]]
    return {"LoadOptions": load, "SaveOptions": fields["SaveOptions"]}


def check_options(root):
    """docs/OPTIONS.md names every field, `.field` under `## LoadOptions` and under `## SaveOptions`."""
    if not (root / "docs/OPTIONS.md").is_file():
        return ["docs/OPTIONS.md: missing"], 0
    doc = (root / "docs/OPTIONS.md").read_text(encoding="utf-8")
    parts = re.split(r"^## ", doc, flags=re.MULTILINE)
    sections = {p.split()[0]: p for p in parts if p.split()}
    errors, fields = [], option_fields(root / "include/tensorfile/formats/options.hpp")
    for struct, names in fields.items():
        section = sections.get(struct)
        if section is None:
            errors.append(f"docs/OPTIONS.md: no `## {struct}` section")
            continue
        errors += [f"docs/OPTIONS.md: `## {struct}` does not name `.{n}`" for n in names if f"`.{n}`" not in section]
    return errors, sum(len(n) for n in fields.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parents[2])
    parser.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--tool", help="the built tensorfile program: shell blocks are checked against its --help")
    parser.add_argument("--cuda-include", help="the CUDA Toolkit's include directory (cuda blocks are skipped without)")
    parser.add_argument("--cuda-lib", default="", help="the directory holding libcudart")
    parser.add_argument("--compiled", type=pathlib.Path,
                        help="the built tensorfile::compiled library: blocks are compiled in that mode (default: "
                             "header-only)")
    parser.add_argument("files", nargs="*", type=pathlib.Path, help="Markdown files (default: the documentation)")
    args = parser.parse_args()
    args.root = args.root.resolve()
    files = args.files or [args.root / "README.md", args.root / "CONTRIBUTING.md",
                           *sorted((args.root / "docs").glob("*.md")), args.root / "tests/data/README.md"]
    blocks = []
    for path in files:
        path = path.resolve()
        shown = path.relative_to(args.root) if path.is_relative_to(args.root) else path
        blocks += blocks_of(path, shown)
    cpp = [b for b in blocks if b.lang in ("cpp", "c++")]
    skipped = [b for b in cpp if "cuda" in b.words and not args.cuda_include]
    cpp = [b for b in cpp if b not in skipped]

    started = time.monotonic()
    errors = []
    with tempfile.TemporaryDirectory(prefix="tensorfile_docs_") as scratch:
        checker = Checker(args, pathlib.Path(scratch))
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            errors += [e for e in pool.map(checker.compile, range(len(cpp)), cpp) if e]
    tool_errors, commands = check_tool(args.tool, blocks, args.root)
    option_errors, option_count = check_options(args.root)
    link_errors, links = check_links([p.resolve() for p in files if p.resolve().is_relative_to(args.root)], args.root)
    errors += tool_errors + option_errors + link_errors

    ran = sum(runs(b) for b in cpp)
    print(f"check_snippets: {len(cpp)} C++ blocks compiled ({ran} run), {commands} tool commands checked against "
          f"{'--help' if args.tool else 'the tool sources'}, {option_count} option fields looked up in "
          f"docs/OPTIONS.md, {links} links followed, in {time.monotonic() - started:.1f} s"
          + (", compiled mode" if args.compiled else ", header-only"))
    for block in skipped:
        print(f"check_snippets: SKIPPED {block.where}: a cuda block, and no --cuda-include was given")
    for error in errors:
        print(f"\nFAIL {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
