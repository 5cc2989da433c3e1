#include <algorithm>

#include "backend/cuda/copy.h"
#include "backend/cuda/kernels.cuh"
#include "rlx/axes.h"

namespace rlx::cuda {

namespace {

template <class T>
__global__ void copy_kernel(const T* src, T* dst, int64_t n, Indexer<2> ix) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    dst[off[0]] = src[off[1]];
  }
}

// Rows contiguous on both sides (a permutation that keeps the last dim, a slice, a
// broadcast of rows): each thread moves one W-byte word, the row's place found once per
// word instead of once per element. `rows` maps a row to its byte offsets.
template <class W>
__global__ void copy_rows(const char* src, char* dst, int64_t words, int64_t per_row,
                          Indexer<2> rows) {
  RLX_GRID_STRIDE(i, words) {
    int64_t r = i / per_row, w = i - r * per_row;
    int64_t off[2];
    rows.offsets(r, off);
    reinterpret_cast<W*>(dst + off[0])[w] = reinterpret_cast<const W*>(src + off[1])[w];
  }
}

// A transpose of the innermost dims (dst's dim a is contiguous, src's dim b is): 32 x 32
// tiles through shared memory, so reads and writes are both coalesced. `batch` maps the
// other dims to element offsets.
constexpr int kTile = 32, kTileRows = 8;
template <class T>
__global__ void transpose_tiles(const T* src, T* dst, int64_t na, int64_t nb, int64_t src_a,
                                int64_t dst_b, Indexer<2> batch, int64_t count) {
  __shared__ T tile[kTile][kTile + 1];
  int64_t ta = (na + kTile - 1) / kTile, tb = (nb + kTile - 1) / kTile;
  for (int64_t t = blockIdx.x; t < count * ta * tb; t += gridDim.x) {
    int64_t bt = t / (ta * tb), rest = t - bt * ta * tb;
    int64_t a0 = rest / tb * kTile, b0 = rest % tb * kTile;
    int64_t off[2];
    batch.offsets(bt, off);
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      int64_t a = a0 + j, b = b0 + threadIdx.x;
      if (a < na && b < nb) tile[j][threadIdx.x] = src[off[1] + a * src_a + b];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      int64_t a = a0 + threadIdx.x, b = b0 + j;
      if (a < na && b < nb) dst[off[0] + b * dst_b + a] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

// Each element of the contiguous y reads its source in x (per dim, rlx/axes.h's pad_source).
struct PadShape {
  int rank;
  int64_t out[kMaxPadRank], in[kMaxPadRank], stride[kMaxPadRank], lo[kMaxPadRank];
};
template <class T>
__global__ void pad_edges_kernel(const T* x, T* y, int64_t n, PadShape p, bool reflect) {
  RLX_GRID_STRIDE(i, n) {
    int64_t rest = i, off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t j = rest % p.out[d];
      rest /= p.out[d];
      off += pad_source(j - p.lo[d], p.in[d], reflect) * p.stride[d];
    }
    y[i] = x[off];
  }
}

template <class T>
__global__ void fill_kernel(T* dst, int64_t n, Indexer<1> ix, T value) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    dst[off[0]] = value;
  }
}

// The widest word (16 bytes down to 1) that divides every one of `values` (byte lengths,
// strides, addresses): what a copy moves per load and store.
int widest_word(const std::vector<int64_t>& values) {
  int w = 16;
  for (int64_t v : values)
    while (v % w) w /= 2;
  return w;
}

// go(W{}) with W the word of w bytes: uint4 for 16, else visit_bytes' unsigned integer.
template <class F>
void visit_word(int w, F&& go) {
  if (w == 16)
    go(uint4{});
  else
    visit_bytes(size_t(w), [&](auto tag) { go(typename decltype(tag)::type{}); });
}

// copy_raw's fast paths over the merged layout ix (strides in elements); false when
// neither applies.
bool copy_fast(void* dst, const void* src, const Indexer<2>& ix, size_t elem, int64_t n,
               cudaStream_t stream) {
  int last = ix.rank - 1;
  if (last < 1) return false;
  if (ix.stride[0][last] == 1 && ix.stride[1][last] == 1) {
    int64_t row = ix.size[last] * int64_t(elem);
    Indexer<2> rows;
    rows.rank = last;
    std::vector<int64_t> all{row, int64_t(reinterpret_cast<uintptr_t>(dst)),
                             int64_t(reinterpret_cast<uintptr_t>(src))};
    for (int d = 0; d < last; ++d) {
      rows.size[d] = ix.size[d];
      for (int k = 0; k < 2; ++k) {
        rows.stride[k][d] = ix.stride[k][d] * int64_t(elem);
        all.push_back(rows.stride[k][d]);
      }
    }
    const int w = widest_word(all);
    int64_t per_row = row / w, words = n * int64_t(elem) / w;
    auto go = [&](auto word) {
      using W = decltype(word);
      copy_rows<W><<<blocks_for(words), kThreads, 0, stream>>>(
          static_cast<const char*>(src), static_cast<char*>(dst), words, per_row, rows);
    };
    visit_word(w, go);
    RLX_CUDA_LAUNCHED("copy_rows");
    return true;
  }
  // dst's innermost dim is contiguous in dst; another dim b is contiguous in src.
  if (ix.stride[0][last] != 1) return false;
  int b = -1;
  for (int d = 0; d < last; ++d)
    if (ix.stride[1][d] == 1) b = d;
  if (b < 0 || ix.size[last] < kTile / 2 || ix.size[b] < kTile / 2) return false;
  Indexer<2> batch;
  batch.rank = 0;
  int64_t count = 1;
  for (int d = 0; d < last; ++d) {
    if (d == b) continue;
    batch.size[batch.rank] = ix.size[d];
    for (int k = 0; k < 2; ++k) batch.stride[k][batch.rank] = ix.stride[k][d];
    ++batch.rank;
    count *= ix.size[d];
  }
  int64_t tiles =
      count * ((ix.size[last] + kTile - 1) / kTile) * ((ix.size[b] + kTile - 1) / kTile);
  int grid = int(std::min<int64_t>(tiles, int64_t(sm_count()) * 16));
  visit_bytes(elem, [&](auto tag) {
    using T = typename decltype(tag)::type;
    transpose_tiles<T><<<grid, dim3(kTile, kTileRows), 0, stream>>>(
        static_cast<const T*>(src), static_cast<T*>(dst), ix.size[last], ix.size[b],
        ix.stride[1][last], ix.stride[0][b], batch, count);
  });
  RLX_CUDA_LAUNCHED("transpose_tiles");
  return true;
}

}  // namespace

void copy_raw(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
              const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
              size_t elem, cudaStream_t stream) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n == 0) return;
  auto ix = make_indexer<2>(shape, {&dst_strides, &src_strides});
  // Both sides one contiguous run: a plain memcpy.
  if (ix.rank == 0 || (ix.rank == 1 && ix.stride[0][0] == 1 && ix.stride[1][0] == 1)) {
    RLX_CUDA(cudaMemcpyAsync(dst, src, size_t(n) * elem, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  if (copy_fast(dst, src, ix, elem, n, stream)) return;
  visit_bytes(elem, [&](auto tag) {
    using T = typename decltype(tag)::type;
    copy_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(src),
                                                           static_cast<T*>(dst), n, ix);
  });
  RLX_CUDA_LAUNCHED("copy_kernel");
}

namespace {

// Word i of a contiguous [outer, row] source (row: the parts' words one after another)
// to its part: dst[j] is [outer, start[j + 1] - start[j]] words.
struct SplitParts {
  char* dst[kSplitParts];
  int64_t start[kSplitParts + 1];
};

template <class W>
__global__ void split_rows(const W* src, int64_t words, int64_t row, SplitParts p) {
  RLX_GRID_STRIDE(i, words) {
    const int64_t o = i / row, c = i % row;
    int j = 0;
    while (c >= p.start[j + 1]) ++j;
    const int64_t size = p.start[j + 1] - p.start[j];
    reinterpret_cast<W*>(p.dst[j])[o * size + c - p.start[j]] = src[i];
  }
}

}  // namespace

bool split_contiguous(const void* src, int64_t outer, int64_t inner, std::span<void* const> dst,
                      std::span<const int64_t> sizes, size_t elem, cudaStream_t stream) {
  if (dst.size() > size_t(kSplitParts) || dst.size() != sizes.size()) return false;
  const int64_t unit = inner * int64_t(elem);  // bytes per index along the axis
  int64_t len = 0;
  for (int64_t n : sizes) len += n;
  if (outer * len * unit == 0) return true;
  // Words as wide as every part's run per outer index allows (a [512, 2 x 5632] f32 gate /
  // up product moves in 16-byte words, not in its 4-byte unit).
  std::vector<int64_t> all{int64_t(reinterpret_cast<uintptr_t>(src))};
  for (void* d : dst) all.push_back(int64_t(reinterpret_cast<uintptr_t>(d)));
  for (int64_t n : sizes) all.push_back(n * unit);
  const int w = widest_word(all);
  SplitParts p{};
  p.start[0] = 0;
  for (size_t j = 0; j < sizes.size(); ++j) {
    p.dst[j] = static_cast<char*>(dst[j]);
    p.start[j + 1] = p.start[j] + sizes[j] * unit / w;
  }
  for (size_t j = sizes.size(); j < size_t(kSplitParts); ++j) p.start[j + 1] = p.start[j];
  const int64_t row = len * unit / w, words = outer * row;
  auto go = [&](auto word) {
    using W = decltype(word);
    split_rows<W>
        <<<blocks_for(words), kThreads, 0, stream>>>(static_cast<const W*>(src), words, row, p);
  };
  visit_word(w, go);
  RLX_CUDA_LAUNCHED("split_rows");
  return true;
}

void copy_strided(const Tensor& src, const Tensor& dst, cudaStream_t stream) {
  if (dst.numel() == 0) return;
  copy_raw(dst.data(), dst.strides(), src.data(), src.strides(), dst.shape(),
           dtype_size(dst.dtype()), stream);
}

void fill(const Tensor& dst, double value, cudaStream_t stream) {
  int64_t n = dst.numel();
  if (n == 0) return;
  uint64_t bits = 0;
  store_double(dst.dtype(), &bits, value);
  auto ix = make_indexer<1>(dst.shape(), {&dst.strides()});
  visit_bytes(dtype_size(dst.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    fill_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst.data()), n, ix, v);
  });
  RLX_CUDA_LAUNCHED("fill_kernel");
}

void pad_edges(const Tensor& x, const Tensor& y, std::span<const int64_t> pads, bool reflect,
               cudaStream_t stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  if (x.rank() > kMaxPadRank)
    fail<NotSupported>("pad", "expected at most ", kMaxPadRank, " dims, got ", x.rank());
  PadShape p{int(x.rank()), {}, {}, {}, {}};
  for (int d = 0; d < p.rank; ++d) {
    p.out[d] = y.shape()[size_t(d)];
    p.in[d] = x.shape()[size_t(d)];
    p.stride[d] = x.strides()[size_t(d)];
    p.lo[d] = pads[size_t(d)];
  }
  visit_bytes(dtype_size(y.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    pad_edges_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x.data()), static_cast<T*>(y.data()), n, p, reflect);
  });
  RLX_CUDA_LAUNCHED("pad_edges_kernel");
}

}  // namespace rlx::cuda
