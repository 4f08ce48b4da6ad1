// SPDX-License-Identifier: MIT
// How verify and scan word a safety scan: the UNSAFE / NOT SAFE lines, the worst global, and the report as JSON.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tensorfile/scan.hpp>

#include "args.hpp"

namespace tensorfile::cli {

/// The options verify and scan share: --allow MODULE.NAME[,MODULE.NAME...] (repeatable) and --json.
[[nodiscard]] ScanOptions scan_options(const Args& args);

/// One line per reason the file is not safe: "UNSAFE: calls os.system (archive/data.pkl, byte 34)" for a dangerous
/// global, "NOT SAFE FOR torch.load(weights_only=True): mymodule.Config (...)" for an unknown one, "SUSPICIOUS: ..."
/// for a crafted construct, "UNREADABLE PICKLE: ..." for a broken one. Empty when the file is safe.
[[nodiscard]] std::vector<std::string> unsafe_lines(const ScanReport& report);

/// The worst global as "dangerous os.system" ("-" when there is none worse than allowed).
[[nodiscard]] std::string worst_global(const ScanReport& report);

/// The report as a JSON object (no newline at the end).
[[nodiscard]] std::string scan_json(const std::string& path, const ScanReport& report);

/// One "NOTE: ..." line per hidden temporary a killed save left in `folder` (leftover_save_temporaries); none when
/// the folder cannot be listed.
[[nodiscard]] std::vector<std::string> leftover_lines(const std::filesystem::path& folder);

}  // namespace tensorfile::cli
