#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli.h"
#include "rlx/cuda.h"
#include "rlx/error.h"
#include "rlx/onnx.h"
#include "rlx/text.h"

namespace rlx::cli {

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  if (name == "cuda") return Device::cuda();
  throw ValueError(str_cat("expected device cpu or cuda, got '", name, "'"));
}

void synchronize(Device device) {
  if (device.kind == DeviceKind::cuda) cuda::synchronize(device.index);
}

std::string names_str(const std::vector<std::string>& names) {
  std::string s = "[";
  for (const auto& n : names) s += (s.size() > 1 ? ", " : "") + n;
  return s + "]";
}

int64_t parse_size(const std::string& text, const std::string& what) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw ValueError(str_cat(what, " expects a size >= 0, got '", text, "'"));
  return v;
}

std::map<std::string, int64_t> bind_dims(const Graph& g, const std::vector<std::string>& dims,
                                         const TensorMap& loaded) {
  std::vector<std::string> symbols;
  for (const Arg& a : g.args())
    for (const Dim& d : a.value.shape())
      if (d.is_symbolic() && std::find(symbols.begin(), symbols.end(), d.symbol()) == symbols.end())
        symbols.push_back(d.symbol());
  std::map<std::string, int64_t> out;
  for (const auto& text : dims) {
    auto [name, size] = split_assignment(text, "--dim");
    if (std::find(symbols.begin(), symbols.end(), name) == symbols.end())
      throw ValueError(
          str_cat("unknown dim '", name, "'; the graph's symbolic dims are ", names_str(symbols)));
    out[name] = parse_size(size, "--dim " + name);
  }
  for (const Arg& a : g.args()) {
    auto it = loaded.find(a.name);
    if (it == loaded.end() || it->second.rank() != a.value.rank()) continue;  // run() reports
    for (size_t i = 0; i < a.value.shape().size(); ++i)
      if (const Dim& d = a.value.shape()[i]; d.is_symbolic())
        out.emplace(d.symbol(), it->second.shape()[i]);
  }
  for (const auto& s : symbols) out.emplace(s, 1);
  return out;
}

std::unique_ptr<Graph> load_graph(const std::string& path) {
  onnx::register_ops();  // a converted model's text may hold onnx.* ops
  if (is_onnx_path(path)) return onnx::load(path).graph;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw IoError(str_cat("cannot read '", path, "': it is a directory"));
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) throw IoError(str_cat("cannot read '", path, "': ", std::strerror(errno)));
  try {
    return parse_graph(text.str());
  } catch (const ParseError& e) {
    // "[text:L:C] msg" -> "FILE:L:C: msg", the form editors jump to.
    std::string msg = e.what();
    if (size_t close = msg.find("] "); msg.starts_with("[text:") && close != std::string::npos)
      msg = msg.substr(close + 2);
    throw ParseError(e.line(), e.column(),
                     str_cat(path, ":", e.line(), ":", e.column(), ": ", msg));
  }
}

std::pair<std::string, std::string> split_assignment(const std::string& text,
                                                     const std::string& flag) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw ValueError(str_cat(flag, " expects NAME=VALUE, got '", text, "'"));
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::string preview(const Tensor& t, int count) {
  int64_t n = std::min<int64_t>(t.numel(), std::max(count, 0));
  Tensor head = t.contiguous().reshape({t.numel()}).slice(0, 0, n);
  std::string s = "[";
  if (is_string(t.dtype())) {
    for (const std::string& v : head.to_strings())
      s += str_cat(s.size() > 1 ? ", " : "", "\"", v, "\"");
    if (n < t.numel()) s += n ? ", ..." : "...";
    return s + "]";
  }
  char buf[48];
  std::vector<double> values = head.to_doubles();
  for (size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    if (s.size() > 1) s += ", ";
    if (t.dtype() == DType::i64)  // beyond 2^53 a double would round
      s += str_cat(head.data_as<int64_t>()[i]);
    else if (is_bool(t.dtype()))
      s += v != 0 ? "true" : "false";
    else if (is_integer(t.dtype()))
      s += str_cat(int64_t(v));
    else
      s += (std::snprintf(buf, sizeof buf, "%.6g", v), buf);
  }
  if (n < t.numel()) s += n ? ", ..." : "...";
  return s + "]";
}

}  // namespace rlx::cli
