// SPDX-License-Identifier: MIT
// A load over HTTP (or S3) against its floors, in one run: `curl -o /dev/null` of the same URL (one stream), a load
// of the same file from local disk (warm cache), then tensorfile's loads with one connection and with several, and
// a select of one tensor (the bytes it fetched against the object's size). A program, not a test.
//
// usage: bench_remote URL LOCAL_FILE [CONNECTIONS [REPEATS]]    URL: the LOCAL_FILE as a server serves it (http(s)://
// or s3://bucket/key, with the AWS_* variables the library reads: AWS_ENDPOINT_URL for an S3-compatible server)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "tensorfile/remote.hpp"
#include "tensorfile/tensorfile.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

long peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

// The environment variable `name`, or "" when unset.
std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// curl's own download of the URL to /dev/null: the wall time of the process, best of `repeats`. An s3:// URL is
// fetched path-style from AWS_ENDPOINT_URL, signed by curl's --aws-sigv4 with AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_REGION (us-east-1 when unset), as the library signs its requests.
double curl_seconds(const std::string& url, int repeats) {
  std::string command = "curl -sSf -o /dev/null '" + url + "'";
  if (url.starts_with("s3://")) {
    const std::string region = environment("AWS_REGION").empty() ? "us-east-1" : environment("AWS_REGION");
    command = "curl -sSf -o /dev/null --aws-sigv4 'aws:amz:" + region + ":s3' --user '" +
              environment("AWS_ACCESS_KEY_ID") + ":" + environment("AWS_SECRET_ACCESS_KEY") +
              "' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' '" + environment("AWS_ENDPOINT_URL") + "/" +
              url.substr(5) + "'";
  }
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    if (std::system(command.c_str()) != 0) {  // NOLINT(cert-env33-c): the benchmark's floor is curl itself
      std::fprintf(stderr, "bench_remote: %s failed\n", command.c_str());
      std::exit(1);
    }
    best = std::min(best, seconds_since(start));
  }
  return best;
}

struct Run {
  double seconds = 1e30;
  tensorfile::remote::RemoteStats stats{};
};

// tensorfile's load of `name` in the folder `base` with `connections`, best of `repeats` (a fresh pool each).
Run remote_load(const std::string& base, const std::string& name, std::size_t connections, int repeats) {
  Run best;
  for (int i = 0; i < repeats; ++i) {
    const auto folder = tensorfile::remote::open_folder(base, {.connections = connections});
    const auto start = Clock::now();
    const tensorfile::Value loaded = tensorfile::load(tensorfile::Source::folder(*folder, name));
    const double took = seconds_since(start);
    if (took < best.seconds) best = {took, folder->stats()};
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_remote URL LOCAL_FILE [CONNECTIONS [REPEATS]]\n");
    return 2;
  }
  const std::string url = argv[1];
  const std::filesystem::path local = argv[2];
  const std::size_t connections = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 8;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 3;
  const std::size_t slash = url.rfind('/');
  const std::string base = url.substr(0, slash);
  const std::string name = url.substr(slash + 1);
  const double size_mb = static_cast<double>(std::filesystem::file_size(local)) / 1e6;
  try {
    const double curl = curl_seconds(url, repeats);
    double local_best = 1e30;
    for (int i = 0; i < repeats; ++i) {
      const auto start = Clock::now();
      const tensorfile::Value loaded = tensorfile::load(local);
      local_best = std::min(local_best, seconds_since(start));
    }
    const Run one = remote_load(base, name, 1, repeats);
    const Run many = remote_load(base, name, connections, repeats);

    const auto folder = tensorfile::remote::open_folder(base);
    const tensorfile::Checkpoint opened = tensorfile::open(tensorfile::Source::folder(*folder, name));
    const std::size_t count = opened.entries().size();
    const std::string middle = opened.entries()[count / 2].path;
    const tensorfile::remote::RemoteStats before = folder->stats();
    const auto start = Clock::now();
    const tensorfile::Tensor tensor = opened.tensor(middle);
    const double select_s = seconds_since(start);
    const tensorfile::remote::RemoteStats after = folder->stats();

    std::printf("object: %s, %.1f MB, %zu tensors\n", url.c_str(), size_mb, count);
    std::printf("%-34s %9s %9s %10s %9s\n", "run", "seconds", "MB/s", "vs curl", "GETs");
    std::printf("%-34s %9.3f %9.0f %9.0f%% %9s\n", "curl -o /dev/null (1 stream)", curl, size_mb / curl, 100.0, "1");
    std::printf("%-34s %9.3f %9.0f %9.0f%% %9s\n", "tensorfile load, local file (warm)", local_best,
                size_mb / local_best, 100.0 * curl / local_best, "-");
    std::printf("%-34s %9.3f %9.0f %9.0f%% %9llu\n", "tensorfile load, 1 connection", one.seconds,
                size_mb / one.seconds, 100.0 * curl / one.seconds, static_cast<unsigned long long>(one.stats.requests));
    const std::string label = "tensorfile load, " + std::to_string(connections) + " connections";
    std::printf("%-34s %9.3f %9.0f %9.0f%% %9llu\n", label.c_str(), many.seconds, size_mb / many.seconds,
                100.0 * curl / many.seconds, static_cast<unsigned long long>(many.stats.requests));
    std::printf(
        "select 1 of %zu tensors (%s): %.3f s, %llu bytes fetched = %.4f%% of the object (open included: "
        "%llu bytes)\n",
        count, middle.c_str(), select_s, static_cast<unsigned long long>(after.bytes - before.bytes),
        100.0 * static_cast<double>(after.bytes - before.bytes) / (size_mb * 1e6),
        static_cast<unsigned long long>(after.bytes));
    std::printf("bytes fetched by a whole load: %llu (object %.0f)\n",
                static_cast<unsigned long long>(many.stats.bytes), size_mb * 1e6);
    std::printf("peak RSS: %ld MiB\n", peak_rss_mib());
    (void)tensor;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_remote: %s\n", error.what());
    return 1;
  }
  return 0;
}
