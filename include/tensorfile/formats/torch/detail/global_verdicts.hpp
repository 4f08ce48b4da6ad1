// SPDX-License-Identifier: MIT
// What a pickle global is to someone about to torch.load the file: a tensor rebuild, on torch's weights_only
// allow-list, dangerous (runs code or touches the system), or unknown.
#pragma once

#include <string>
#include <string_view>

#include "tensorfile/config.hpp"
#include "tensorfile/formats/torch/detail/verdict.hpp"

namespace tensorfile {

namespace detail {

// Facts from pytorch/pytorch torch/_weights_only_unpickler.py (_tensor_rebuild_functions, _get_allowed_globals)
// and torch/_utils.py; the lists below are written here, not copied.
inline constexpr std::string_view torch_rebuild_functions[] = {
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_qtensor",
    "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_sparse_csr_tensor",
    "torch._utils._rebuild_nested_tensor",
    "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_wrapper_subclass",
    "torch._utils._rebuild_device_tensor_from_numpy",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor",
    "torch._tensor._rebuild_from_type_v2",
    "torch._tensor._rebuild_from_type",
};

inline constexpr std::string_view weights_only_allowed[] = {"collections.OrderedDict",
                                                            "collections.Counter",
                                                            "torch.nn.parameter.Parameter",
                                                            "torch.serialization._get_layout",
                                                            "torch.Size",
                                                            "torch.Tensor",
                                                            "torch.device",
                                                            "_codecs.encode",
                                                            "builtins.bytearray",
                                                            "builtins.set",
                                                            "builtins.complex",
                                                            "torch._C._get_default_device"};

// torch.<name> objects allowed as they are: dtypes (str(dtype) is "torch.float32"), layouts, memory formats
// and quantization schemes.
inline constexpr std::string_view torch_allowed_names[] = {"float32",
                                                           "float",
                                                           "float64",
                                                           "double",
                                                           "float16",
                                                           "half",
                                                           "bfloat16",
                                                           "complex32",
                                                           "complex64",
                                                           "complex128",
                                                           "cfloat",
                                                           "cdouble",
                                                           "chalf",
                                                           "uint8",
                                                           "uint16",
                                                           "uint32",
                                                           "uint64",
                                                           "int8",
                                                           "int16",
                                                           "short",
                                                           "int32",
                                                           "int",
                                                           "int64",
                                                           "long",
                                                           "bool",
                                                           "qint8",
                                                           "quint8",
                                                           "qint32",
                                                           "quint4x2",
                                                           "quint2x4",
                                                           "float8_e4m3fn",
                                                           "float8_e5m2",
                                                           "float8_e4m3fnuz",
                                                           "float8_e5m2fnuz",
                                                           "uint1",
                                                           "uint2",
                                                           "uint3",
                                                           "uint4",
                                                           "uint5",
                                                           "uint6",
                                                           "uint7",
                                                           "int1",
                                                           "int2",
                                                           "int3",
                                                           "int4",
                                                           "int5",
                                                           "strided",
                                                           "sparse_coo",
                                                           "per_tensor_affine",
                                                           "per_tensor_symmetric",
                                                           "per_channel_affine",
                                                           "per_channel_symmetric"};

// Whole modules that run code or reach the system. Facts from picklescan (mmaitre314/picklescan
// src/picklescan/scanner.py, _unsafe_globals) and modelscan (protectai/modelscan modelscan/settings.py,
// unsafe_globals), and torch's own _blocklisted_modules; "commands" and "popen2" are what protocols 0 to 2 write for
// subprocess functions (Python's _compat_pickle mappings).
inline constexpr std::string_view dangerous_modules[] = {
    "os",      "posix",           "nt",       "sys",         "subprocess", "socket",  "shutil",
    "runpy",   "webbrowser",      "httplib",  "http.client", "requests",   "aiohttp", "urllib",
    "urllib2", "ftplib",          "smtplib",  "telnetlib",   "pty",        "ctypes",  "importlib",
    "pickle",  "_pickle",         "dill",     "cloudpickle", "joblib",     "marshal", "code",
    "pdb",     "multiprocessing", "commands", "popen2",      "torch.hub"};

// Single globals that run code or reach the system, in modules that are otherwise harmless.
inline constexpr std::string_view dangerous_globals[] = {"builtins.eval",
                                                         "builtins.exec",
                                                         "builtins.compile",
                                                         "builtins.open",
                                                         "builtins.getattr",
                                                         "builtins.setattr",
                                                         "builtins.delattr",
                                                         "builtins.__import__",
                                                         "builtins.breakpoint",
                                                         "builtins.input",
                                                         "builtins.globals",
                                                         "builtins.locals",
                                                         "builtins.vars",
                                                         "builtins.apply",
                                                         "builtins.execfile",
                                                         "io.open",
                                                         "_io.open",
                                                         "io.open_code",
                                                         "_io.open_code",
                                                         "io.FileIO",
                                                         "_io.FileIO",
                                                         "operator.attrgetter",
                                                         "operator.methodcaller",
                                                         "functools.partial",
                                                         "torch.load",
                                                         "torch.serialization.load",
                                                         "torch.serialization._load",
                                                         "torch.hub.load",
                                                         "torch.hub.load_state_dict_from_url",
                                                         "torch.storage._load_from_bytes",
                                                         "numpy.load"};

[[nodiscard]] constexpr bool listed(auto const& list, std::string_view what) noexcept {
  for (std::string_view entry : list) {
    if (entry == what) return true;
  }
  return false;
}

/// Whether `module` is `root` or inside it ("os.path" is inside "os").
[[nodiscard]] constexpr bool module_within(std::string_view module, std::string_view root) noexcept {
  return module == root || (module.starts_with(root) && module.size() > root.size() && module[root.size()] == '.');
}

}  // namespace detail

#if TENSORFILE_DEFINITIONS
TENSORFILE_ENTRY GlobalVerdict classify_global(std::string_view module, std::string_view name, std::string_view full) {
  if (module == "__builtin__") {
    const std::string builtin = "builtins." + std::string(name);
    return classify_global("builtins", name, builtin);
  }
  for (std::string_view root : detail::dangerous_modules) {
    if (detail::module_within(module, root)) return GlobalVerdict::dangerous;
  }
  if (detail::listed(detail::dangerous_globals, full)) return GlobalVerdict::dangerous;
  if (detail::listed(detail::torch_rebuild_functions, full)) return GlobalVerdict::tensor_rebuild;
  // Storage classes: torch.FloatStorage..., torch.UntypedStorage, torch.storage.TypedStorage...
  if ((module == "torch" || module == "torch.storage") && name.ends_with("Storage")) {
    return GlobalVerdict::tensor_rebuild;
  }
  if (detail::listed(detail::weights_only_allowed, full)) return GlobalVerdict::allowed;
  if (module == "torch" && detail::listed(detail::torch_allowed_names, name)) return GlobalVerdict::allowed;
  // Tensor classes (torch.FloatTensor, torch.cuda.FloatTensor...).
  if ((module == "torch" || module == "torch.cuda") && name.ends_with("Tensor")) return GlobalVerdict::allowed;
  return GlobalVerdict::unknown;
}

#endif  // TENSORFILE_DEFINITIONS

}  // namespace tensorfile
