// SPDX-License-Identifier: MIT
/// @file
/// The HTTP layer of tensorfile::remote on libcurl: one client per folder (a share handle pooling connections, DNS
/// and TLS sessions, a pool of easy handles, the byte counters), and ranged GETs run concurrently on a curl multi
/// handle, each written straight into the caller's buffer, retried with backoff and pinned to the object's
/// validator.
#pragma once

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/formats/source.hpp"
#include "tensorfile/remote/options.hpp"

namespace tensorfile::remote::detail {

/// `text` percent-encoded for a URL path: unreserved characters and '/' stay, every other byte becomes %XX.
[[nodiscard]] inline std::string encode_path(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z') || (byte >= '0' && byte <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~' || c == '/') {
      out += c;
    } else {
      out += '%';
      out += hex[byte >> 4U];
      out += hex[byte & 15U];
    }
  }
  return out;
}

/// `text` with its %XX escapes decoded (a malformed escape stays as it is).
[[nodiscard]] inline std::string decode_path(std::string_view text) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const int high = digit(text[i + 1]);
      const int low = digit(text[i + 2]);
      if (high >= 0 && low >= 0) {
        out += static_cast<char>(high * 16 + low);
        i += 2;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

/// What pins one open to one version of an object: its ETag, else its Last-Modified.
struct Validator {
  std::string etag;           ///< as the server sent it, quotes included; empty when none
  std::string last_modified;  ///< the HTTP date; empty when none
};

/// One client per folder: its options, the share handle every request of the folder pools connections through,
/// the idle easy handles, and the counters.
class Client {
 public:
  /// A client for plain HTTP(S), or for S3 (its requests signed with SigV4) when `s3`.
  Client(RemoteOptions options, bool s3) : options_(std::move(options)), s3_(s3) {
    static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);  // once per program, before any handle
    if (init != CURLE_OK) throw IoError(std::string("curl_global_init failed: ") + curl_easy_strerror(init), EIO);
    share_ = curl_share_init();
    if (share_ == nullptr) throw IoError("curl_share_init failed", ENOMEM);
    curl_share_setopt(share_, CURLSHOPT_LOCKFUNC, &Client::lock);
    curl_share_setopt(share_, CURLSHOPT_UNLOCKFUNC, &Client::unlock);
    curl_share_setopt(share_, CURLSHOPT_USERDATA, this);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client() {
    for (CURL* easy : idle_) curl_easy_cleanup(easy);
    curl_share_cleanup(share_);
  }

  [[nodiscard]] const RemoteOptions& options() const noexcept { return options_; }
  [[nodiscard]] CURLSH* share() const noexcept { return share_; }
  [[nodiscard]] bool s3() const noexcept { return s3_; }

  /// An easy handle, reset, from the idle ones or new.
  [[nodiscard]] CURL* take() {
    {
      const std::lock_guard<std::mutex> guard(idle_mutex_);
      if (!idle_.empty()) {
        CURL* easy = idle_.back();
        idle_.pop_back();
        curl_easy_reset(easy);
        return easy;
      }
    }
    CURL* easy = curl_easy_init();
    if (easy == nullptr) throw IoError("curl_easy_init failed", ENOMEM);
    return easy;
  }
  /// Returns an easy handle to the idle ones.
  void give(CURL* easy) {
    const std::lock_guard<std::mutex> guard(idle_mutex_);
    idle_.push_back(easy);
  }

  /// One of the folder's `connections` slots for a GET in flight, if one is free: the cap holds across every read
  /// of the folder's files, whichever threads run them.
  [[nodiscard]] bool try_take_slot() {
    const std::lock_guard<std::mutex> guard(slots_mutex_);
    if (slots_in_use_ >= std::max<std::size_t>(1, options_.connections)) return false;
    ++slots_in_use_;
    return true;
  }
  /// Frees a slot try_take_slot() gave.
  void give_slot() {
    {
      const std::lock_guard<std::mutex> guard(slots_mutex_);
      --slots_in_use_;
    }
    slot_freed_.notify_all();
  }
  /// Waits up to `wait` for a slot to be freed (a read with nothing in flight has nothing else to wait on).
  void wait_for_slot(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(slots_mutex_);
    slot_freed_.wait_for(lock, wait, [&] { return slots_in_use_ < std::max<std::size_t>(1, options_.connections); });
  }

  std::atomic<std::uint64_t> bytes{0};     ///< body bytes received
  std::atomic<std::uint64_t> requests{0};  ///< GETs sent, retries included
  std::atomic<std::uint64_t> retries{0};   ///< GETs sent again after a failure

 private:
  static void lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<Client*>(self)->locks_[static_cast<std::size_t>(data) % lock_count].lock();
  }
  static void unlock(CURL*, curl_lock_data data, void* self) {
    static_cast<Client*>(self)->locks_[static_cast<std::size_t>(data) % lock_count].unlock();
  }

  static constexpr std::size_t lock_count = CURL_LOCK_DATA_LAST;
  RemoteOptions options_;
  bool s3_ = false;
  CURLSH* share_ = nullptr;
  std::mutex locks_[lock_count];
  std::mutex idle_mutex_;
  std::vector<CURL*> idle_;
  std::mutex slots_mutex_;
  std::condition_variable slot_freed_;
  std::size_t slots_in_use_ = 0;
};

/// One ranged GET: bytes [begin, end) of the object into `out`, resumed from `begin + done` when retried.
struct Transfer {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::byte* out = nullptr;
  std::uint64_t done = 0;
  unsigned attempts = 0;
  bool probe = false;  // the first GET of an object: unpinned, its 404 no error
  Client* client = nullptr;
  const Validator* pinned = nullptr;
  std::chrono::steady_clock::time_point not_before{};
  // The response being received.
  long status = 0;
  Validator seen;
  std::optional<std::uint64_t> total;  // from Content-Range's "/N", or a 200's Content-Length
  std::optional<std::uint64_t> first;  // a 206's first byte, from Content-Range
  std::string error_body;              // the start of an error response (S3 names its error there)
  bool changed = false;                // the validator differs from the pinned one
  bool overflow = false;               // the server sent more than asked
  bool enough = false;                 // a 200 from byte 0 gave every byte asked for; the rest is not wanted
  bool misplaced = false;              // the body does not start where the range asked (no ranges, wrong range)
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  char error_text[CURL_ERROR_SIZE] = {};
};

/// The value of header `line` when it is `name` (lower-case, with its colon), trimmed; nullopt otherwise.
[[nodiscard]] inline std::optional<std::string> header_value(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return std::nullopt;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = line[i];
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != name[i]) return std::nullopt;
  }
  std::string_view value = line.substr(name.size());
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
    value.remove_suffix(1);
  return std::string(value);
}

/// A decimal number that fits in 64 bits, else nullopt.
[[nodiscard]] inline std::optional<std::uint64_t> parse_u64(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value;
}

/// The requests of one read (or a probe) of one object, run on one multi handle.
class Batch {
 public:
  Batch(Client& client, std::string url, std::string name, const Validator* pinned)
      : client_(client), url_(std::move(url)), name_(std::move(name)), pinned_(pinned) {
    multi_ = curl_multi_init();
    if (multi_ == nullptr) throw IoError("curl_multi_init failed", ENOMEM, {.file = name_});
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch() {
    for (Transfer& transfer : transfers_) release(transfer);
    curl_multi_cleanup(multi_);
  }

  /// Adds the GET of bytes [begin, end) into `out` (end - begin bytes).
  void add(std::uint64_t begin, std::uint64_t end, std::byte* out, bool probe = false) {
    Transfer& transfer = transfers_.emplace_back();
    transfer.begin = begin;
    transfer.end = end;
    transfer.out = out;
    transfer.probe = probe;
    transfer.client = &client_;
    transfer.pinned = pinned_;
  }

  /// The transfers, finished once run() returned.
  [[nodiscard]] std::deque<Transfer>& transfers() noexcept { return transfers_; }

  /// Runs every transfer to its end, each while it holds one of the client's `connections` slots; the first failure
  /// that retries do not cure is thrown, after every transfer stopped. A probe's 404 is no error: run() returns
  /// false for it.
  bool run() {
    std::deque<Transfer*> waiting;
    for (Transfer& transfer : transfers_) waiting.push_back(&transfer);
    std::size_t active = 0;
    bool found = true;
    while (!waiting.empty() || active != 0) {
      const auto now = std::chrono::steady_clock::now();
      auto next = now + std::chrono::milliseconds(100);
      bool slots_left = true;
      for (auto it = waiting.begin(); it != waiting.end() && slots_left;) {
        if ((*it)->not_before <= now) {
          if (!client_.try_take_slot()) {
            slots_left = false;
            break;
          }
          try {
            start(**it);
          } catch (...) {
            if ((*it)->easy == nullptr) client_.give_slot();  // else release() gives it back
            throw;
          }
          ++active;
          it = waiting.erase(it);
        } else {
          next = std::min(next, (*it)->not_before);
          ++it;
        }
      }
      int running = 0;
      if (const CURLMcode code = curl_multi_perform(multi_, &running); code != CURLM_OK) {
        throw IoError(std::string("curl_multi_perform failed: ") + curl_multi_strerror(code), EIO, {.file = name_});
      }
      int queued = 0;
      while (CURLMsg* message = curl_multi_info_read(multi_, &queued)) {
        if (message->msg != CURLMSG_DONE) continue;
        Transfer* transfer = nullptr;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &transfer);
        const CURLcode result = message->data.result;
        curl_easy_getinfo(transfer->easy, CURLINFO_RESPONSE_CODE, &transfer->status);
        curl_multi_remove_handle(multi_, transfer->easy);
        --active;
        switch (finish(*transfer, result)) {
          case Outcome::done: release(*transfer); break;
          case Outcome::not_found:
            release(*transfer);
            found = false;
            break;
          case Outcome::retry:
            release(*transfer);
            waiting.push_back(transfer);
            break;
        }
      }
      if (waiting.empty() && active == 0) break;
      // A transfer due: start it now if a slot is free rather than wait on the others.
      const auto due = std::chrono::steady_clock::now();
      const bool any_due =
          std::any_of(waiting.begin(), waiting.end(), [&](const Transfer* t) { return t->not_before <= due; });
      if (any_due && active == 0) {  // every slot held by other reads of the folder: wait for one of theirs
        client_.wait_for_slot(std::chrono::milliseconds(100));
        continue;
      }
      if (any_due && slots_left) continue;
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
      const int wait_ms = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(wait.count(), 0, 100));
      if (active != 0 || wait_ms > 0) {
        curl_multi_poll(multi_, nullptr, 0, wait_ms, nullptr);  // nothing in flight: sleeps until the backoff ends
      }
    }
    return found;
  }

 private:
  enum class Outcome : std::uint8_t { done, not_found, retry };

  void start(Transfer& transfer) {
    const RemoteOptions& options = client_.options();
    transfer.easy = client_.take();
    CURL* easy = transfer.easy;
    transfer.status = 0;
    transfer.seen = {};
    transfer.total.reset();
    transfer.error_body.clear();
    transfer.first.reset();
    transfer.enough = false;
    transfer.error_text[0] = '\0';
    const std::uint64_t from = transfer.begin + transfer.done;
    const std::string range = std::to_string(from) + "-" + std::to_string(transfer.end - 1);
    curl_easy_setopt(easy, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(easy, CURLOPT_SHARE, client_.share());
    curl_easy_setopt(easy, CURLOPT_PRIVATE, &transfer);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_RANGE, range.c_str());  // copied by libcurl
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, transfer.error_text);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(options.request_timeout.count()));
    const auto stall_s =
        std::max<std::chrono::seconds::rep>(1, std::chrono::ceil<std::chrono::seconds>(options.stall_timeout).count());
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(options.stall_bytes_per_second));
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, static_cast<long>(stall_s));
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "tensorfile-remote");
    curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 256L * 1024);  // fewer, larger copies than the 16 KiB default
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &Batch::on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Batch::on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
    curl_slist* headers = nullptr;
    if (pinned_ != nullptr) {
      // A strong ETag pins by If-Match; a weak one cannot (If-Match compares strongly), so the date pins it.
      if (!pinned_->etag.empty() && !pinned_->etag.starts_with("W/")) {
        headers = curl_slist_append(headers, ("If-Match: " + pinned_->etag).c_str());
      } else if (!pinned_->last_modified.empty()) {
        headers = curl_slist_append(headers, ("If-Unmodified-Since: " + pinned_->last_modified).c_str());
      }
    }
    if (client_.s3()) {
      const std::string sigv4 = "aws:amz:" + options.region + ":s3";
      curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(easy, CURLOPT_USERNAME, options.access_key_id.c_str());
      curl_easy_setopt(easy, CURLOPT_PASSWORD, options.secret_access_key.c_str());
      // S3 wants the payload's hash; a GET has none, and the empty string's SHA-256 is what it signs.
      headers = curl_slist_append(
          headers, "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
      if (!options.session_token.empty()) {
        headers = curl_slist_append(headers, ("x-amz-security-token: " + options.session_token).c_str());
      }
    }
    transfer.headers = headers;
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    ++transfer.attempts;
    client_.requests.fetch_add(1, std::memory_order_relaxed);
    if (const CURLMcode code = curl_multi_add_handle(multi_, easy); code != CURLM_OK) {
      throw IoError(std::string("curl_multi_add_handle failed: ") + curl_multi_strerror(code), EIO, {.file = name_});
    }
  }

  void release(Transfer& transfer) {
    if (transfer.easy != nullptr) {  // a started transfer: it holds a slot
      curl_multi_remove_handle(multi_, transfer.easy);
      curl_easy_setopt(transfer.easy, CURLOPT_HTTPHEADER, nullptr);
      client_.give(transfer.easy);
      transfer.easy = nullptr;
      client_.give_slot();
    }
    curl_slist_free_all(transfer.headers);
    transfer.headers = nullptr;
  }

  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto& transfer = *static_cast<Transfer*>(user);
    const std::string_view line(data, size * count);
    if (line.starts_with("HTTP/")) {  // a new response (after a redirect or a 100): its headers start over
      transfer.seen = {};
      transfer.total.reset();
      transfer.first.reset();
      const std::size_t space = line.find(' ');
      const std::optional<std::uint64_t> status =
          space == std::string_view::npos ? std::nullopt : parse_u64(line.substr(space + 1, 3));
      transfer.status = status ? static_cast<long>(*status) : 0;
    } else if (std::optional<std::string> etag = header_value(line, "etag:")) {
      transfer.seen.etag = std::move(*etag);
    } else if (std::optional<std::string> date = header_value(line, "last-modified:")) {
      transfer.seen.last_modified = std::move(*date);
    } else if (std::optional<std::string> range = header_value(line, "content-range:")) {
      const std::string_view text(*range);
      if (const std::size_t slash = text.rfind('/'); slash != std::string_view::npos) {
        transfer.total = parse_u64(text.substr(slash + 1));
      }
      if (text.starts_with("bytes ")) {
        const std::size_t dash = text.find('-');
        if (dash != std::string_view::npos) transfer.first = parse_u64(text.substr(6, dash - 6));
      }
    } else if (std::optional<std::string> length = header_value(line, "content-length:")) {
      if (transfer.status == 200) transfer.total = parse_u64(*length);
    }
    return size * count;
  }

  [[nodiscard]] static bool same_version(const Transfer& transfer) {
    const Validator* pinned = transfer.pinned;
    if (pinned == nullptr) return true;
    if (!pinned->etag.empty()) return transfer.seen.etag == pinned->etag;
    return transfer.seen.last_modified == pinned->last_modified;
  }

  // Body bytes go straight to their place in the caller's buffer; an error response's body is kept (its start)
  // for the message. Returning less than `n` stops the transfer.
  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto& transfer = *static_cast<Transfer*>(user);
    const std::size_t n = size * count;
    if (transfer.status < 200 || transfer.status > 299) {
      const std::size_t keep = std::min<std::size_t>(n, 1024 - std::min<std::size_t>(1024, transfer.error_body.size()));
      transfer.error_body.append(data, keep);
      return n;
    }
    if (!same_version(transfer)) {
      transfer.changed = true;
      return 0;
    }
    const std::uint64_t from = transfer.begin + transfer.done;
    if ((transfer.status == 206 && transfer.first != from) || (transfer.status == 200 && from != 0) ||
        (transfer.status != 200 && transfer.status != 206)) {
      transfer.misplaced = true;
      return 0;
    }
    const std::uint64_t room = transfer.end - from;
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(room, n));
    std::memcpy(transfer.out + transfer.done, data, take);
    transfer.done += take;
    transfer.first = transfer.begin + transfer.done;  // the next chunk continues here
    transfer.client->bytes.fetch_add(take, std::memory_order_relaxed);
    if (take < n) {
      if (transfer.status == 200) {
        transfer.enough = true;  // a whole object sent from byte 0: what was asked is in
      } else {
        transfer.overflow = true;
      }
      return 0;
    }
    return n;
  }

  [[nodiscard]] std::string what_range(const Transfer& transfer) const {
    return "bytes " + std::to_string(transfer.begin) + "-" + std::to_string(transfer.end - 1);
  }

  [[noreturn]] void throw_changed(const Transfer& transfer) const {
    const bool by_etag = pinned_ != nullptr && !pinned_->etag.empty();
    const std::string expected =
        pinned_ == nullptr ? std::string() : (by_etag ? pinned_->etag : pinned_->last_modified);
    const std::string got = transfer.status == 412 ? std::string("HTTP 412 Precondition Failed")
                                                   : (by_etag ? transfer.seen.etag : transfer.seen.last_modified);
    throw FormatError("the object changed during the load; expected " +
                          std::string(by_etag ? "ETag " : "Last-Modified ") + expected + ", got " +
                          (got.empty() ? std::string("none") : got),
                      {.file = name_, .offset = transfer.begin + transfer.done});
  }

  Outcome finish(Transfer& transfer, CURLcode result) {
    const std::uint64_t at = transfer.begin + transfer.done;
    if (transfer.changed || transfer.status == 412) throw_changed(transfer);
    if (transfer.overflow) {
      throw FormatError("the server sent more bytes than the range asked for; expected " +
                            std::to_string(transfer.end - transfer.begin),
                        {.file = name_, .offset = at});
    }
    if (transfer.misplaced) {
      throw FormatError("the server answered HTTP " + std::to_string(transfer.status) +
                            " with bytes from elsewhere; expected HTTP 206 with " + what_range(transfer) +
                            " (a server that serves byte ranges)",
                        {.file = name_, .offset = at});
    }
    std::string reason;
    int error_number = EIO;
    if (result == CURLE_OK || (result == CURLE_WRITE_ERROR && transfer.enough)) {
      const long status = transfer.status;
      if (status == 200 || status == 206) {
        if (transfer.enough || transfer.done == transfer.end - transfer.begin) return Outcome::done;
        if (transfer.probe && transfer.total && at == *transfer.total) return Outcome::done;  // a small object
        if (transfer.total && at >= *transfer.total) {
          throw FormatError(
              "the object ends at byte " + std::to_string(*transfer.total) + "; expected " + what_range(transfer),
              {.file = name_, .offset = at});
        }
        reason = "the body ended after " + std::to_string(transfer.done) + " of " +
                 std::to_string(transfer.end - transfer.begin) + " bytes";
      } else if (status == 404) {
        if (transfer.probe) return Outcome::not_found;
        throw IoError("the object is gone (HTTP 404 Not Found)", ENOENT, {.file = name_});
      } else if (status == 401 || status == 403) {
        std::string code;
        if (const std::size_t open = transfer.error_body.find("<Code>"); open != std::string::npos) {
          const std::size_t close = transfer.error_body.find("</Code>", open);
          if (close != std::string::npos) code = ", " + transfer.error_body.substr(open + 6, close - open - 6);
        }
        throw IoError("access denied (HTTP " + std::to_string(status) + code + ")", EACCES, {.file = name_});
      } else if (status == 416 && transfer.probe && transfer.total == 0) {
        return Outcome::done;  // an empty object: no byte to give
      } else if (status == 408 || status == 429 || (status >= 500 && status <= 599)) {
        reason = "HTTP " + std::to_string(status);
      } else {
        throw IoError("unexpected HTTP " + std::to_string(status) + "; expected 206 with " + what_range(transfer), EIO,
                      {.file = name_});
      }
    } else {
      switch (result) {
        case CURLE_OPERATION_TIMEDOUT:
          error_number = ETIMEDOUT;
          reason = "timed out";
          break;
        case CURLE_COULDNT_CONNECT:
          error_number = ECONNREFUSED;
          reason = "could not connect";
          break;
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_PARTIAL_FILE:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_SSL_CONNECT_ERROR:
          error_number = ECONNRESET;
          reason = "connection dropped";
          break;
        default:
          throw IoError(std::string(curl_easy_strerror(result)) +
                            (transfer.error_text[0] != '\0' ? std::string(" (") + transfer.error_text + ")" : ""),
                        EIO, {.file = name_, .offset = at});
      }
      reason +=
          " after " + std::to_string(transfer.done) + " of " + std::to_string(transfer.end - transfer.begin) + " bytes";
    }
    const RemoteOptions& options = client_.options();
    if (transfer.attempts > options.retries) {
      throw IoError("GET of " + what_range(transfer) + " failed " + std::to_string(transfer.attempts) +
                        " times, the last: " + reason,
                    error_number, {.file = name_, .offset = at});
    }
    const unsigned shift = std::min(transfer.attempts - 1, 16U);
    const auto backoff =
        std::min<std::chrono::milliseconds>(options.retry_backoff * (1LL << shift), std::chrono::milliseconds(10000));
    transfer.not_before = std::chrono::steady_clock::now() + backoff;
    client_.retries.fetch_add(1, std::memory_order_relaxed);
    return Outcome::retry;
  }

  Client& client_;
  std::string url_;
  std::string name_;
  const Validator* pinned_;
  CURLM* multi_ = nullptr;
  std::deque<Transfer> transfers_;  // a deque: the addresses the callbacks hold stay put
};

}  // namespace tensorfile::remote::detail
