// SPDX-License-Identifier: MIT
// For the pickletools cross-check (check_scan_with_pickletools.py): prints, for each file argument, one line per
// global scan() found ("G <file> <module.name> <verdict> <called>"), anomalies ("A <file> <what>") and errors.
// With --allow-list alone: the weights_only allow-list scan() uses, one "module.name" a line, for a comparison with
// torch._weights_only_unpickler._get_allowed_globals().keys().
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>

#include "tensorfile/formats/torch/detail/global_verdicts.hpp"
#include "tensorfile/scan.hpp"

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--allow-list") {
    const auto print = [](const auto& list) {
      for (std::string_view name : list) std::printf("%.*s\n", static_cast<int>(name.size()), name.data());
    };
    print(tensorfile::detail::weights_only_allowed);
    print(tensorfile::detail::weights_only_rebuild_functions);
    print(tensorfile::detail::weights_only_storage_classes);
    return 0;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    try {
      const tensorfile::ScanReport report = tensorfile::scan(std::filesystem::path(argv[i]));
      for (const tensorfile::ScannedGlobal& global : report.globals) {
        std::printf("G\t%s\t%s\t%s\t%d\n", argv[i], global.full_name().c_str(),
                    std::string(tensorfile::verdict_name(global.verdict)).c_str(), global.called ? 1 : 0);
      }
      for (const tensorfile::ScanFinding& anomaly : report.anomalies) {
        std::printf("A\t%s\t%s\n", argv[i], anomaly.what.c_str());
      }
      for (const tensorfile::ScanFinding& error : report.errors)
        std::printf("E\t%s\t%s\n", argv[i], error.what.c_str());
    } catch (const std::exception& error) {
      std::printf("E\t%s\t%s\n", argv[i], error.what());
      status = 1;
    }
  }
  return status;
}
