#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The README's CMake instructions, run as written: the ```sh block of its "CMake" section (configure, build,
# install) and a consumer project made from each ```cmake block (find_package, add_subdirectory, FetchContent).
"""Run the CMake instructions of README.md's "CMake" section as a user would.

Only the placeholders change: /opt/tensorfile becomes a prefix under --work, `-S .` names the source tree (the
block is run from a scratch folder, so that its `build` folder lands there), <tensorfile git URL> becomes the
local repository, <commit> the commit checked out, and third_party/tensorfile is a link to the source tree.
A block that is missing, a placeholder that is not there to replace, or any step that fails is a failure.

  install           the ```sh block, in <work>/install
  find_package      needs install first; the block that calls find_package(tensorfile ...)
  add_subdirectory  the block that calls add_subdirectory(...)
  fetchcontent      the block that calls FetchContent_Declare(tensorfile ...)

Each consumer project is generated in <work>/<mode>/src: an executable `app` (tests/consumers/consumer_main.cpp)
made before the block, the block, and with --compiled an `app_compiled` linked as the README's sentence
"Link tensorfile::compiled instead of tensorfile::tensorfile" says: the block's target_link_libraries line with
that one change. Both programs are built and run.
"""
import argparse
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

MARKERS = {
    "find_package": "find_package(tensorfile",
    "add_subdirectory": "add_subdirectory(",
    "fetchcontent": "FetchContent_Declare(tensorfile",
}


def fail(message):
    sys.exit(f"readme_consumer: {message}")


def cmake_section(readme):
    """The ``` blocks of the README's "## CMake" section: (language, first body line, text)."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "## CMake")
    except StopIteration:
        fail(f'{readme}: no "## CMake" section')
    blocks, i = [], start + 1
    while i < len(lines) and not lines[i].startswith("## "):
        opening = re.match(r"^```(\w*)\s*$", lines[i])
        if opening:
            body_start = i + 1
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            blocks.append((opening.group(1), body_start + 1, "\n".join(lines[body_start:i]) + "\n"))
        i += 1
    return blocks


def one_block(blocks, lang, marker, readme):
    found = [b for b in blocks if b[0] == lang and (marker is None or marker in b[2])]
    if len(found) != 1:
        what = f"```{lang} block" + (f" with {marker}" if marker else "")
        fail(f'{readme}: the "CMake" section has {len(found)} {what}s; expected 1')
    return found[0]


def substitute(text, old, new, where):
    if old not in text:
        fail(f"{where}: the placeholder {old!r} is not there to replace")
    return text.replace(old, new)


def run(command, cwd, env=None):
    print("+", " ".join(shlex.quote(str(c)) for c in command), f"(in {cwd})", flush=True)
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env)
    if result.returncode != 0:
        fail(f"{command[0]} exited with {result.returncode}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["install", *MARKERS])
    parser.add_argument("--source", required=True, type=pathlib.Path, help="tensorfile's source tree")
    parser.add_argument("--work", required=True, type=pathlib.Path, help="scratch folder (kept between runs)")
    parser.add_argument("--cmake", default="cmake")
    parser.add_argument("--cxx", help="the C++ compiler, for every configure (CXX for the sh block)")
    parser.add_argument("--generator", help="CMake generator of the consumer projects")
    parser.add_argument("--commit", help="the commit FetchContent fetches (default: git rev-parse HEAD)")
    parser.add_argument("--compiled", action="store_true", help="also build and run app_compiled")
    args = parser.parse_args()

    source = args.source.resolve()
    work = args.work.resolve()
    readme = source / "README.md"
    blocks = cmake_section(readme)
    prefix = work / "prefix"
    _, sh_line, sh_text = one_block(blocks, "sh", None, readme)
    sh_where = f"README.md:{sh_line}"
    env = dict(os.environ)
    if args.cxx:
        env["CXX"] = args.cxx

    if args.mode == "install":
        script = substitute(sh_text, "/opt/tensorfile", str(prefix), sh_where)
        script = substitute(script, "-S . ", f"-S {shlex.quote(str(source))} ", sh_where)
        folder = work / "install"
        folder.mkdir(parents=True, exist_ok=True)
        print(f"README.md:{sh_line}, as run:\n{script}", flush=True)
        run(["bash", "-euo", "pipefail", "-c", script], folder, env)
        return

    _, line, text = one_block(blocks, "cmake", MARKERS[args.mode], readme)
    where = f"README.md:{line}"
    configure = []
    if args.mode == "find_package":
        # The consumer's side of the install: the sh block says which CMAKE_PREFIX_PATH to pass.
        hint = re.search(r"-DCMAKE_PREFIX_PATH=(\S+)", sh_text)
        if not hint:
            fail(f"{sh_where}: the sh block names no -DCMAKE_PREFIX_PATH= for the consumer")
        configure.append("-DCMAKE_PREFIX_PATH=" + substitute(hint.group(1), "/opt/tensorfile", str(prefix), sh_where))
        if not (prefix / "include" / "tensorfile").is_dir():
            fail(f"{prefix}: nothing installed; run the install mode first")
    project = work / args.mode / "src"
    build = work / args.mode / "build"
    if project.exists():
        shutil.rmtree(project)
    project.mkdir(parents=True)
    shutil.copy(pathlib.Path(__file__).with_name("consumer_main.cpp"), project / "consumer_main.cpp")
    if args.mode == "add_subdirectory":
        match = re.search(r"add_subdirectory\(([^\s)]+)", text)
        if not match:
            fail(f"{where}: add_subdirectory() names no folder")
        vendored = project / match.group(1)
        vendored.parent.mkdir(parents=True, exist_ok=True)
        vendored.symlink_to(source, target_is_directory=True)
    elif args.mode == "fetchcontent":
        commit = args.commit or subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, check=True,
                                               capture_output=True, text=True).stdout.strip()
        text = substitute(text, "<tensorfile git URL>", str(source), where)
        text = substitute(text, "<commit>", commit, where)
    left = re.findall(r"<[^<>\s]+(?: [^<>]+)?>", text)
    if left:
        fail(f"{where}: placeholders left that this test cannot fill: {', '.join(left)}")

    links = [l for l in text.splitlines() if re.match(r"\s*target_link_libraries\(app\s", l)]
    if len(links) != 1 or "tensorfile::tensorfile" not in links[0]:
        fail(f"{where}: expected one target_link_libraries(app ... tensorfile::tensorfile) line")
    lists = [
        "# Generated by tests/consumers/readme_consumer.py; the block between the markers is README.md's, as written.",
        "cmake_minimum_required(VERSION 3.21)",
        f"project(tensorfile_readme_{args.mode} LANGUAGES CXX)",
        "add_executable(app consumer_main.cpp)",
        f"# --- {where} ---",
        text.rstrip("\n"),
        "# --- end of the README's block ---",
    ]
    programs = ["app"]
    if args.compiled:
        compiled = links[0].replace("(app ", "(app_compiled ").replace("tensorfile::tensorfile", "tensorfile::compiled")
        lists += ["add_executable(app_compiled consumer_main.cpp)", compiled]
        programs.append("app_compiled")
    (project / "CMakeLists.txt").write_text("\n".join(lists) + "\n", encoding="utf-8")
    print((project / "CMakeLists.txt").read_text(encoding="utf-8"), flush=True)

    command = [args.cmake, "-S", project, "-B", build]
    if args.generator:
        command += ["-G", args.generator]
    if args.cxx:
        command.append(f"-DCMAKE_CXX_COMPILER={args.cxx}")
    run(command + configure, work, env)
    run([args.cmake, "--build", build], work, env)
    for program in programs:
        run([build / program], build, env)


if __name__ == "__main__":
    main()
