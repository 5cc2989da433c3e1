// cuBLASLt, NVRTC and cuFFT are opened on first use (dlopen), not when a program starts: loading
// libcublasLt alone makes ~240 MB resident (its initialisers run at load), which every
// CPU-only run of rlx — the CLI generating on the CPU, each test, the Python module — paid
// for nothing. librlx defines the entry points it calls; each resolves the library's
// symbol once and forwards to it. A program that also links the libraries itself (cuBLAS
// pulls in cuBLASLt) gets the same functions: dlsym on the library's handle finds its own.
#include <cublasLt.h>
#include <cufft.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <string>

#include "rlx/error.h"

namespace rlx::cuda {
namespace {

void* open_first(std::initializer_list<const char*> names) {
  std::string tried;
  for (const char* n : names) {
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
    tried += std::string(tried.empty() ? "" : ", ") + n;
  }
  fail<DeviceError>("cuda", "expected to load one of ", tried, ", got: ", dlerror());
}

void* cublaslt() {
  static void* h = open_first({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"});
  return h;
}

void* cufft() {
  static void* h = open_first({"libcufft.so.12", "libcufft.so.11", "libcufft.so"});
  return h;
}

void* nvrtc() {
  static void* h = open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"});
  return h;
}

template <class F>
F resolve(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) fail<DeviceError>("cuda", "expected the symbol ", name, ", got: ", dlerror());
  return reinterpret_cast<F>(p);
}

}  // namespace
}  // namespace rlx::cuda

// One forwarding definition per entry point; the header's declaration checks the signature.
#define RLX_FORWARD(lib, ret, name, params, args)                                \
  extern "C" ret name params {                                                   \
    static auto fn = rlx::cuda::resolve<ret(*) params>(rlx::cuda::lib(), #name); \
    return fn args;                                                              \
  }

RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * h), (h))
RLX_FORWARD(cublaslt, const char*, cublasLtGetStatusName, (cublasStatus_t s), (s))
RLX_FORWARD(cublaslt, const char*, cublasLtGetStatusString, (cublasStatus_t s), (s))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulDescCreate,
            (cublasLtMatmulDesc_t * d, cublasComputeType_t c, cudaDataType_t s), (d, c, s))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t d), (d))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
            (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void* b, size_t n),
            (d, a, b, n))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatrixLayoutCreate,
            (cublasLtMatrixLayout_t * l, cudaDataType t, uint64_t r, uint64_t c, int64_t ld),
            (l, t, r, c, ld))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t l), (l))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
            (cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, const void* b, size_t n),
            (l, a, b, n))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulPreferenceCreate,
            (cublasLtMatmulPreference_t * p), (p))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulPreferenceDestroy,
            (cublasLtMatmulPreference_t p), (p))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
            (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void* b,
             size_t n),
            (p, a, b, n))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
            (cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
             cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
             cublasLtMatmulPreference_t pref, int n, cublasLtMatmulHeuristicResult_t results[],
             int* count),
            (h, op, a, b, c, d, pref, n, results, count))
RLX_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmul,
            (cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
             cublasLtMatrixLayout_t ad, const void* B, cublasLtMatrixLayout_t bd, const void* beta,
             const void* C, cublasLtMatrixLayout_t cd, void* D, cublasLtMatrixLayout_t dd,
             const cublasLtMatmulAlgo_t* algo, void* ws, size_t wsn, cudaStream_t s),
            (h, op, alpha, A, ad, B, bd, beta, C, cd, D, dd, algo, ws, wsn, s))

RLX_FORWARD(nvrtc, const char*, nvrtcGetErrorString, (nvrtcResult r), (r))
RLX_FORWARD(nvrtc, nvrtcResult, nvrtcCreateProgram,
            (nvrtcProgram * p, const char* src, const char* name, int n, const char* const* h,
             const char* const* inc),
            (p, src, name, n, h, inc))
RLX_FORWARD(nvrtc, nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram * p), (p))
RLX_FORWARD(nvrtc, nvrtcResult, nvrtcCompileProgram,
            (nvrtcProgram p, int n, const char* const* opts), (p, n, opts))
RLX_FORWARD(nvrtc, nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram p, size_t* n), (p, n))
RLX_FORWARD(nvrtc, nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram p, char* c), (p, c))
RLX_FORWARD(nvrtc, nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram p, size_t* n), (p, n))
RLX_FORWARD(nvrtc, nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram p, char* log), (p, log))

RLX_FORWARD(cufft, cufftResult, cufftPlanMany,
            (cufftHandle * plan, int rank, int* n, int* inembed, int istride, int idist,
             int* onembed, int ostride, int odist, cufftType type, int batch),
            (plan, rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch))
RLX_FORWARD(cufft, cufftResult, cufftSetStream, (cufftHandle plan, cudaStream_t s), (plan, s))
RLX_FORWARD(cufft, cufftResult, cufftDestroy, (cufftHandle plan), (plan))
RLX_FORWARD(cufft, cufftResult, cufftExecC2C,
            (cufftHandle plan, cufftComplex* i, cufftComplex* o, int direction),
            (plan, i, o, direction))
RLX_FORWARD(cufft, cufftResult, cufftExecZ2Z,
            (cufftHandle plan, cufftDoubleComplex* i, cufftDoubleComplex* o, int direction),
            (plan, i, o, direction))
RLX_FORWARD(cufft, cufftResult, cufftExecR2C, (cufftHandle plan, cufftReal* i, cufftComplex* o),
            (plan, i, o))
RLX_FORWARD(cufft, cufftResult, cufftExecD2Z,
            (cufftHandle plan, cufftDoubleReal* i, cufftDoubleComplex* o), (plan, i, o))
RLX_FORWARD(cufft, cufftResult, cufftExecC2R, (cufftHandle plan, cufftComplex* i, cufftReal* o),
            (plan, i, o))
RLX_FORWARD(cufft, cufftResult, cufftExecZ2D,
            (cufftHandle plan, cufftDoubleComplex* i, cufftDoubleReal* o), (plan, i, o))
