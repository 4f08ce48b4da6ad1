// SPDX-License-Identifier: MIT
// URL operands of the tensorfile program (http://, https://, s3://): read through tensorfile::remote when the tool is
// built with TENSORFILE_REMOTE, otherwise refused with an error that names the fix.
#pragma once

#include <memory>
#include <string>

#include <tensorfile/formats/source.hpp>

namespace tensorfile::cli {

/// Whether the tool was built with tensorfile::remote (URLs are read).
[[nodiscard]] bool urls_supported() noexcept;

/// Throws ArgumentError naming the URL (redacted) and the build option when `operand` is a URL this build cannot read;
/// does nothing for a path. Called before open() so that the message names the tool's fix, not the library's.
void require_url_support(const std::string& operand);

/// The object at `url`, read by ranges (S3 options from the AWS_* environment variables); a 404 is an IoError naming
/// the URL. Throws as require_url_support() without tensorfile::remote.
[[nodiscard]] std::unique_ptr<RangeReader> open_url_reader(const std::string& url);

}  // namespace tensorfile::cli
