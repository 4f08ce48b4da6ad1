// SPDX-License-Identifier: MIT
// Loads the tensors print_reference.py saved and compares tensor_repr() with torch's repr, exactly.
#include <tensorfile/tensorfile.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Case {
  std::string name;
  tensorfile::PrintOptions options;
  std::string expected;
};

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out(1);
  for (const char c : line) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// Each case: "index\tprecision\tthreshold\tedgeitems\tlinewidth\tsci_mode\tbytes\n", the repr, "\n".
std::vector<Case> read_expected(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<Case> cases;
  std::string header;
  while (std::getline(in, header)) {
    const auto f = split(header, '\t');
    if (f.size() != 7) throw std::runtime_error("bad header line: " + header);
    Case c;
    c.name = f[0];
    c.options.precision = std::stoi(f[1]);
    c.options.threshold = std::strtod(f[2].c_str(), nullptr);
    c.options.edgeitems = std::stoll(f[3]);
    c.options.linewidth = std::stoll(f[4]);
    if (f[5] != "none") c.options.sci_mode = f[5] == "1";
    c.expected.resize(std::stoull(f[6]));
    in.read(c.expected.data(), static_cast<std::streamsize>(c.expected.size()));
    in.get();
    cases.push_back(std::move(c));
  }
  return cases;
}

// A line diff of the two texts: the first differing line with a caret under the first differing column.
void show_diff(const Case& c, const std::string& got) {
  std::cout << "MISMATCH case " << c.name << " (precision " << c.options.precision << ", threshold "
            << c.options.threshold << ", edgeitems " << c.options.edgeitems << ", linewidth " << c.options.linewidth
            << ")\n--- torch\n"
            << c.expected << "\n+++ tensorfile\n"
            << got << "\n";
  const auto want = split(c.expected, '\n');
  const auto have = split(got, '\n');
  for (std::size_t i = 0; i < std::max(want.size(), have.size()); ++i) {
    const std::string a = i < want.size() ? want[i] : "<no line>";
    const std::string b = i < have.size() ? have[i] : "<no line>";
    if (a == b) continue;
    std::size_t col = 0;
    while (col < a.size() && col < b.size() && a[col] == b[col]) ++col;
    std::cout << "first difference at line " << i + 1 << ", column " << col + 1 << ":\n-" << a << "\n+" << b << "\n "
              << std::string(col, ' ') << "^\n";
    break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: print_check TENSORS.pt EXPECTED.txt\n";
    return 2;
  }
  try {
    const tensorfile::Value root = tensorfile::load_torch(argv[1]);
    const auto& items = root.as_list();
    const auto cases = read_expected(argv[2]);
    if (cases.size() != items.size()) {
      std::cout << "FAILED: " << items.size() << " tensors loaded, " << cases.size() << " reprs\n";
      return 1;
    }
    std::size_t failed = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::string got = tensorfile::tensor_repr(items[i], cases[i].options);
      if (got == cases[i].expected) continue;
      if (++failed <= 10) show_diff(cases[i], got);
    }
    std::cout << "print_check: " << cases.size() - failed << " of " << cases.size() << " reprs equal torch's\n";
    if (cases.size() < 300) {
      std::cout << "FAILED: fewer than 300 cases\n";
      return 1;
    }
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cout << "FAILED: " << e.what() << "\n";
    return 1;
  }
}
