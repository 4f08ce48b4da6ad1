// SPDX-License-Identifier: MIT
// Never compiled: the input on which tests/tools/check_public_api.cmake must fail (test cli.public_api_self_check).
#include <tensorfile/detail/zip/reader.hpp>

int main() { return tensorfile::detail::zip_impl::hex32(0).empty() ? 1 : 0; }
