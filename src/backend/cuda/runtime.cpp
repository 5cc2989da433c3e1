// The CUDA device runtime: one stream and one memory pool per device, pinned staging for
// host copies, and the rlx::cuda API.
//
// Memory comes from the device's own stream-ordered pool (cudaMallocAsync) with its
// release threshold raised to the maximum, so freed blocks stay reserved and reused: the
// caching allocator is CUDA's, and nothing calls cudaMalloc on the hot path. A failed
// allocation gives the pool's unused memory back and tries once more before OutOfMemory.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "backend/cuda/copy.h"
#include "backend/cuda/cuda_util.h"
#include "rlx/cuda.h"
#include "rlx/settings.h"
#include "runtime/device_backend.h"
#include "runtime/program.h"

namespace rlx::cuda {

void throw_cuda(cudaError_t e, const char* call) {
  cudaGetLastError();  // clears a non-sticky error so the process can go on
  std::string msg = str_cat("[cuda] expected ", call, " to succeed, got ", cudaGetErrorName(e),
                            ": ", cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) throw OutOfMemory(msg);
  throw DeviceError(msg);
}

namespace {

// Copies between host and device go through two pinned halves, so that the host-side
// memcpy of one chunk overlaps the transfer of the other.
constexpr size_t kStagingChunk = size_t(16) << 20;
constexpr size_t kDirectCopy = size_t(64) << 10;  // host -> device bytes copied unstaged

struct DeviceState {
  int index = 0;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  int sms = 0;
  int major = 0;  // compute capability
  std::mutex staging_mu;
  void* staging = nullptr;  // 2 * kStagingChunk pinned bytes
  std::array<cudaEvent_t, 2> done{};
  // Bad-index slots (deferred_check): 3 words each on the device, read back into the
  // pinned mirror. Handed out round-robin.
  std::once_flag checks_once;
  unsigned long long* check_slots = nullptr;
  unsigned long long* check_host = nullptr;
  std::atomic<int64_t> next_slot{0};
};

constexpr int64_t kCheckSlots = int64_t(1) << 14;

// The checks this thread queued and has not read yet.
struct PendingCheck {
  int device;
  int64_t slot;
  BadIndexReport report;
};
using Checks = std::vector<PendingCheck>;
thread_local Checks t_checks;

// This thread's pending checks on `device`, taken out of t_checks.
Checks take_checks(int device) {
  Checks mine, rest;
  for (PendingCheck& c : t_checks) (c.device == device ? mine : rest).push_back(std::move(c));
  t_checks = std::move(rest);
  return mine;
}

// A captured graph and the index checks to read after each replay.
struct Captured {
  cudaGraphExec_t exec = nullptr;
  std::shared_ptr<const Checks> checks;
  Captured(cudaGraphExec_t e, Checks c)
      : exec(e), checks(std::make_shared<const Checks>(std::move(c))) {}
  Captured(const Captured&) = delete;  // one owner of the exec
  Captured& operator=(const Captured&) = delete;
  ~Captured() { cudaGraphExecDestroy(exec); }
};

// Replays whose checks are read once the device has passed `done` (cuda::Pipeline): a
// decode loop queues its next step before it reads the last one's result.
struct DeferredRead {
  int device;
  std::shared_ptr<const Checks> checks;
  cudaEvent_t done;
};
thread_local int t_defer = 0;  // live Pipelines on this thread
thread_local std::deque<DeferredRead> t_deferred;

// Set on the thread that is capturing a graph: the allocations made during the capture
// that are still live.
thread_local std::shared_ptr<std::atomic<int>> t_captured;

class CudaBackend final : public detail::DeviceBackend {
 public:
  DeviceState& state(Device d) {
    std::call_once(once_[size_t(d.index)], [&] {
      auto s = std::make_unique<DeviceState>();
      s->index = d.index;
      RLX_CUDA(cudaSetDevice(d.index));
      RLX_CUDA(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
      RLX_CUDA(cudaDeviceGetDefaultMemPool(&s->pool, d.index));
      uint64_t keep = UINT64_MAX;
      RLX_CUDA(cudaMemPoolSetAttribute(s->pool, cudaMemPoolAttrReleaseThreshold, &keep));
      RLX_CUDA(cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, d.index));
      RLX_CUDA(cudaDeviceGetAttribute(&s->major, cudaDevAttrComputeCapabilityMajor, d.index));
      states_[size_t(d.index)] = std::move(s);
    });
    RLX_CUDA(cudaSetDevice(d.index));
    return *states_[size_t(d.index)];
  }

  std::shared_ptr<Buffer> allocate(size_t bytes, Device d) override {
    DeviceState& s = state(d);
    if (bytes == 0) return Buffer::wrap(nullptr, 0, d, {});
    void* p = nullptr;
    cudaError_t e = cudaMallocAsync(&p, bytes, s.stream);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      RLX_CUDA(cudaStreamSynchronize(s.stream));
      RLX_CUDA(cudaMemPoolTrimTo(s.pool, 0));
      e = cudaMallocAsync(&p, bytes, s.stream);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      if (e == cudaErrorMemoryAllocation)
        fail<OutOfMemory>("cuda", "expected ", bytes, " bytes on ", d.str(), ", got ",
                          cudaGetErrorString(e), " (", memory_str(s), ")");
      throw_cuda(e, "cudaMallocAsync");
    }
    cudaStream_t stream = s.stream;
    if (std::shared_ptr<std::atomic<int>> live = t_captured) {  // counted until freed
      ++*live;
      return Buffer::wrap(p, bytes, d, [stream, live](void* q) {
        // Memory of a capture that failed was never made: its free fails, harmlessly.
        if (cudaFreeAsync(q, stream) != cudaSuccess) cudaGetLastError();
        --*live;
      });
    }
    return Buffer::wrap(p, bytes, d, [stream](void* q) { cudaFreeAsync(q, stream); });
  }

  // CUDA Graphs. Capture is thread-local: a call from this thread that would wait for the
  // device fails the capture instead of breaking it silently.
  bool begin_capture(Device d) override {
    DeviceState& s = state(d);
    if (cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    t_captured = std::make_shared<std::atomic<int>>(0);
    return true;
  }

  std::shared_ptr<void> end_capture(Device d) override {
    DeviceState& s = state(d);
    cudaGraph_t g = nullptr;
    cudaError_t e = cudaStreamEndCapture(s.stream, &g);
    std::shared_ptr<std::atomic<int>> live = std::move(t_captured);
    std::vector<PendingCheck> checks = take_checks(d.index);
    cudaGraphExec_t exec = nullptr;
    // Memory allocated in the graph and still held would be the graph's to free on
    // every replay: such a run is not one to replay.
    if (e == cudaSuccess && g && *live == 0) e = cudaGraphInstantiate(&exec, g, 0);
    // Its upload now, not in the first replay.
    if (e == cudaSuccess && exec) e = cudaGraphUpload(exec, s.stream);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    if (!exec || e != cudaSuccess) return nullptr;
    return std::make_shared<Captured>(exec, std::move(checks));
  }

  void replay(const void* graph, Device d) override {
    const auto* c = static_cast<const Captured*>(graph);
    DeviceState& s = state(d);
    if (t_defer == 0 || c->checks->empty()) {
      RLX_CUDA(cudaGraphLaunch(c->exec, s.stream));
      return read_checks(s, *c->checks);
    }
    // The checks' host mirror is one per slot: an earlier replay's is read before this
    // one's copy can overwrite it.
    resolve_deferred(false, c->checks.get());
    RLX_CUDA(cudaGraphLaunch(c->exec, s.stream));
    queue_reads(s, *c->checks);
    cudaEvent_t done = nullptr;
    RLX_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    RLX_CUDA(cudaEventRecord(done, s.stream));
    t_deferred.push_back({d.index, c->checks, done});
  }

  unsigned long long* check_slot(Device d, BadIndexReport report) {
    DeviceState& s = state(d);
    std::call_once(s.checks_once, [&] {
      constexpr size_t kBytes = 3 * sizeof(unsigned long long) * kCheckSlots;
      RLX_CUDA(cudaMalloc(&s.check_slots, kBytes));
      RLX_CUDA(cudaMemset(s.check_slots, 0, kBytes));
      RLX_CUDA(cudaMallocHost(&s.check_host, kBytes));
    });
    // Slots are clear when handed out: each read clears what it copied (queue_reads), so a
    // captured graph carries no memset per check.
    int64_t slot = s.next_slot.fetch_add(1) % kCheckSlots;
    t_checks.push_back({d.index, slot, std::move(report)});
    return s.check_slots + 3 * slot;
  }

  void finish_checks(Device d, bool report) override {
    Checks mine = take_checks(d.index);
    if (report) return read_checks(state(d), mine);
    if (!mine.empty()) queue_reads(state(d), mine);  // cleared for the slots' next use
  }

  // Queues the copy of the slots into their host mirror and clears them: one copy and
  // one memset per run of consecutive slots (a run's checks take consecutive ones).
  static void queue_reads(DeviceState& s, const Checks& checks) {
    std::vector<int64_t> slots;
    for (const PendingCheck& c : checks) slots.push_back(c.slot);
    std::sort(slots.begin(), slots.end());
    slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
    constexpr size_t kWords = 3, kBytes = kWords * sizeof(unsigned long long);
    for (size_t i = 0, j = 0; i < slots.size(); i = j) {
      for (j = i + 1; j < slots.size() && slots[j] == slots[j - 1] + 1;) ++j;
      size_t bytes = (j - i) * kBytes;
      unsigned long long* dev = s.check_slots + kWords * slots[i];
      RLX_CUDA(cudaMemcpyAsync(s.check_host + kWords * slots[i], dev, bytes, cudaMemcpyDeviceToHost,
                               s.stream));
      RLX_CUDA(cudaMemsetAsync(dev, 0, bytes, s.stream));
    }
  }

  // Reports the first check set in the host mirror.
  static void report_checks(const DeviceState& s, const Checks& checks) {
    for (const PendingCheck& c : checks) {
      const unsigned long long* h = s.check_host + 3 * c.slot;
      if (h[0]) c.report(int64_t(h[1]), int64_t(h[2]));
    }
  }

  // Copies the slots back, waits, and reports the first that was set.
  static void read_checks(DeviceState& s, const Checks& checks) {
    if (checks.empty()) return;
    queue_reads(s, checks);
    RLX_CUDA(cudaStreamSynchronize(s.stream));
    report_checks(s, checks);
  }

  // Reads this thread's deferred checks in order: those the device has passed, or all of
  // them (`wait`), or up to the last replay of `upto`'s graph (waiting for it).
  void resolve_deferred(bool wait, const Checks* upto = nullptr) {
    size_t must = wait ? t_deferred.size() : 0;
    for (size_t i = 0; i < t_deferred.size(); ++i)
      if (t_deferred[i].checks.get() == upto) must = std::max(must, i + 1);
    while (!t_deferred.empty()) {
      cudaEvent_t done = t_deferred.front().done;
      if (must > 0) {
        RLX_CUDA(cudaEventSynchronize(done));
        --must;
      } else {
        cudaError_t e = cudaEventQuery(done);
        if (e == cudaErrorNotReady) return;
        RLX_CUDA(e);
      }
      DeferredRead r = std::move(t_deferred.front());
      t_deferred.pop_front();
      cudaEventDestroy(r.done);
      report_checks(state(Device::cuda(r.device)), *r.checks);
    }
  }

  void copy(const Tensor& src, const Tensor& dst) override {
    if (src.dtype() != dst.dtype() || src.shape() != dst.shape())
      fail<ValueError>("copy", "expected tensors of one type, got ", src.type().str(), " and ",
                       dst.type().str());
    if (src.numel() == 0) return;
    Device sd = src.device(), dd = dst.device();
    if (!sd.is_cpu() && !dd.is_cpu()) {
      if (sd == dd) return copy_strided(src, dst, state(dd).stream);
      Tensor s = src.contiguous(),
             d = dst.is_contiguous() ? dst : Tensor::empty(dst.dtype(), dst.shape(), dd);
      RLX_CUDA(cudaMemcpyPeerAsync(d.data(), dd.index, s.data(), sd.index, s.nbytes(),
                                   state(dd).stream));
      if (d.data() != dst.data()) copy_strided(d, dst, state(dd).stream);
      return;
    }
    if (sd.is_cpu()) {  // host -> device
      Tensor s = src.contiguous();
      if (!dst.is_contiguous()) {
        Tensor d = Tensor::empty(dst.dtype(), dst.shape(), dd);
        to_device(s, d);
        return copy_strided(d, dst, state(dd).stream);
      }
      return to_device(s, dst);
    }
    if (!dst.is_contiguous())  // device -> host
      fail<NotSupported>("copy", "expected a contiguous host tensor to copy into, got strides ",
                         ints_str(dst.strides()));
    to_host(src.contiguous(), dst);
  }

  void* stream(Device d) override { return state(d).stream; }
  std::shared_ptr<void> mark(Device d) override {
    cudaEvent_t e = nullptr;
    RLX_CUDA(cudaEventCreate(&e));
    RLX_CUDA(cudaEventRecord(e, state(d).stream));
    return {e, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }};
  }
  double seconds_between(const void* from, const void* to) override {
    auto a = static_cast<cudaEvent_t>(const_cast<void*>(from)),
         b = static_cast<cudaEvent_t>(const_cast<void*>(to));
    RLX_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    RLX_CUDA(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
  }
  void synchronize(Device d) override { RLX_CUDA(cudaStreamSynchronize(state(d).stream)); }

  int sms() { return state(Device::cuda(current())).sms; }
  int major() { return state(Device::cuda(current())).major; }
  static int current() {
    int d = 0;
    RLX_CUDA(cudaGetDevice(&d));
    return d;
  }

  static std::string memory_str(DeviceState& s) {
    uint64_t reserved = 0, used = 0;
    cudaMemPoolGetAttribute(s.pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
    cudaMemPoolGetAttribute(s.pool, cudaMemPoolAttrUsedMemCurrent, &used);
    return str_cat(used >> 20, " MiB in use, ", reserved >> 20, " MiB reserved");
  }

 private:
  void stage_init(DeviceState& s) {
    if (s.staging) return;
    RLX_CUDA(cudaMallocHost(&s.staging, 2 * kStagingChunk));
    for (auto& e : s.done) RLX_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }

  // src: contiguous host; dst: contiguous device.
  void to_device(const Tensor& src, const Tensor& dst) {
    DeviceState& s = state(dst.device());
    // A small copy (an LLM step's token ids and positions) goes from pageable memory: the
    // driver stages it before cudaMemcpyAsync returns, so neither this thread nor the
    // device waits (each wait is a round trip that leaves the device idle).
    if (src.nbytes() <= kDirectCopy) {
      RLX_CUDA(
          cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyHostToDevice, s.stream));
      return;
    }
    std::lock_guard lock(s.staging_mu);
    stage_init(s);
    const auto* from = static_cast<const uint8_t*>(src.data());
    auto* to = static_cast<uint8_t*>(dst.data());
    size_t n = src.nbytes();
    bool used[2] = {false, false};
    for (size_t off = 0, k = 0; off < n; off += kStagingChunk, ++k) {
      size_t h = k % 2, len = std::min(kStagingChunk, n - off);
      auto* half = static_cast<uint8_t*>(s.staging) + h * kStagingChunk;
      if (used[h]) RLX_CUDA(cudaEventSynchronize(s.done[h]));
      std::memcpy(half, from + off, len);
      RLX_CUDA(cudaMemcpyAsync(to + off, half, len, cudaMemcpyHostToDevice, s.stream));
      RLX_CUDA(cudaEventRecord(s.done[h], s.stream));
      used[h] = true;
    }
    // The staging memory is reused by the next copy, and the caller may free src.
    RLX_CUDA(cudaStreamSynchronize(s.stream));
  }

  // src: contiguous device; dst: contiguous host.
  void to_host(const Tensor& src, const Tensor& dst) {
    DeviceState& s = state(src.device());
    std::lock_guard lock(s.staging_mu);
    stage_init(s);
    const auto* from = static_cast<const uint8_t*>(src.data());
    auto* to = static_cast<uint8_t*>(dst.data());
    size_t n = src.nbytes();
    auto drain = [&](size_t k, size_t off) {
      size_t h = k % 2, len = std::min(kStagingChunk, n - off);
      RLX_CUDA(cudaEventSynchronize(s.done[h]));
      std::memcpy(to + off, static_cast<uint8_t*>(s.staging) + h * kStagingChunk, len);
    };
    size_t k = 0, off = 0;
    for (; off < n; off += kStagingChunk, ++k) {
      size_t h = k % 2, len = std::min(kStagingChunk, n - off);
      auto* half = static_cast<uint8_t*>(s.staging) + h * kStagingChunk;
      RLX_CUDA(cudaMemcpyAsync(half, from + off, len, cudaMemcpyDeviceToHost, s.stream));
      RLX_CUDA(cudaEventRecord(s.done[h], s.stream));
      if (k > 0) drain(k - 1, off - kStagingChunk);
    }
    if (k > 0) drain(k - 1, off - kStagingChunk);
  }

  static constexpr size_t kMaxDevices = 64;
  std::array<std::once_flag, kMaxDevices> once_;
  std::array<std::unique_ptr<DeviceState>, kMaxDevices> states_;
};

CudaBackend& backend() {
  // Never destroyed: buffers released during static destruction still find it.
  static auto* b = new CudaBackend;
  return *b;
}

}  // namespace

int sm_count() { return backend().sms(); }

bool pdl_enabled() { return settings().cuda_pdl && backend().major() >= 9; }

MergedDims merge_dims(const std::vector<int64_t>& shape,
                      const std::vector<const std::vector<int64_t>*>& strides) {
  MergedDims m;
  m.stride.resize(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !m.size.empty();
    for (size_t k = 0; k < strides.size() && merge; ++k)
      merge = m.stride[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      m.size.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) m.stride[k].back() = (*strides[k])[d];
    } else {
      m.size.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) m.stride[k].push_back((*strides[k])[d]);
    }
  }
  return m;
}

unsigned long long* deferred_check(Device device, BadIndexReport report) {
  return backend().check_slot(device, std::move(report));
}

}  // namespace rlx::cuda

namespace rlx::detail {
DeviceBackend* cuda_backend() { return &cuda::backend(); }
}  // namespace rlx::detail

namespace rlx::cuda {

int device_count() {
  static const int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  }();
  return n;
}

bool available() { return device_count() > 0; }

void synchronize(int device) {
  detail::device_backend(Device::cuda(device)).synchronize(Device::cuda(device));
}

MemoryInfo memory_info(int device) {
  detail::device_backend(Device::cuda(device));
  auto& s = cuda::backend().state(Device::cuda(device));
  uint64_t reserved = 0, used = 0;
  RLX_CUDA(cudaMemPoolGetAttribute(s.pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  RLX_CUDA(cudaMemPoolGetAttribute(s.pool, cudaMemPoolAttrUsedMemCurrent, &used));
  return {size_t(reserved), size_t(used)};
}

Event::Event(int device) : device_(device) {
  detail::device_backend(Device::cuda(device));  // NotSupported without the device
  cuda::backend().state(Device::cuda(device));   // current device: this one
  cudaEvent_t e = nullptr;
  RLX_CUDA(cudaEventCreate(&e));
  event_ = e;
}

Event::~Event() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

Event::Event(Event&& o) noexcept
    : event_(std::exchange(o.event_, nullptr)), device_(o.device_), recorded_(o.recorded_) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
    event_ = std::exchange(o.event_, nullptr);
    device_ = o.device_;
    recorded_ = o.recorded_;
  }
  return *this;
}

namespace {
cudaEvent_t recorded(const void* e, bool was, const char* what) {
  if (!e) fail<ValueError>(what, "expected an Event, got one moved from");
  if (!was) fail<ValueError>(what, "expected a recorded Event, got one never recorded");
  return static_cast<cudaEvent_t>(const_cast<void*>(e));
}
}  // namespace

void Event::record() {
  if (!event_) fail<ValueError>("Event.record", "expected an Event, got one moved from");
  detail::DeviceRunGuard guard(true);  // not into another thread's CUDA Graph capture
  auto& s = cuda::backend().state(Device::cuda(device_));
  RLX_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(event_), s.stream));
  recorded_ = true;
}

bool Event::done() const {
  if (!event_ || !recorded_) return false;
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (e == cudaErrorNotReady) return false;
  RLX_CUDA(e);
  return true;
}

void Event::synchronize() const {
  RLX_CUDA(cudaEventSynchronize(recorded(event_, recorded_, "Event.synchronize")));
}

double Event::elapsed_ms(const Event& end) const {
  cudaEvent_t a = recorded(event_, recorded_, "Event.elapsed_ms");
  cudaEvent_t b = recorded(end.event_, end.recorded_, "Event.elapsed_ms");
  if (end.device_ != device_)
    fail<ValueError>("Event.elapsed_ms", "expected two marks of one device, got cuda:", device_,
                     " and cuda:", end.device_);
  RLX_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  RLX_CUDA(cudaEventElapsedTime(&ms, a, b));
  return double(ms);
}

struct Pipeline::Impl {
  int device = 0;
  struct Copy {
    void* host = nullptr;  // pinned
    size_t capacity = 0;
    cudaEvent_t done = nullptr;
    DType dtype = DType::f32;
    std::vector<int64_t> shape;
  };
  std::deque<Copy> queued;  // oldest first
  std::vector<Copy> spare;  // taken, their memory and events kept for the next copy
};

Pipeline::Pipeline(int device) : impl_(std::make_unique<Impl>()) {
  detail::device_backend(Device::cuda(device));  // NotSupported without the device
  cuda::backend().state(Device::cuda(device));
  impl_->device = device;
  ++cuda::t_defer;
}

Pipeline::~Pipeline() {
  if (--cuda::t_defer == 0) try {
      cuda::backend().resolve_deferred(true);
    } catch (const std::exception&) {  // a destructor does not throw: finish() reports
      cuda::t_deferred.clear();
    }
  for (Impl::Copy& c : impl_->queued) cudaEventSynchronize(c.done);  // before its memory goes
  auto release = [](Impl::Copy& c) {
    if (c.host) cudaFreeHost(c.host);
    if (c.done) cudaEventDestroy(c.done);
  };
  for (Impl::Copy& c : impl_->queued) release(c);
  for (Impl::Copy& c : impl_->spare) release(c);
}

void Pipeline::read_back(const Tensor& t) {
  const Device d = Device::cuda(impl_->device);
  if (t.device() != d)
    fail<ValueError>("Pipeline.read_back", "expected a tensor on ", d.str(), ", got one on ",
                     t.device().str());
  Tensor src = t.contiguous();
  Impl::Copy c;
  if (!impl_->spare.empty()) {
    c = std::move(impl_->spare.back());
    impl_->spare.pop_back();
  }
  if (c.capacity < src.nbytes()) {
    if (c.host) RLX_CUDA(cudaFreeHost(c.host));
    c.host = nullptr;
    RLX_CUDA(cudaMallocHost(&c.host, std::max<size_t>(src.nbytes(), 64)));
    c.capacity = std::max<size_t>(src.nbytes(), 64);
  }
  if (!c.done) RLX_CUDA(cudaEventCreateWithFlags(&c.done, cudaEventDisableTiming));
  c.dtype = src.dtype();
  c.shape = src.shape();
  detail::DeviceRunGuard guard(true);  // not into another thread's CUDA Graph capture
  cudaStream_t stream = cuda::backend().state(d).stream;
  RLX_CUDA(cudaMemcpyAsync(c.host, src.data(), src.nbytes(), cudaMemcpyDeviceToHost, stream));
  RLX_CUDA(cudaEventRecord(c.done, stream));
  impl_->queued.push_back(std::move(c));
}

Tensor Pipeline::take() {
  if (impl_->queued.empty())
    fail<ValueError>("Pipeline.take", "expected a copy queued by read_back, got none");
  Impl::Copy c = std::move(impl_->queued.front());
  impl_->queued.pop_front();
  RLX_CUDA(cudaEventSynchronize(c.done));
  Tensor out = Tensor::empty(c.dtype, c.shape);
  std::memcpy(out.data(), c.host, out.nbytes());
  impl_->spare.push_back(std::move(c));
  cuda::backend().resolve_deferred(false);  // the replays before this copy are done
  return out;
}

size_t Pipeline::queued() const { return impl_->queued.size(); }

void Pipeline::finish() {
  for (Impl::Copy& c : impl_->queued) RLX_CUDA(cudaEventSynchronize(c.done));
  cuda::backend().resolve_deferred(true);
}

unsigned long long* deferred_check(const KernelContext& ctx,
                                   std::function<void(int64_t value, int64_t axis)> report) {
  if (ctx.device.kind != DeviceKind::cuda || !ctx.stream)
    fail<DeviceError>(ctx.op.name, "expected a CUDA kernel's context for deferred_check, got ",
                      ctx.device.str());
  return cuda::deferred_check(ctx.device, std::move(report));
}

size_t empty_cache(int device) {
  size_t before = memory_info(device).reserved;
  auto& s = cuda::backend().state(Device::cuda(device));
  RLX_CUDA(cudaStreamSynchronize(s.stream));
  RLX_CUDA(cudaMemPoolTrimTo(s.pool, 0));
  size_t after = memory_info(device).reserved;
  return before > after ? before - after : 0;
}

}  // namespace rlx::cuda
