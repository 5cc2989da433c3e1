// CUDA Graphs for device programs with static shapes. A run is captured once (its launches
// recorded, not run) and replayed afterwards with one launch, which takes the per-kernel
// launch cost off the host and the gaps between kernels off the device.
//
// A graph's addresses are fixed when it is captured, so a capture belongs to
//   - the storage of its arguments: a replay needs the same tensors (or tensors at the same
//     addresses), as when weights are set once, or when a training loop feeds each step
//     the outputs of the one before (those sit in one of the arenas below, at the same
//     offsets every time, so two captures alternate);
//   - an arena holding every intermediate and output: the outputs handed to the caller are
//     slices of it and keep it busy; a capture replays only while its arena is free.
// The first run of a binding is eager (it compiles NVRTC kernels, picks library
// algorithms, uploads constants). Runs that cannot be captured (a kernel that waits for
// the device, memory allocated and kept) fall back to eager runs, and so does a binding
// whose captures are not replayed.
#include <cstdint>
#include <mutex>
#include <shared_mutex>

#include "runtime/device_backend.h"
#include "runtime/program.h"

namespace rlx::detail {

namespace {

constexpr size_t kMaxArenas = 3;  // per binding: the caller may hold two runs' outputs
constexpr size_t kMaxRuns = 8;    // captures kept per binding
constexpr int kMaxUnreplayed = 4;

// A capture records whatever reaches the device's stream, from any thread: device runs on
// other threads wait while one captures.
std::shared_mutex& capture_mutex() {
  static std::shared_mutex m;
  return m;
}
thread_local int t_run_depth = 0;  // device runs this thread is inside

}  // namespace

DeviceRunGuard::DeviceRunGuard(bool device) {
  if (device && t_run_depth++ == 0) lock_ = std::shared_lock(capture_mutex());
  counted_ = device;
}
DeviceRunGuard::~DeviceRunGuard() {
  if (counted_) --t_run_depth;
}

struct GraphRuns {
  MemoryPlan memory;  // the plan's, with the outputs in the arena too
  std::mutex mu;
  bool warm = false;  // an eager run came first
  bool off = false;   // this binding runs eagerly from now on
  int unreplayed = 0;
  std::vector<std::shared_ptr<Buffer>> arenas;  // free when this holds the only reference

  // Where output i of a replay comes from.
  struct Out {
    enum Kind { arena, arg, kept } kind = kept;
    size_t index = 0;    // the argument (arg)
    int64_t offset = 0;  // bytes into the arena or the argument
    DType dtype = DType::f32;
    std::vector<int64_t> shape;
    Tensor tensor;  // kept: the program's own tensor, copied for the caller
  };
  struct Run {
    std::vector<const void*> args;  // the argument storage the graph reads (null: host)
    std::vector<Tensor> slots;      // per host argument: its device copy the graph reads
    size_t arena = 0;
    std::shared_ptr<void> graph;
    std::vector<Out> outs;
    bool replayed = false;
  };
  std::vector<Run> runs;
};

std::shared_ptr<GraphRuns> Program::make_graph_runs(const Plan& plan,
                                                    std::span<const TensorType> args) const {
  auto gr = std::make_shared<GraphRuns>();
  gr->memory = plan_memory(graph(), lowered_.kernels, liveness_, args, plan.shapes, plan.dynamic,
                           Packing::by_size, /*outputs_in_arena=*/true);
  return gr;
}

std::optional<std::vector<Tensor>> Program::run_graph(const Plan& plan,
                                                      std::span<const Tensor> args) const {
  GraphRuns& gr = *plan.graphs;
  std::unique_lock lock(gr.mu, std::try_to_lock);  // another thread's run: eager
  if (!lock || gr.off || t_run_depth > 0) return std::nullopt;
  if (!gr.warm) {
    gr.warm = true;
    return std::nullopt;
  }
  const Graph& g = graph();
  // Device arguments are read where they are; host ones (a learning rate, a step count)
  // through device slots of the capture's own, refilled before each replay.
  auto staged = [&](size_t i) { return args[i].device() != device_; };
  std::vector<const void*> sig;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_contiguous()) return std::nullopt;  // a layout the capture did not see
    sig.push_back(staged(i) ? nullptr : args[i].data());
  }
  std::vector<Tensor> vals(g.num_values());
  auto set_args = [&](const std::vector<Tensor>& slots) {
    for (size_t i = 0; i < args.size(); ++i) {
      Tensor& v = vals[size_t(g.args()[i].value.id)];
      v = staged(i) ? slots[i] : args[i];
      if (staged(i)) backend_->copy(args[i], v);
    }
  };
  auto outputs = [&](const GraphRuns::Run& r) {
    std::vector<Tensor> result;
    for (const GraphRuns::Out& o : r.outs) {
      if (o.kind == GraphRuns::Out::kept) {
        result.push_back(o.tensor.clone());
        continue;
      }
      const Tensor* arg =
          o.kind == GraphRuns::Out::arg ? &vals[size_t(g.args()[o.index].value.id)] : nullptr;
      std::shared_ptr<Buffer> holder = arg ? arg->buffer() : gr.arenas[r.arena];
      auto* base = static_cast<uint8_t*>(arg ? arg->data() : holder->data());
      Tensor t = Tensor::wrap(o.dtype, o.shape, base + o.offset, device_, [holder](void*) {});
      // A host argument's slot is refilled by the next replay: the caller gets a copy.
      result.push_back(arg && staged(o.index) ? t.clone() : t);
    }
    return result;
  };

  for (GraphRuns::Run& r : gr.runs) {
    if (r.args != sig || gr.arenas[r.arena].use_count() != 1) continue;
    set_args(r.slots);
    {
      DeviceRunGuard guard(true);
      backend_->replay(r.graph.get(), device_);
    }
    ++graph_launches_;
    if (!r.replayed) --gr.unreplayed;
    r.replayed = true;
    return outputs(r);
  }
  if (gr.unreplayed >= kMaxUnreplayed) {
    gr.off = true;
    return std::nullopt;
  }

  // A new capture, into an arena no caller holds.
  size_t ai = 0;
  while (ai < gr.arenas.size() && gr.arenas[ai].use_count() != 1) ++ai;
  if (ai == gr.arenas.size()) {
    if (gr.arenas.size() == kMaxArenas) return std::nullopt;
    gr.arenas.push_back(Buffer::allocate(std::max<size_t>(gr.memory.arena_bytes, 1), device_));
  }
  const std::shared_ptr<Buffer>& arena = gr.arenas[ai];
  std::vector<Tensor> slots(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    if (staged(i)) slots[i] = Tensor::empty(args[i].dtype(), args[i].shape(), device_);
  set_args(slots);
  std::shared_ptr<void> captured;
  bool ok = true;
  {
    std::unique_lock capturing(capture_mutex());
    ++t_run_depth;
    if (backend_->begin_capture(device_)) {
      try {
        execute(plan, gr.memory, arena, vals, /*release=*/false);
      } catch (const std::exception&) {
        ok = false;  // the eager run that follows says what it was, if not the capture
      }
      captured = backend_->end_capture(device_);
    }
    --t_run_depth;
  }
  if (!ok || !captured) {
    gr.off = true;
    return std::nullopt;
  }

  // Each output: a slice of the arena or of an argument, or a tensor the program keeps.
  GraphRuns::Run run{sig, std::move(slots), ai, std::move(captured), {}, false};
  auto within = [](const Tensor& t, const uint8_t* lo, size_t bytes) {
    const auto* d = static_cast<const uint8_t*>(t.data());
    return t.is_contiguous() && d >= lo && d + t.nbytes() <= lo + bytes;
  };
  for (const Output& o : g.outputs()) {
    const Tensor& t = vals[size_t(o.value.id)];
    const Node* p = g.producer(o.value);
    const auto* d = static_cast<const uint8_t*>(t.data());
    GraphRuns::Out out{GraphRuns::Out::kept, 0, 0, t.dtype(), t.shape(), {}};
    if (p && (p->op->name == "constant" || kept_on_device(size_t(p - g.nodes().data())))) {
      out.tensor = t;
    } else if (within(t, static_cast<const uint8_t*>(arena->data()), arena->size())) {
      out.kind = GraphRuns::Out::arena;
      out.offset = d - static_cast<const uint8_t*>(arena->data());
    } else {
      for (size_t a = 0; a < g.args().size() && out.kind == GraphRuns::Out::kept; ++a) {
        const Tensor& at = vals[size_t(g.args()[a].value.id)];
        const auto* ab = static_cast<const uint8_t*>(at.data());
        if (t.buffer() != at.buffer() || !within(t, ab, at.nbytes())) continue;
        out.kind = GraphRuns::Out::arg;
        out.index = a;
        out.offset = d - ab;
      }
      if (out.kind == GraphRuns::Out::kept) {  // storage the capture allocated
        gr.off = true;
        return std::nullopt;
      }
    }
    run.outs.push_back(std::move(out));
  }
  if (gr.runs.size() == kMaxRuns) {
    if (!gr.runs.front().replayed) --gr.unreplayed;
    gr.runs.erase(gr.runs.begin());
  }
  ++gr.unreplayed;
  gr.runs.push_back(std::move(run));
  {
    DeviceRunGuard guard(true);
    backend_->replay(gr.runs.back().graph.get(), device_);
  }
  ++graph_captures_;
  ++graph_launches_;
  return outputs(gr.runs.back());
}

}  // namespace rlx::detail
