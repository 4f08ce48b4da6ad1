// SPDX-License-Identifier: MIT
// A user's translation unit: includes the umbrella header and calls each capability, so the compiler emits (and
// warns about) the library's inline code as it would in a user's program built with strict warnings. It is only
// compiled, never run; options are left at their defaults so that renaming one does not break this test.
#include <tensorfile/tensorfile.hpp>

#include <cstddef>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

std::string tensorfile_warnings_user_program(const std::filesystem::path& dir);

std::string tensorfile_warnings_user_program(const std::filesystem::path& dir) {
  namespace tf = tensorfile;
  std::string out;
  const auto values = tf::Tensor::from_values({1.0F, 2.0F, 3.0F, 4.0F}, {2, 2});
  out += tf::to_string(values);
  out += tf::Device::cuda(1).str();

  tf::save_torch(tf::make_state_dict({{"weight", values}}), dir / "model.pt");
  const tf::Value loaded = tf::load_torch(dir / "model.pt");
  out += tf::to_string(loaded);
  std::ostringstream stream;
  tf::save_torch(loaded, stream);
  const std::string bytes = stream.str();
  std::istringstream in(bytes);
  out += tf::to_string(tf::load_torch(in));

  tf::TensorDict td({{"a", values}, {"b", tf::Tensor::zeros({2, 3}, tf::DType::Complex64)}}, {2});
  tf::save_memmap(td, dir / "td");
  const tf::TensorDict back = tf::load_memmap(dir / "td");
  out += tf::to_string(back["b"].as_tensor());
  out += std::to_string(back.size());

  const auto mapped = tf::from_file(dir / "raw.bin");
  std::vector<std::byte> buffer(16);
  const auto borrowed = tf::from_buffer(buffer, {.dtype = tf::DType::Int32});
  out += tf::to_string(mapped) + tf::to_string(borrowed);
  return out;
}
