// SPDX-License-Identifier: MIT
// A shared library with its own copy of tensorfile (see CMakeLists.txt).
#include "plugin.hpp"

tensorfile::Value plugin_make_dict(int count) { return make_keyed_dict(count); }

bool plugin_finds_all(const tensorfile::Value& dict, int count) { return finds_every_key(dict, count); }
