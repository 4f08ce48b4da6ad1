// SPDX-License-Identifier: MIT
/// @file
/// tensorfile::remote::RemoteOptions: how remote objects are fetched (connections, parts, timeouts, retries) and
/// where S3 requests go, with which credentials. The defaults of the S3 fields come from the AWS environment.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <string>

namespace tensorfile::remote {

namespace detail {

/// The first of the environment variables `first`, `second` that is set and not empty, else `fallback`.
[[nodiscard]] inline std::string env_or(const char* first, const char* second, const char* fallback) {
  for (const char* name : {first, second}) {
    if (name == nullptr) continue;
    const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read once, when options are made
    if (value != nullptr && *value != '\0') return value;
  }
  return fallback;
}

}  // namespace detail

/// How remote objects are read; every field has a default (the S3 ones from the AWS environment variables).
struct RemoteOptions {
  std::size_t connections = 8;                       ///< GETs in flight at once for the folder, every read's together
  std::size_t part_size = std::size_t{8} << 20;      ///< bytes per GET a big read is split into
  std::size_t probe_size = std::size_t{64} << 10;    ///< bytes the first GET asks for and keeps (a format's header)
  std::chrono::milliseconds connect_timeout{10000};  ///< limit on connecting (TCP and TLS)
  std::chrono::milliseconds stall_timeout{15000};    ///< a GET slower than stall_bytes_per_second this long fails
  std::size_t stall_bytes_per_second = 1024;         ///< the speed below which a GET counts as stalled
  std::chrono::milliseconds request_timeout{0};      ///< limit on one whole GET; 0: none (the stall limit holds)
  unsigned retries = 4;                              ///< times a failed GET is sent again (5xx, timeout, drop)
  std::chrono::milliseconds retry_backoff{200};      ///< wait before the first retry, doubled for each next one
  bool verify_tls = true;                            ///< check the server's certificate and host name
  std::string region = detail::env_or("AWS_REGION", "AWS_DEFAULT_REGION", "us-east-1");  ///< S3: the region signed
  std::string endpoint = detail::env_or("AWS_ENDPOINT_URL", nullptr, "");        ///< S3: a custom endpoint (path-style)
  std::string access_key_id = detail::env_or("AWS_ACCESS_KEY_ID", nullptr, "");  ///< S3: the key id
  std::string secret_access_key = detail::env_or("AWS_SECRET_ACCESS_KEY", nullptr, "");  ///< S3: the secret
  std::string session_token = detail::env_or("AWS_SESSION_TOKEN", nullptr, "");          ///< S3: a temporary session's
};

}  // namespace tensorfile::remote
