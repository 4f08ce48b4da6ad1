// SPDX-License-Identifier: MIT
// The one translation unit of the tool that includes <tensorfile/remote.hpp> (with TENSORFILE_CLI_REMOTE): including
// it registers the URL opener that open() and load() use, so inspect, convert and bench take URLs through them.
#include "urls.hpp"

#include <tensorfile/core/error.hpp>

#if TENSORFILE_CLI_REMOTE
#include <tensorfile/remote.hpp>
#endif

namespace tensorfile::cli {

bool urls_supported() noexcept { return TENSORFILE_CLI_REMOTE != 0; }

void require_url_support(const std::string& operand) {
  if (urls_supported() || !is_url(operand)) return;
  throw ArgumentError(
      "this tensorfile was built without URL support; expected a local path, or the tool rebuilt with "
      "-DTENSORFILE_REMOTE=ON (it needs libcurl: libcurl4-openssl-dev)",
      {.file = redacted_url(operand)});
}

std::unique_ptr<RangeReader> open_url_reader(const std::string& url) {
  require_url_support(url);
#if TENSORFILE_CLI_REMOTE
  return remote::open_file(url);
#else
  return nullptr;  // not reached: require_url_support threw
#endif
}

}  // namespace tensorfile::cli
