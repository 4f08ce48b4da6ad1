// SPDX-License-Identifier: MIT
// What a pickle global is to someone about to torch.load the file: a tensor rebuild, on torch's weights_only
// allow-list, dangerous (runs code or touches the system), or unknown.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "tensorfile/config.hpp"
#include "tensorfile/formats/torch/verdict.hpp"

namespace tensorfile::detail {

// The allow-list of torch.load(weights_only=True) in torch 1.13, the peer this scan answers for: the keys of
// `_get_allowed_globals()` in torch/_weights_only_unpickler.py, exactly (tests/scan/scan_globals.cpp --allow-list
// prints them for a comparison with that function). Its GLOBAL looks up "module.name" as one string, so these are
// compared whole, never by a suffix or a prefix.
inline constexpr std::string_view weights_only_rebuild_functions[] = {
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_sparse_csr_tensor",
};

// torch._storage_classes, keyed by each class's __module__ and __name__.
inline constexpr std::string_view weights_only_storage_classes[] = {
    "torch.BFloat16Storage",
    "torch.BoolStorage",
    "torch.ByteStorage",
    "torch.CharStorage",
    "torch.ComplexDoubleStorage",
    "torch.ComplexFloatStorage",
    "torch.DoubleStorage",
    "torch.FloatStorage",
    "torch.HalfStorage",
    "torch.IntStorage",
    "torch.LongStorage",
    "torch.QInt32Storage",
    "torch.QInt8Storage",
    "torch.QUInt2x4Storage",
    "torch.QUInt4x2Storage",
    "torch.QUInt8Storage",
    "torch.ShortStorage",
    "torch.cuda.BFloat16Storage",
    "torch.cuda.BoolStorage",
    "torch.cuda.ByteStorage",
    "torch.cuda.CharStorage",
    "torch.cuda.ComplexDoubleStorage",
    "torch.cuda.ComplexFloatStorage",
    "torch.cuda.DoubleStorage",
    "torch.cuda.FloatStorage",
    "torch.cuda.HalfStorage",
    "torch.cuda.IntStorage",
    "torch.cuda.LongStorage",
    "torch.cuda.ShortStorage",
    "torch.storage.TypedStorage",
    "torch.storage.UntypedStorage",
};

// The rest: OrderedDict, Parameter, _get_layout, Size, Tensor, the ten dtypes it lists, torch._tensor_classes.
inline constexpr std::string_view weights_only_allowed[] = {
    "collections.OrderedDict",
    "torch.nn.parameter.Parameter",
    "torch.serialization._get_layout",
    "torch.Size",
    "torch.Tensor",
    "torch.complex32",
    "torch.complex64",
    "torch.complex128",
    "torch.float16",
    "torch.float32",
    "torch.float64",
    "torch.int8",
    "torch.int16",
    "torch.int32",
    "torch.int64",
    "torch.BFloat16Tensor",
    "torch.BoolTensor",
    "torch.ByteTensor",
    "torch.CharTensor",
    "torch.DoubleTensor",
    "torch.FloatTensor",
    "torch.HalfTensor",
    "torch.IntTensor",
    "torch.LongTensor",
    "torch.ShortTensor",
    "torch.cuda.BFloat16Tensor",
    "torch.cuda.BoolTensor",
    "torch.cuda.ByteTensor",
    "torch.cuda.CharTensor",
    "torch.cuda.DoubleTensor",
    "torch.cuda.FloatTensor",
    "torch.cuda.HalfTensor",
    "torch.cuda.IntTensor",
    "torch.cuda.LongTensor",
    "torch.cuda.ShortTensor",
    "torch.cuda.sparse.BFloat16Tensor",
    "torch.cuda.sparse.ByteTensor",
    "torch.cuda.sparse.CharTensor",
    "torch.cuda.sparse.DoubleTensor",
    "torch.cuda.sparse.FloatTensor",
    "torch.cuda.sparse.HalfTensor",
    "torch.cuda.sparse.IntTensor",
    "torch.cuda.sparse.LongTensor",
    "torch.cuda.sparse.ShortTensor",
    "torch.sparse.BFloat16Tensor",
    "torch.sparse.ByteTensor",
    "torch.sparse.CharTensor",
    "torch.sparse.DoubleTensor",
    "torch.sparse.FloatTensor",
    "torch.sparse.HalfTensor",
    "torch.sparse.IntTensor",
    "torch.sparse.LongTensor",
    "torch.sparse.ShortTensor",
};

// The results weights_only lets BUILD update: its BUILD accepts an instance whose type is exactly torch.Tensor,
// torch.nn.Parameter or OrderedDict, which only these globals make when called.
inline constexpr std::string_view weights_only_build_makers[] = {
    "collections.OrderedDict",
    "torch.nn.parameter.Parameter",
    "torch.Tensor",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_sparse_csr_tensor",
};

// Python 3.11's _compat_pickle (Lib/_compat_pickle.py), which pickle.Unpickler.find_class applies for protocols 0
// to 2 (fix_imports is on by default): whole-module renames (IMPORT_MAPPING), then single globals (NAME_MAPPING,
// checked first; its "exceptions" entries, which all name builtin exception classes, are left out).
inline constexpr std::pair<std::string_view, std::string_view> compat_module_names[] = {
    {"BaseHTTPServer", "http.server"},
    {"CGIHTTPServer", "http.server"},
    {"ConfigParser", "configparser"},
    {"Cookie", "http.cookies"},
    {"Dialog", "tkinter.dialog"},
    {"DocXMLRPCServer", "xmlrpc.server"},
    {"FileDialog", "tkinter.filedialog"},
    {"HTMLParser", "html.parser"},
    {"Queue", "queue"},
    {"ScrolledText", "tkinter.scrolledtext"},
    {"SimpleDialog", "tkinter.simpledialog"},
    {"SimpleHTTPServer", "http.server"},
    {"SimpleXMLRPCServer", "xmlrpc.server"},
    {"SocketServer", "socketserver"},
    {"StringIO", "io"},
    {"Tix", "tkinter.tix"},
    {"Tkconstants", "tkinter.constants"},
    {"Tkdnd", "tkinter.dnd"},
    {"Tkinter", "tkinter"},
    {"UserDict", "collections"},
    {"UserList", "collections"},
    {"UserString", "collections"},
    {"__builtin__", "builtins"},
    {"_abcoll", "collections.abc"},
    {"_elementtree", "xml.etree.ElementTree"},
    {"_winreg", "winreg"},
    {"anydbm", "dbm"},
    {"cPickle", "pickle"},
    {"cStringIO", "io"},
    {"commands", "subprocess"},
    {"cookielib", "http.cookiejar"},
    {"copy_reg", "copyreg"},
    {"dbhash", "dbm.bsd"},
    {"dbm", "dbm.ndbm"},
    {"dumbdbm", "dbm.dumb"},
    {"dummy_thread", "_dummy_thread"},
    {"gdbm", "dbm.gnu"},
    {"htmlentitydefs", "html.entities"},
    {"httplib", "http.client"},
    {"markupbase", "_markupbase"},
    {"repr", "reprlib"},
    {"robotparser", "urllib.robotparser"},
    {"test.test_support", "test.support"},
    {"thread", "_thread"},
    {"tkColorChooser", "tkinter.colorchooser"},
    {"tkCommonDialog", "tkinter.commondialog"},
    {"tkFileDialog", "tkinter.filedialog"},
    {"tkFont", "tkinter.font"},
    {"tkMessageBox", "tkinter.messagebox"},
    {"tkSimpleDialog", "tkinter.simpledialog"},
    {"ttk", "tkinter.ttk"},
    {"urllib2", "urllib.request"},
    {"urlparse", "urllib.parse"},
    {"whichdb", "dbm"},
    {"xmlrpclib", "xmlrpc.client"},
};

inline constexpr std::pair<std::string_view, std::string_view> compat_global_names[] = {
    {"UserDict.IterableUserDict", "collections.UserDict"},
    {"UserDict.UserDict", "collections.UserDict"},
    {"UserList.UserList", "collections.UserList"},
    {"UserString.UserString", "collections.UserString"},
    {"__builtin__.basestring", "builtins.str"},
    {"__builtin__.intern", "sys.intern"},
    {"__builtin__.long", "builtins.int"},
    {"__builtin__.reduce", "functools.reduce"},
    {"__builtin__.unichr", "builtins.chr"},
    {"__builtin__.unicode", "builtins.str"},
    {"__builtin__.xrange", "builtins.range"},
    {"_multiprocessing.Connection", "multiprocessing.connection.Connection"},
    {"_socket.fromfd", "socket.fromfd"},
    {"itertools.ifilter", "builtins.filter"},
    {"itertools.ifilterfalse", "itertools.filterfalse"},
    {"itertools.imap", "builtins.map"},
    {"itertools.izip", "builtins.zip"},
    {"itertools.izip_longest", "itertools.zip_longest"},
    {"multiprocessing.AuthenticationError", "multiprocessing.context.AuthenticationError"},
    {"multiprocessing.BufferTooShort", "multiprocessing.context.BufferTooShort"},
    {"multiprocessing.ProcessError", "multiprocessing.context.ProcessError"},
    {"multiprocessing.TimeoutError", "multiprocessing.context.TimeoutError"},
    {"multiprocessing.forking.Popen", "multiprocessing.popen_fork.Popen"},
    {"multiprocessing.process.Process", "multiprocessing.context.Process"},
    {"socket._socketobject", "socket.SocketType"},
    {"urllib.ContentTooShortError", "urllib.error.ContentTooShortError"},
    {"urllib.getproxies", "urllib.request.getproxies"},
    {"urllib.pathname2url", "urllib.request.pathname2url"},
    {"urllib.quote", "urllib.parse.quote"},
    {"urllib.quote_plus", "urllib.parse.quote_plus"},
    {"urllib.unquote", "urllib.parse.unquote"},
    {"urllib.unquote_plus", "urllib.parse.unquote_plus"},
    {"urllib.url2pathname", "urllib.request.url2pathname"},
    {"urllib.urlcleanup", "urllib.request.urlcleanup"},
    {"urllib.urlencode", "urllib.parse.urlencode"},
    {"urllib.urlopen", "urllib.request.urlopen"},
    {"urllib.urlretrieve", "urllib.request.urlretrieve"},
    {"urllib2.HTTPError", "urllib.error.HTTPError"},
    {"urllib2.URLError", "urllib.error.URLError"},
    {"whichdb.whichdb", "dbm.whichdb"},
};

// Whole modules that run code or reach the system. Facts from picklescan (mmaitre314/picklescan
// src/picklescan/scanner.py, _unsafe_globals) and modelscan (protectai/modelscan modelscan/settings.py,
// unsafe_globals), and torch's own _blocklisted_modules; "commands" and "popen2" are what protocols 0 to 2 write for
// subprocess functions (Python's _compat_pickle mappings).
inline constexpr std::string_view dangerous_modules[] = {
    "os", "posix", "nt", "sys", "subprocess", "socket", "shutil", "runpy", "webbrowser", "httplib", "http.client",
    "requests", "aiohttp", "urllib", "urllib2", "ftplib", "smtplib", "telnetlib", "pty", "ctypes", "importlib",
    "pickle", "_pickle", "dill", "cloudpickle", "joblib", "marshal", "code", "pdb", "multiprocessing", "commands",
    "popen2", "torch.hub",
    // Threads and servers run a callable or listen; _compat_pickle reads Python 2's thread as _thread.
    "_thread", "_dummy_thread", "threading", "socketserver", "http.server", "xmlrpc", "asyncio", "signal",
    "_posixsubprocess", "shelve", "dbm", "tempfile"};

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
                                                         "numpy.load",
                                                         "functools.reduce"};

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

}  // namespace tensorfile::detail

#if TENSORFILE_DEFINITIONS_OF(formats_torch_detail_global_verdicts)
namespace tensorfile::detail {

/// The verdict on what Python's find_class reaches by `module` and `name`, without the allow-list: dangerous or
/// unknown.
inline GlobalVerdict danger_of(std::string_view module, std::string_view name) {
  for (std::string_view root : dangerous_modules) {
    if (module_within(module, root)) return GlobalVerdict::dangerous;
  }
  std::string full;
  full.reserve(module.size() + 1 + name.size());
  full.append(module).append(1, '.').append(name);
  return listed(dangerous_globals, full) ? GlobalVerdict::dangerous : GlobalVerdict::unknown;
}

/// The verdict on `name` read as a dotted attribute path from `module`, as find_class walks it for protocol 4 and
/// above ("torch" + "serialization.os.system" reaches os.system, "torch" + "hub.load" torch.hub.load): dangerous
/// when a run of steps of the whole path names a dangerous module or global (each step may be a module the one
/// before it imported), or a step of `name` is a dunder attribute (__globals__, __builtins__, __class__ reach
/// anything).
inline GlobalVerdict dotted_danger(std::string_view module, std::string_view name) {
  for (std::size_t from = 0; from < name.size();) {
    const std::size_t end = std::min(name.find('.', from), name.size());
    const std::string_view step = name.substr(from, end - from);
    if (step.size() > 4 && step.starts_with("__") && step.ends_with("__")) return GlobalVerdict::dangerous;
    from = end + 1;
  }
  std::string joined;
  joined.reserve(module.size() + 1 + name.size());
  joined.append(module).append(1, '.').append(name);
  const std::string_view path = joined;
  for (std::size_t first = 0; first < path.size();) {
    for (std::size_t last = path.find('.', first); last != std::string_view::npos; last = path.find('.', last + 1)) {
      if (danger_of(path.substr(first, last - first), path.substr(last + 1, path.find('.', last + 1) - last - 1)) ==
          GlobalVerdict::dangerous) {
        return GlobalVerdict::dangerous;
      }
    }
    const std::size_t next = path.find('.', first);
    if (next == std::string_view::npos) break;
    first = next + 1;
  }
  return GlobalVerdict::unknown;
}

}  // namespace tensorfile::detail

namespace tensorfile {

TENSORFILE_ENTRY GlobalVerdict classify_global(std::string_view module, std::string_view name, std::string_view full) {
  // What plain torch.load reaches: the names as written, as _compat_pickle renames them (protocols 0 to 2), and
  // as a dotted path (protocol 4 and above). Judged by the worst of them whatever the protocol: a reading that a
  // pickle's protocol rules out runs nothing, and calling its file unsafe costs nothing the allow-list would give.
  if (detail::danger_of(module, name) == GlobalVerdict::dangerous) return GlobalVerdict::dangerous;
  for (const auto& [from, to] : detail::compat_global_names) {
    if (from == full) {
      const std::size_t dot = to.rfind('.');
      if (detail::danger_of(to.substr(0, dot), to.substr(dot + 1)) == GlobalVerdict::dangerous) {
        return GlobalVerdict::dangerous;
      }
    }
  }
  for (const auto& [from, to] : detail::compat_module_names) {
    if (from == module && detail::danger_of(to, name) == GlobalVerdict::dangerous) return GlobalVerdict::dangerous;
  }
  if (name.find('.') != std::string_view::npos && detail::dotted_danger(module, name) == GlobalVerdict::dangerous) {
    return GlobalVerdict::dangerous;
  }
  // weights_only compares the joined name, exactly; none of its names is one that _compat_pickle renames.
  if (detail::listed(detail::weights_only_rebuild_functions, full) ||
      detail::listed(detail::weights_only_storage_classes, full)) {
    return GlobalVerdict::tensor_rebuild;
  }
  if (detail::listed(detail::weights_only_allowed, full)) return GlobalVerdict::allowed;
  return GlobalVerdict::unknown;
}

}  // namespace tensorfile

#endif  // TENSORFILE_DEFINITIONS_OF(formats_torch_detail_global_verdicts)
