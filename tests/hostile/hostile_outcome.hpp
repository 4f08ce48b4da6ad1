// SPDX-License-Identifier: MIT
// What loading one hostile input gives, as one line: "OK" or "<ErrorClass>\t<message>".
#pragma once

#include <tensorfile/tensorfile.hpp>

#include <exception>
#include <string>
#include <utility>

namespace tensorfile_hostile {

template <class F>
std::pair<std::string, std::string> outcome(F&& load_it) {
  try {
    std::forward<F>(load_it)();
    return {"OK", ""};
  } catch (const tensorfile::FormatError& e) {
    return {"FormatError", e.what()};
  } catch (const tensorfile::UnsupportedError& e) {
    return {"UnsupportedError", e.what()};
  } catch (const tensorfile::DTypeError& e) {
    return {"DTypeError", e.what()};
  } catch (const tensorfile::ArgumentError& e) {
    return {"ArgumentError", e.what()};
  } catch (const tensorfile::LimitError& e) {
    return {"LimitError", e.what()};
  } catch (const tensorfile::DeviceError& e) {
    return {"DeviceError", e.what()};
  } catch (const tensorfile::IoError& e) {
    return {"IoError", e.what()};
  } catch (const tensorfile::Error& e) {
    return {"Error", e.what()};
  } catch (const std::exception& e) {
    return {"NOT-A-TENSORFILE-ERROR", e.what()};  // a test failure: every refusal is a tensorfile::Error
  }
}

/// Replaces every occurrence of `from` in `text` by `to` (paths vary between machines).
inline std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace tensorfile_hostile
