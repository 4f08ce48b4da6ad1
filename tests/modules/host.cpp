// SPDX-License-Identifier: MIT
// The program side of tests/modules: dicts cross the module boundary both ways and every key is found.
#include <cstdio>

#include "plugin.hpp"

int main() {
  constexpr int count = 100;  // well past the size below which a dict scans instead of hashing
  const bool host_finds = finds_every_key(plugin_make_dict(count), count);
  const bool plugin_finds = plugin_finds_all(make_keyed_dict(count), count);
  std::printf("the host finds the plugin's keys: %s; the plugin finds the host's: %s\n", host_finds ? "yes" : "no",
              plugin_finds ? "yes" : "no");
  return host_finds && plugin_finds ? 0 : 1;
}
