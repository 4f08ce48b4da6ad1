// SPDX-License-Identifier: MIT
/// @file
/// Checkpoints over HTTP(S) and S3 (CMake target tensorfile::remote, on libcurl). Including this header lets
/// tensorfile::open() and load() take URLs: `open("https://host/dir/model.safetensors")`,
/// `open("s3://bucket/key")`, the URL of a sharded index (its shards fetched beside it) or of a model folder
/// (ending in '/'). Reads are ranged GETs, several in flight, pinned to the object's ETag (else Last-Modified) so
/// that an object replaced during a load is an error, never a mix; failed GETs are retried with backoff. For
/// options, open a folder with open_folder() and pass Source::folder(*folder, "model.safetensors").
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/formats/source.hpp"
#include "tensorfile/remote/detail/http.hpp"
#include "tensorfile/remote/options.hpp"

namespace tensorfile::remote {

/// What a folder's (or a file's) requests have cost so far; read by tests and benchmarks.
struct RemoteStats {
  std::uint64_t bytes = 0;     ///< body bytes received
  std::uint64_t requests = 0;  ///< GETs sent, retries included
  std::uint64_t retries = 0;   ///< GETs sent again after a failure
};

/// One remote object read by ranges, pinned to the version its first GET saw. read() is thread-safe; each call
/// splits a read bigger than part_size into parts fetched `connections` at a time straight into the buffer.
class RemoteFile final : public RangeReader {
 public:
  /// Reads up to out.size() bytes at `offset` (fewer only at the object's end); errors are IoError (network,
  /// HTTP status) or FormatError (a changed object, a short or misplaced body), naming the URL.
  [[nodiscard]] std::size_t read(std::uint64_t offset, std::span<std::byte> out) override {
    if (offset >= size_ || out.empty()) return 0;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), size_ - offset));
    std::size_t done = 0;
    if (offset < head_.size()) {  // the probe's bytes: no request
      done = std::min<std::size_t>(n, head_.size() - static_cast<std::size_t>(offset));
      std::memcpy(out.data(), head_.data() + offset, done);
    }
    if (done == n) return n;
    remote::detail::Batch batch(*client_, url_, name_, &pinned_);
    const std::uint64_t part = std::max<std::size_t>(client_->options().part_size, 1);
    for (std::uint64_t at = done; at < n; at += part) {
      const std::uint64_t length = std::min<std::uint64_t>(part, n - at);
      batch.add(offset + at, offset + at + length, out.data() + at);
    }
    batch.run();
    return n;
  }
  /// The object's size, from its first GET.
  [[nodiscard]] std::optional<std::uint64_t> size() const override { return size_; }
  /// The URL (an s3:// one for S3), without its query.
  [[nodiscard]] std::string name() const override { return name_; }
  /// The ETag the reads are pinned to (empty when the server sent none).
  [[nodiscard]] const std::string& etag() const noexcept { return pinned_.etag; }
  /// The Last-Modified date the reads are pinned to when there is no ETag (empty when none).
  [[nodiscard]] const std::string& last_modified() const noexcept { return pinned_.last_modified; }
  /// The counters of the folder (the connection pool) this file reads through.
  [[nodiscard]] RemoteStats stats() const noexcept {
    return {client_->bytes.load(), client_->requests.load(), client_->retries.load()};
  }

  /// The object at `url` (HTTP(S), already mapped from s3://) named `name`, read through `client`; nullptr
  /// when the server answers 404. Its first GET asks for probe_size bytes and keeps them.
  [[nodiscard]] static std::unique_ptr<RemoteFile> open(std::shared_ptr<remote::detail::Client> client, std::string url,
                                                        std::string name) {
    std::unique_ptr<RemoteFile> file(new RemoteFile(std::move(client), std::move(url), std::move(name)));
    const std::size_t probe = std::max<std::size_t>(file->client_->options().probe_size, 1);
    std::vector<std::byte> head(probe);
    remote::detail::Batch batch(*file->client_, file->url_, file->name_, nullptr);
    batch.add(0, probe, head.data(), true);
    if (!batch.run()) return nullptr;
    const remote::detail::Transfer& first = batch.transfers().front();
    if (!first.total) {
      throw FormatError("the response names no size; expected Content-Range: bytes 0-N/size or Content-Length",
                        {.file = file->name_});
    }
    file->size_ = *first.total;
    file->pinned_ = first.seen;
    head.resize(static_cast<std::size_t>(std::min<std::uint64_t>(first.done, file->size_)));
    file->head_ = std::move(head);
    return file;
  }

 private:
  RemoteFile(std::shared_ptr<remote::detail::Client> client, std::string url, std::string name)
      : client_(std::move(client)), url_(std::move(url)), name_(std::move(name)) {}

  std::shared_ptr<remote::detail::Client> client_;  // shared: the file outlives the folder if it must
  std::string url_;
  std::string name_;
  std::uint64_t size_ = 0;
  remote::detail::Validator pinned_;
  std::vector<std::byte> head_;
};

namespace detail {
/// The ArgumentError of an s3:// URL with a query, named `name` (redacted).
[[noreturn]] inline void refuse_s3_query(const std::string& name) {
  throw ArgumentError(
      "an s3:// URL takes no query (its requests are signed from the credentials); expected s3://bucket/key, or "
      "the https:// URL of a presigned object",
      {.file = name});
}
}  // namespace detail

/// A remote folder (an HTTP(S) base URL or an S3 prefix) whose files share one connection pool and counters.
/// It cannot be listed (list() is nullopt), so tensordict trees skip the undeclared-subdirectory check.
class RemoteFolder final : public FolderReader {
 public:
  /// The folder at `url` (http://, https:// or s3://; a trailing '/' is dropped) fetched with `options`. An
  /// HTTP(S) URL's query (a presigned URL's signature, a hub's `?download=true`) is sent with every file's GET;
  /// an s3:// URL takes none (an ArgumentError: the requests are signed from the credentials).
  RemoteFolder(std::string url, RemoteOptions options) {
    if (const std::size_t query = url.find('?'); query != std::string::npos) {
      query_ = url.substr(query);
      url.resize(query);
    }
    while (url.ends_with('/')) url.pop_back();
    name_ = redacted_url(url);
    const bool s3 = url.starts_with("s3://");
    if (s3) {
      if (!query_.empty()) detail::refuse_s3_query(name_);
      const std::string rest = url.substr(5);
      const std::size_t slash = rest.find('/');
      const std::string bucket = rest.substr(0, slash);
      const std::string key = slash == std::string::npos ? std::string() : rest.substr(slash);
      if (bucket.empty()) throw ArgumentError("the S3 URL names no bucket; expected s3://bucket/key", {.file = url});
      std::string endpoint = options.endpoint;
      while (endpoint.ends_with('/')) endpoint.pop_back();
      // A custom endpoint (MinIO, a local server) is addressed path-style; AWS itself virtual-hosted.
      base_ = endpoint.empty() ? "https://" + bucket + ".s3." + options.region + ".amazonaws.com" + key
                               : endpoint + "/" + bucket + key;
    } else if (url.starts_with("http://") || url.starts_with("https://")) {
      base_ = url;
    } else {
      throw ArgumentError("not a URL this reader takes; expected http://, https:// or s3://", {.file = name_});
    }
    client_ = std::make_shared<remote::detail::Client>(std::move(options), s3);
  }

  /// The file `relative` ('/'-separated, percent-encoded here), or nullptr when the server answers 404.
  [[nodiscard]] std::unique_ptr<RangeReader> open(const std::string& relative) override { return open_file(relative); }
  /// open(), typed: the RemoteFile with its validator and counters.
  [[nodiscard]] std::unique_ptr<RemoteFile> open_file(const std::string& relative) {
    return RemoteFile::open(client_, base_ + "/" + remote::detail::encode_path(relative) + query_,
                            name_ + "/" + relative);
  }
  /// The URL, without a query.
  [[nodiscard]] std::string name() const override { return name_; }
  /// What the folder's requests have cost so far (every file opened from it).
  [[nodiscard]] RemoteStats stats() const noexcept {
    return {client_->bytes.load(), client_->requests.load(), client_->retries.load()};
  }
  /// The options the folder fetches with.
  [[nodiscard]] const RemoteOptions& options() const noexcept { return client_->options(); }

 private:
  std::string name_;
  std::string base_;   // the HTTP(S) URL files are appended to
  std::string query_;  // "?..." sent with every file's URL, never shown in messages
  std::shared_ptr<remote::detail::Client> client_;
};

/// The folder at `url` (http://, https:// or s3://), shared so that a Checkpoint or the caller can keep it; open
/// its files with open(Source::folder(*folder, "model.safetensors"), ...).
[[nodiscard]] inline std::shared_ptr<RemoteFolder> open_folder(const std::string& url, RemoteOptions options = {}) {
  return std::make_shared<RemoteFolder>(url, std::move(options));
}

namespace detail {
[[nodiscard]] inline std::pair<std::string, std::string> split_url(const std::string& url);
}  // namespace detail

/// The one object at `url` (http://, https:// or s3://, its path naming a file), read by ranges with `options`
/// through a connection pool of its own: a RangeReader for the APIs that take one (verify(), scan(),
/// Source::reader()). A 404 is an IoError (ENOENT) and a URL ending in '/' an ArgumentError, both naming the URL
/// as redacted_url() gives it; the first GET's other errors as RemoteFile::read()'s.
[[nodiscard]] inline std::unique_ptr<RemoteFile> open_file(const std::string& url, RemoteOptions options = {}) {
  const auto [folder, file] = detail::split_url(url);
  if (file.empty()) {
    throw ArgumentError("the URL names a folder; expected the URL of a file", {.file = redacted_url(url)});
  }
  std::unique_ptr<RemoteFile> opened = RemoteFolder(folder, std::move(options)).open_file(file);
  if (!opened) throw IoError("not found (HTTP 404)", ENOENT, {.file = redacted_url(url)});
  return opened;
}

namespace detail {

/// A URL split into its folder (up to the last '/' of its path, followed by the URL's query if any) and the file it
/// names (percent-decoded; "" for a URL ending in '/' or naming only a host or bucket).
[[nodiscard]] inline std::pair<std::string, std::string> split_url(const std::string& url) {
  const std::size_t query = url.find('?');
  if (query != std::string::npos && url.starts_with("s3://")) refuse_s3_query(redacted_url(url));
  const std::size_t scheme = url.find("://");
  const std::size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  const std::size_t slash = url.rfind('/', query == std::string::npos ? std::string::npos : query);
  if (slash == std::string::npos || slash < start || url.find('/', start) == std::string::npos) return {url, ""};
  std::string file = url.substr(slash + 1);
  if (query == std::string::npos) return {url.substr(0, slash), decode_path(file)};
  file = file.substr(0, file.find('?'));
  return {url.substr(0, slash) + url.substr(query), decode_path(file)};
}

/// The URL's folder (default options) and the file it names ("": a model folder).
[[nodiscard]] inline tensorfile::detail::UrlFolder open_url(const std::string& url) {
  auto [folder, file] = split_url(url);
  return {open_folder(folder), std::move(file)};
}

/// Registers open_url() with the core when any translation unit includes this header.
inline const bool url_opener_registered = [] {
  tensorfile::detail::url_opener() = &open_url;
  return true;
}();

}  // namespace detail

}  // namespace tensorfile::remote
