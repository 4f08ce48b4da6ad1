// SPDX-License-Identifier: MIT
// For the pickletools cross-check (check_scan_with_pickletools.py): prints, for each file argument, one line per
// global scan() found ("G <file> <module.name> <verdict> <called>"), anomalies ("A <file> <what>") and errors.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "tensorfile/scan.hpp"

int main(int argc, char** argv) {
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
