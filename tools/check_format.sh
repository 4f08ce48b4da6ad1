#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fails when a C++ file under include/, tools/, examples/ or tests/ is not formatted as .clang-format says
# (test data and fuzz corpora are not C++ sources and are skipped). Fix with the same file list and `-i`.
# Usage: tools/check_format.sh [clang-format binary]   (default: clang-format-14, else clang-format)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

format=${1:-}
if [[ -z $format ]]; then
  if command -v clang-format-14 > /dev/null; then format=clang-format-14; else format=clang-format; fi
fi
command -v "$format" > /dev/null || { echo "check_format: $format not found" >&2; exit 2; }

mapfile -d '' files < <(find include tools examples tests \
  \( -path tests/data -o -path '*/corpus' \) -prune -o \
  -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' -o -name '*.cc' \) -print0 | sort -z)

if "$format" --dry-run -Werror --style=file "${files[@]}"; then
  echo "check_format: ${#files[@]} files formatted as .clang-format says"
else
  echo "check_format: files above are not formatted; run: $format -i --style=file <file>..." >&2
  exit 1
fi
