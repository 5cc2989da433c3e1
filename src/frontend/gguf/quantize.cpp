// Re-encoding a GGUF file's weights (`rlx quantize`), as llama-quantize does without an
// importance matrix: weight matrices to the target type, everything else kept.
#include <algorithm>
#include <thread>

#include "frontend/gguf/gguf_internal.h"
#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx::gguf {

namespace {

bool target_ok(DType t) {
  return is_quantized(t) || t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

// ggml_n_dims: trailing dims of 1 do not count.
int n_dims(const TensorInfo& ti) {
  int n = int(ti.ne.size());
  while (n > 1 && ti.ne[size_t(n - 1)] == 1) --n;
  return n;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Whether llama-quantize re-encodes this tensor: 2-D and more weights, except the few
// it always keeps (MoE routers, position and token-type embeddings).
bool is_weight_matrix(const TensorInfo& ti) {
  if (!ends_with(ti.name, "weight") || n_dims(ti) < 2) return false;
  for (std::string_view keep : {"ffn_gate_inp.weight", "pos_embd.weight", "token_types.weight"})
    if (ends_with(ti.name, keep)) return false;
  return true;
}

// The type a row of `row` values gets when `t`'s block does not divide it (llama.cpp's
// fallbacks, with q4_0 for its iq4_nl).
DType fallback(DType t, int64_t row) {
  if (row % dtype_block(t) == 0) return t;
  DType f = t;
  switch (t) {
    case DType::q2_k:
    case DType::q3_k:
      f = DType::q4_0;
      break;
    case DType::q4_k:
      f = DType::q5_0;
      break;
    case DType::q5_k:
      f = DType::q5_1;
      break;
    case DType::q6_k:
      f = DType::q8_0;
      break;
    default:
      break;
  }
  return row % dtype_block(f) == 0 ? f : DType::f16;
}

// Decodes rows of `src` (ggml type `from`) and encodes them as `to`, on `threads` threads.
std::vector<uint8_t> transcode(std::span<const uint8_t> src, DType from, DType to, int64_t rows,
                               int64_t row, int threads) {
  const size_t in_row = dtype_nbytes(from, row), out_row = dtype_nbytes(to, row);
  std::vector<uint8_t> out(size_t(rows) * out_row);
  auto work = [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<size_t>(row));
    for (int64_t r = r0; r < r1; ++r) {
      quant::dequantize_row(from, src.data() + size_t(r) * in_row, buf.data(), row);
      quant::quantize_row(to, buf.data(), out.data() + size_t(r) * out_row, row);
    }
  };
  const int64_t n = std::clamp<int64_t>(threads, 1, std::max<int64_t>(rows, 1));
  if (n == 1) {
    work(0, rows);
    return out;
  }
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < n; ++i) pool.emplace_back(work, rows * i / n, rows * (i + 1) / n);
  for (auto& t : pool) t.join();
  return out;
}

// f64 / integer sources are not float rows quant::dequantize_row takes: f64 is narrowed
// here (a weight stored as f64 is unusual but legal).
std::vector<uint8_t> f64_to_f32(std::span<const uint8_t> src) {
  std::vector<uint8_t> out(src.size() / 2);
  for (size_t i = 0; i < src.size() / 8; ++i) {
    double d;
    std::memcpy(&d, src.data() + 8 * i, 8);
    float f = float(d);
    std::memcpy(out.data() + 4 * i, &f, 4);
  }
  return out;
}

}  // namespace

std::vector<QuantizedTensor> quantize_file(const std::string& in_path, const std::string& out_path,
                                           DType target, const QuantizeOptions& options) {
  if (!target_ok(target))
    fail<ValueError>("gguf",
                     "expected a quantize target of f32, f16, bf16 or a quantized "
                     "dtype, got ",
                     dtype_name(target));
  if (options.output_type && !target_ok(*options.output_type))
    fail<ValueError>("gguf",
                     "expected an output type of f32, f16, bf16 or a quantized dtype, "
                     "got ",
                     dtype_name(*options.output_type));
  const int threads =
      options.threads > 0 ? options.threads : std::max(1, int(std::thread::hardware_concurrency()));
  File in = File::open(in_path);
  Writer w;
  for (const auto& [k, v] : in.metadata()) w.set(k, v);
  w.set("general.quantization_version", uint32_t(2));
  w.set("general.file_type", llama_file_type(target));

  const bool has_output = in.find("output.weight") != nullptr;
  std::vector<QuantizedTensor> report;
  for (const TensorInfo& ti : in.tensors()) {
    const std::string from = ggml_type_name(ti.ggml_type);
    if (!ti.dtype)
      fail<NotSupported>("gguf", in_path, ": tensor '", ti.name,
                         "': expected a ggml type rlx can decode, got ", from);
    DType src = *ti.dtype;
    auto bytes = in.tensor_bytes(ti);
    const int64_t row = ti.ne.empty() ? 1 : ti.ne[0];
    const int64_t rows = row ? ti.numel() / row : 0;

    DType to = src;
    if (is_weight_matrix(ti) && (is_float(src) || is_quantized(src))) {
      const bool is_output =
          ti.name == "output.weight" || (!has_output && ti.name == "token_embd.weight");
      to = fallback(is_output && options.output_type ? *options.output_type : target, row);
    } else if (is_quantized(src)) {
      to = DType::f32;  // a quantized non-matrix (rare): decoded, as norms are kept f32
    }
    if (to == src) {
      w.add_raw(ti.name, ti.ggml_type, ti.shape, {bytes.begin(), bytes.end()});
    } else {
      std::vector<uint8_t> f64buf;
      if (src == DType::f64) {
        f64buf = f64_to_f32(bytes);
        bytes = f64buf;
        src = DType::f32;
      }
      w.add_raw(ti.name, ggml_of_dtype(to), ti.shape,
                transcode(bytes, src, to, rows, row, threads));
    }
    report.push_back({ti.name, from, to});
  }
  w.write(out_path);
  return report;
}

}  // namespace rlx::gguf
