// rlx's runtime switches in one place. Each is read from its environment variable when
// settings() is first called; C++ (`rlx::settings().profile = true`) and Python
// (`rlx.settings.profile = True`) may change it afterwards. Change them while no compile or
// run is in flight: compiles and kernels read them without a lock.
//
// RLX_SETTINGS lists them as X(type, field, VARIABLE, default, meaning); the struct, the
// environment reader, Python's rlx.settings (and its listing, print(rlx.settings)) and the
// table in docs/settings.md (checked by a test) all come from this one list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#define RLX_SETTINGS(X)                                                                            \
  X(int, opt_level, "RLX_OPT_LEVEL", 2,                                                            \
    "optimisation level (0-9) of compiles whose CompileOptions leave it at -1")                    \
  X(bool, compile_cache, "RLX_COMPILE_CACHE", true,                                                \
    "reuse the compiled program of an equal graph, device and options within the process")         \
  X(std::string, cache_dir, "RLX_CACHE_DIR", "",                                                   \
    "folder of the on-disk compile cache (empty: $XDG_CACHE_HOME/rlx, else ~/.cache/rlx)")         \
  X(int, cuda_graphs, "RLX_CUDA_GRAPHS", -1,                                                       \
    "CUDA Graphs: -1 as CompileOptions::cuda_graphs says, 0 never, 1 always")                      \
  X(bool, arena, "RLX_ARENA", true,                                                                \
    "place a program's intermediates in one planned arena (0: one allocation each)")               \
  X(std::string, arena_packing, "RLX_ARENA_PACKING", "size",                                       \
    "how the arena planner orders buffers: size (largest first) or time (first use)")              \
  X(int64_t, host_cache_mb, "RLX_HOST_CACHE_MB", 2048, "MiB of freed host buffers kept for reuse") \
  X(bool, profile, "RLX_PROFILE", false,                                                           \
    "time every kernel call; print the totals per op and input types at exit")                     \
  X(bool, dispatch_report, "RLX_DISPATCH_REPORT", false,                                           \
    "print each compile's dispatch report (native, decomposed, host delegate) to stderr")          \
  X(bool, verify, "RLX_VERIFY", false, "verify the graph after every pass")                        \
  X(std::string, debug, "RLX_DEBUG", "",                                                           \
    "what to print: passes (each pass's node counts), graph (the optimised graph), all")           \
  X(std::string, cpu_isa, "RLX_CPU_ISA", "auto",                                                   \
    "CPU kernels' instruction-set level: auto (the best this CPU has), baseline, avx2 or "         \
    "avx512; read at the first CPU compile")                                                       \
  X(bool, region_jit, "RLX_REGION_JIT", true,                                                      \
    "CPU: compile fused elementwise regions to machine code (AVX-512 or AVX2)")                    \
  X(int64_t, qmm_gemm_rows, "RLX_QMM_GEMM_ROWS", 0,                                                \
    "CPU quant_matmul: rows from which a many-row path serves (0: the defaults, 32, decoded "      \
    "panels of q5_0 / q8_0 from 256; with AMX 96 for the K-quants, 160 for q8_0, 256 for the "     \
    "others)")                                                                                     \
  X(std::string, qmm_path, "RLX_QMM_PATH", "auto",                                                 \
    "CPU quant_matmul's many-row path: auto (AMX tiles where the CPU has them), int8 (4-bit "      \
    "weights, no AMX), panels (sgemm) or dots")                                                    \
  X(bool, cuda_tf32, "RLX_CUDA_TF32", false,                                                       \
    "CUDA: f32 convolutions and products may round their inputs to TF32")                          \
  X(std::string, cuda_f32_gemm, "RLX_CUDA_F32_GEMM", "auto",                                       \
    "CUDA f32 products: auto, sgemm (cuBLAS) or tc (3xTF32 tensor cores)")                         \
  X(bool, gemm_tune, "RLX_GEMM_TUNE", true,                                                        \
    "CUDA: time cuBLASLt's candidate algorithms on a problem's first call")                        \
  X(bool, cudnn_attention, "RLX_CUDNN_ATTENTION", true,                                            \
    "CUDA: attention through cuDNN's fused kernels where they apply")                              \
  X(bool, cuda_pdl, "RLX_PDL", true,                                                               \
    "CUDA (sm_90 on): decode kernels launch programmatically dependent (K-quant matvecs "          \
    "prefetch their weights)")                                                                     \
  X(std::string, cuda_qmatvec, "RLX_CUDA_QMATVEC", "auto",                                         \
    "CUDA quantized products of up to 8 rows: auto (mma at 8 rows), mma (weights staged into "     \
    "shared memory, int8 tensor cores) or dp4a (a warp per weight row)")                           \
  X(bool, cuda_tiles, "RLX_CUDA_TILES", true,                                                      \
    "LLM on CUDA: q8_0 and q4_k weight matrices load as tensor-core tiles (quant_matmul layout "   \
    "tiles16), the form the decode products read fastest; 0 keeps the file's layout")              \
  X(bool, cuda_tile_fuse, "RLX_CUDA_TILE_FUSE", true,                                              \
    "CUDA tiles16 products of one activation row quantize it (after the fused rms_norm) as they "  \
    "read it; 0: a quantizer kernel first")                                                        \
  X(int64_t, cuda_tile_loads, "RLX_CUDA_TILE_LOADS", 0,                                            \
    "CUDA tiles16 products: blocks a lane loads before it multiplies (4 or 8; 0: chosen)")         \
  X(int64_t, sparse_lanes, "RLX_SPARSE_LANES", 0,                                                  \
    "CUDA sparse rows: lanes per CSR row (0: chosen from the row lengths)")                        \
  X(bool, decode_fusions, "RLX_DECODE_FUSIONS", true,                                              \
    "LLM decode: libs/llm emits rope_attention_cached (one kernel for a layer's rope, cache "      \
    "writes and attention) and CUDA runs rms_norm in a quantized product's quantizer; 0 emits "    \
    "the parts")                                                                                   \
  X(bool, llm_chain, "RLX_LLM_CHAIN", true,                                                        \
    "rlx::llm decode: each step's token and state come from the step before, where it ran (0: "    \
    "through the host every token)")

namespace rlx {

struct Settings {
#define RLX_SETTING_FIELD(type, field, var, def, doc) type field = def;
  RLX_SETTINGS(RLX_SETTING_FIELD)
#undef RLX_SETTING_FIELD

  // Whether `debug` names `word` (or is "1" / "all").
  bool debug_has(const char* word) const;
};

// The process's settings (read from the environment on the first call).
Settings& settings();

// One row per setting, for listings (the CLI, Python, the docs check).
struct SettingInfo {
  const char* name;      // the field
  const char* variable;  // the environment variable
  const char* meaning;
  std::string default_value, value;  // as text
};
std::vector<SettingInfo> setting_table();

}  // namespace rlx
