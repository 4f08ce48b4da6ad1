// SPDX-License-Identifier: MIT
// The tensorfile program's commands: each has a spec (options, help) and a run function returning an exit status.
#pragma once

#include "args.hpp"

namespace tensorfile::cli {

extern const CommandSpec inspect_spec;  ///< tensorfile inspect PATH [--json] [--hash]
extern const CommandSpec convert_spec;  ///< tensorfile convert IN OUT [--to FORMAT] [--map-location ...] [--quiet]
extern const CommandSpec verify_spec;   ///< tensorfile verify PATH
extern const CommandSpec bench_spec;    ///< tensorfile bench PATH [--map-location DEVICE] [--repeat N] [--threads N]

/// Each runs its command on parsed arguments; throws tensorfile::Error (exit 1) or UsageError (exit 2).
int run_inspect(const Args& args);
int run_convert(const Args& args);
int run_verify(const Args& args);
int run_bench(const Args& args);

extern const CommandSpec scan_spec;  ///< tensorfile scan PATH... [--json] [--allow MODULE.NAME]... [--threads N]
int run_scan(const Args& args);

}  // namespace tensorfile::cli
