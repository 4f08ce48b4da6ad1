// SPDX-License-Identifier: MIT
// The plugin's two entry points (the only symbols it exports), and the dict both modules make and search, each
// with its own copy of the code.
#pragma once

#include <tensorfile/core/value.hpp>

#include <cstdint>
#include <string>

#define TENSORFILE_PLUGIN_API __attribute__((visibility("default")))

/// A dict of `count` str keys "k0", "k1", ... and as many int keys 1000, 1001, ..., each to its number.
inline tensorfile::Value make_keyed_dict(int count) {
  tensorfile::Dict dict;
  for (int i = 0; i < count; ++i) {
    dict.set("k" + std::to_string(i), tensorfile::Value(std::int64_t{i}));
    dict.set(tensorfile::Value(std::int64_t{1000 + i}), tensorfile::Value(std::int64_t{i}));
  }
  return tensorfile::Value(std::move(dict));
}

/// Whether every key of make_keyed_dict(count) is found in `dict`, with its number.
inline bool finds_every_key(const tensorfile::Value& dict, int count) {
  for (int i = 0; i < count; ++i) {
    const tensorfile::Value* by_name = dict.as_dict().find(std::string_view("k" + std::to_string(i)));
    const tensorfile::Value* by_int = dict.as_dict().find(tensorfile::Value(std::int64_t{1000 + i}));
    if (by_name == nullptr || by_int == nullptr || by_name->as_int() != i || by_int->as_int() != i) return false;
  }
  return true;
}

/// make_keyed_dict, run in the plugin.
TENSORFILE_PLUGIN_API tensorfile::Value plugin_make_dict(int count);
/// finds_every_key, run in the plugin.
TENSORFILE_PLUGIN_API bool plugin_finds_all(const tensorfile::Value& dict, int count);
