// SPDX-License-Identifier: MIT
/// @file
/// save_torch(): write a Value as a torch.save file (zip format) that torch.load reads, crash-safely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/options.hpp"

namespace tensorfile {

/// Saves `value` to `path` as torch.save does (zip format, pickle protocol 2, one record per
/// distinct storage, so views saved together stay views after torch.load). The file is written
/// beside `path` and renamed over it only when complete (fsync'd unless `.sync = false`): on any
/// error the old file is untouched and no temporary is left. Throws IoError, ArgumentError for
/// values torch cannot hold (one storage seen as two dtypes), DeviceError for device tensors
/// without CUDA support. Refuses with ArgumentError, before anything is written, what load_torch()
/// could not read back: an undefined tensor, a container inside itself, a breach of the limits in
/// SaveOptions::torch (which match LoadLimits'). SaveOptions::format is ignored. A symbolic link `path` is written
/// through (the file it leads to is replaced, the link stays); the new file keeps the replaced file's permission bits,
/// or gets 0666 less the umask.
TENSORFILE_ENTRY void save_torch(const Value& value, const std::filesystem::path& path,
                                 const SaveOptions& options = {});

/// Saves to a stream (archive prefix "archive", as torch.save to a buffer).
TENSORFILE_ENTRY void save_torch(const Value& value, std::ostream& out, const SaveOptions& options = {});

/// Saves to a new byte vector (archive prefix "archive").
[[nodiscard]] TENSORFILE_ENTRY std::vector<std::byte> save_torch_to_bytes(const Value& value,
                                                                          const SaveOptions& options = {});

/// An ordered name -> tensor map as a state_dict: an OrderedDict, with `metadata` (the
/// `_metadata` a loaded state_dict carries in Dict::attributes) kept when given.
[[nodiscard]] TENSORFILE_ENTRY Value make_state_dict(const NamedTensors& tensors, const Value& metadata = {});

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_torch_save)
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/posix/byte_sink.hpp"
#include "tensorfile/detail/posix/random_bits.hpp"
#include "tensorfile/detail/zip/writer.hpp"
#include "tensorfile/formats/torch/detail/pickle_writer.hpp"

namespace tensorfile {

namespace detail {

/// Copies a storage to host memory when it lives on a device (through the CUDA hook when built in).
inline Storage host_bytes_of(const SavedStorage& saved) {
  if (saved.storage.device().is_cpu()) return saved.storage;
  const auto elements = static_cast<std::int64_t>(saved.storage.size_bytes() / element_size(saved.dtype));
  return Tensor(saved.storage, saved.dtype, {elements}).to(Device::cpu()).storage();
}

/// Writes one data/<key> record per storage. Large saves compute the CRC-32s on a second thread,
/// ahead of the writes, so checksumming costs no time beside the I/O.
inline void write_storage_records(ZipWriter& zip, const std::vector<SavedStorage>& storages) {
  std::vector<Storage> hosts;
  hosts.reserve(storages.size());
  std::uint64_t total = 0;
  for (const SavedStorage& saved : storages) {
    hosts.push_back(host_bytes_of(saved));
    total += hosts.back().size_bytes();
  }
  const auto bytes_of = [&](std::size_t i) {
    return std::span<const std::byte>(hosts[i].data(), hosts[i].size_bytes());
  };
  if (total < (std::uint64_t{64} << 20) || hosts.size() < 2) {
    for (std::size_t i = 0; i < hosts.size(); ++i) zip.add("data/" + storages[i].key, bytes_of(i));
    return;
  }
  std::vector<std::uint32_t> crcs(hosts.size());
  std::atomic<std::size_t> ready{0};
  std::atomic<bool> stop{false};
  std::jthread checksummer([&] {
    for (std::size_t i = 0; i < hosts.size() && !stop.load(std::memory_order_relaxed); ++i) {
      crcs[i] = crc32(bytes_of(i));
      ready.store(i + 1, std::memory_order_release);
      ready.notify_one();
    }
  });
  struct StopOnExit {  // on an exception, let the checksummer finish early before it is joined
    std::atomic<bool>& stop;
    ~StopOnExit() { stop.store(true); }
  } stop_on_exit{stop};
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    zip.begin_record("data/" + storages[i].key, hosts[i].size_bytes());
    zip.write_borrowed(bytes_of(i));
    for (std::size_t seen = ready.load(std::memory_order_acquire); seen <= i;
         seen = ready.load(std::memory_order_acquire)) {
      ready.wait(seen, std::memory_order_acquire);
    }
    zip.end_record(crcs[i]);
  }
  zip.flush();  // before `hosts` (device tensors' host copies) goes
}

/// A value pickled and checked, before any byte of its file is written.
struct PreparedArchive {
  PickleWriter pickler;  ///< holds the storages to write
  std::string pickle;    ///< data.pkl
};

/// Pickles `root` and refuses (ArgumentError) what load_torch() with the same limits would refuse.
inline PreparedArchive prepare_torch_archive(const Value& root, const SaveOptions& options) {
  if (options.torch.alignment == 0 || (options.torch.alignment & (options.torch.alignment - 1)) != 0 ||
      options.torch.alignment > 32768) {
    throw ArgumentError("alignment must be a power of two up to 32768; got " + std::to_string(options.torch.alignment));
  }
  PreparedArchive prepared{PickleWriter({.max_depth = options.torch.max_depth,
                                         .max_memo = options.torch.max_memo,
                                         .max_container = options.torch.max_container}),
                           {}};
  prepared.pickle = prepared.pickler.dump(root);
  constexpr std::uint64_t fixed_records = 6;  // data.pkl, the four small ones and .data/serialization_id
  const std::uint64_t records = prepared.pickler.storages().size() + fixed_records;
  if (records > options.torch.max_records) {
    throw ArgumentError(
        "cannot save " + std::to_string(records) + " records (" + std::to_string(prepared.pickler.storages().size()) +
        " storages); expected at most max_records = " + std::to_string(options.torch.max_records) +
        "; raise SaveOptions::torch.max_records and LoadOptions::limits.max_records together to save and load it");
  }
  return prepared;
}

/// Writes the whole archive of a prepared value into `sink`.
inline void write_torch_archive(const PreparedArchive& prepared, ByteSink& sink, const std::string& prefix,
                                const SaveOptions& options) {
  ZipWriter zip(sink, prefix, options.torch.alignment);
  zip.add("data.pkl", prepared.pickle);
  zip.add(".format_version", "1");
  zip.add(".storage_alignment", std::to_string(options.torch.alignment));
  zip.add("byteorder", "little");
  write_storage_records(zip, prepared.pickler.storages());
  zip.add("version", "3\n");
  // Informational in torch; any 40 digits are accepted.
  std::string id;
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = random_bits();
    for (int i = 0; i < 20; ++i, bits /= 10) id.push_back(static_cast<char>('0' + bits % 10));
  }
  zip.add(".data/serialization_id", id);
  zip.finish();
}

}  // namespace detail

TENSORFILE_ENTRY void save_torch(const Value& value, const std::filesystem::path& path, const SaveOptions& options) {
  const detail::PreparedArchive prepared = detail::prepare_torch_archive(value, options);
  detail::AtomicFileSink sink(path, options.sync);
  detail::write_torch_archive(prepared, sink,
                              options.torch.prefix.empty() ? path.stem().string() : options.torch.prefix, options);
  sink.commit();
}

TENSORFILE_ENTRY void save_torch(const Value& value, std::ostream& out, const SaveOptions& options) {
  const detail::PreparedArchive prepared = detail::prepare_torch_archive(value, options);
  detail::StreamSink sink(out);
  detail::write_torch_archive(prepared, sink, options.torch.prefix.empty() ? "archive" : options.torch.prefix, options);
}

TENSORFILE_ENTRY std::vector<std::byte> save_torch_to_bytes(const Value& value, const SaveOptions& options) {
  std::vector<std::byte> out;
  const detail::PreparedArchive prepared = detail::prepare_torch_archive(value, options);
  detail::VectorSink sink(out);
  detail::write_torch_archive(prepared, sink, options.torch.prefix.empty() ? "archive" : options.torch.prefix, options);
  return out;
}

TENSORFILE_ENTRY Value make_state_dict(const NamedTensors& tensors, const Value& metadata) {
  Dict dict;
  dict.ordered = true;
  for (const auto& [name, tensor] : tensors) dict.set(name, tensor);
  if (!metadata.is_none()) {
    Dict attributes;
    attributes.set("_metadata", metadata);
    dict.set_attributes(Value(std::move(attributes)));
  }
  return Value(std::move(dict));
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_torch_save)
