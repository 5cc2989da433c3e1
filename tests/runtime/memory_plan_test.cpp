// The memory planner: liveness and arena sizes on hand-computed graphs, in-place reuse
// where it is safe and not where it is not, views (of outputs too), a plan per binding
// of the symbolic dims, runs from several threads, and RLX_ARENA=0. Every graph runs
// with the arena and without, and the results must agree.
#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "rlx/rlx.h"
#include "rlx/settings.h"
#include "rlx/text.h"

namespace rlx {
namespace {

// No passes: the graphs run as written, so the expected plans are the hand-computed ones.
CompiledGraph compile0(const Graph& g, bool arena = true) {
  settings().arena = arena;
  CompileOptions o;
  o.opt_level = 0;
  o.cache = false;  // a program of its own: the tests count its plans
  CompiledGraph cg = Session().compile(g, o);
  settings().arena = true;
  return cg;
}

TensorMap random_inputs(const Graph& g, int64_t n = 0, uint64_t seed = 1) {
  TensorMap in;
  for (const Arg& a : g.args()) {
    std::vector<int64_t> shape;
    for (const Dim& d : a.value.shape()) shape.push_back(d.is_static() ? d.value() : n);
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    std::vector<double> v(static_cast<size_t>(count));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = double((i * 7 + seed * 13) % 17) / 8.0 - 1.0;  // in [-1, 1)
    in.emplace(a.name, Tensor::from_doubles(a.value.dtype(), shape, v));
  }
  return in;
}

// Runs g with the arena and without; the outputs must be equal, bit for bit.
TensorMap expect_same_as_without_arena(const Graph& g, const TensorMap& in) {
  TensorMap with = compile0(g).run(in);
  TensorMap without = compile0(g, false).run(in);
  for (const auto& [name, t] : without) {
    SCOPED_TRACE(name);
    EXPECT_EQ(with.at(name).shape(), t.shape());
    EXPECT_EQ(with.at(name).to_doubles(), t.to_doubles());
  }
  return with;
}

std::unique_ptr<Graph> parse(const std::string& text) { return parse_graph(text); }

// --- liveness and packing ---------------------------------------------------------------

void neg_f32(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  const float* x = in[0].data_as<float>();
  float* y = out[0].data_as<float>();
  for (int64_t i = 0; i < out[0].numel(); ++i) y[i] = -x[i];
}

void add_f32(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  const float* a = in[0].data_as<float>();
  const float* b = in[1].data_as<float>();
  float* y = out[0].data_as<float>();
  for (int64_t i = 0; i < out[0].numel(); ++i) y[i] = a[i] + b[i];
}

TEST(MemoryPlan, ChainPeakIsTheLargestLiveSet) {
  // Kernels without the in-place flag, so liveness alone decides. Each value is 1 KiB:
  // a lives over nodes 0-2, b 1-2, c 2-3, d 3-4 (read by the output's node). Three are
  // live at node 2, so the arena is 3 KiB; d reuses a's (or b's) place.
  KernelRegistry kernels;
  kernels.add("neg", DeviceKind::cpu, neg_f32);
  kernels.add("add", DeviceKind::cpu, add_f32);
  auto g = parse(R"(graph main(%x: f32[256]) {
    %a = neg(%x) : f32[256]
    %b = neg(%a) : f32[256]
    %c = add(%a, %b) : f32[256]
    %d = neg(%c) : f32[256]
    %y = neg(%d) : f32[256]
    return y=%y
  })");
  CompileOptions o;
  o.opt_level = 0;
  o.kernels = &kernels;
  CompiledGraph cg = Session().compile(*g, o);
  MemoryStats m = cg.memory_stats();
  EXPECT_EQ(m.arena_bytes, 3072u);
  EXPECT_EQ(m.live_bytes, 3072u);
  EXPECT_EQ(m.intermediate_bytes, 4096u);
  EXPECT_EQ(m.intermediates, 4);
  EXPECT_EQ(m.output_bytes, 1024u);
  EXPECT_EQ(m.input_bytes, 1024u);
  EXPECT_EQ(m.param_bytes, 0u);
  EXPECT_EQ(m.inplace, 0);
  EXPECT_EQ(m.views, 0);
  // a = -x, b = x, c = 0: y is zero.
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) - 100;
  for (int run = 0; run < 2; ++run) {
    auto out = cg.run({{"x", Tensor::from_vector(x, {256})}});
    for (float v : out.at("y").to_vector<float>()) EXPECT_EQ(v, 0.0f);
  }
}

TEST(MemoryPlan, MixedSizesPackIntoTheGaps) {
  // Intervals (node numbers) and sizes: s 0-1 4 KiB, t 1-2 64 B (a scalar, aligned), u
  // 2-5 1 KiB, v 3-4 4 KiB, r 4-5 64 B. The largest live set is u + v + r at node 4; v
  // goes where s was, r where t was.
  auto g = parse(R"(graph main(%x: f32[1024], %w: f32[256]) {
    %s = exp(%x) : f32[1024]
    %t = sum(%s) {axes=[0], keepdims=false} : f32[]
    %u = mul(%w, %t) : f32[256]
    %v = exp(%x) : f32[1024]
    %r = sum(%v) {axes=[0], keepdims=false} : f32[]
    %y = add(%u, %r) : f32[256]
    return y=%y
  })");
  MemoryStats m = compile0(*g).memory_stats();
  EXPECT_EQ(m.arena_bytes, 4096u + 1024u + 64u);
  EXPECT_EQ(m.live_bytes, m.arena_bytes);
  EXPECT_EQ(m.intermediate_bytes, 2 * 4096u + 1024u + 2 * 4u);
  EXPECT_EQ(m.intermediates, 5);
  EXPECT_EQ(m.inplace, 0);  // u's only input of its shape is a graph input
  expect_same_as_without_arena(*g, random_inputs(*g));
}

TEST(MemoryPlan, PackingStrategiesNeverOverlapLiveBlocks) {
  // A pseudo-random mix of intervals and sizes: every pair of blocks live at once must be
  // disjoint in memory, and the arena at least the largest live set.
  std::vector<detail::Block> blocks;
  uint64_t r = 42;
  auto next = [&] { return r = r * 6364136223846793005ull + 1442695040888963407ull; };
  for (int i = 0; i < 400; ++i) {
    int32_t start = int32_t(next() >> 33) % 300;
    int32_t len = int32_t(next() >> 33) % 40;
    size_t bytes = (size_t(next() >> 40) % 64 + 1) * 64;
    blocks.push_back({start, start + len, bytes, 0});
  }
  size_t peak_live = 0;
  for (int32_t t = 0; t < 340; ++t) {
    size_t live = 0;
    for (const auto& b : blocks)
      if (b.start <= t && t <= b.end) live += b.bytes;
    peak_live = std::max(peak_live, live);
  }
  for (auto packing : {detail::Packing::by_size, detail::Packing::by_time}) {
    std::vector<detail::Block> bs = blocks;
    size_t arena = detail::pack_blocks(bs, packing);
    EXPECT_GE(arena, peak_live);
    EXPECT_LE(arena, peak_live * 3 / 2);  // both are far better than that in practice
    for (size_t i = 0; i < bs.size(); ++i) {
      EXPECT_EQ(bs[i].offset % 64, 0u);
      EXPECT_LE(bs[i].offset + bs[i].bytes, arena);
      for (size_t j = i + 1; j < bs.size(); ++j) {
        bool in_time = bs[i].start <= bs[j].end && bs[j].start <= bs[i].end;
        bool in_memory =
            bs[i].offset < bs[j].offset + bs[j].bytes && bs[j].offset < bs[i].offset + bs[i].bytes;
        ASSERT_FALSE(in_time && in_memory) << i << " and " << j;
      }
    }
  }
}

// --- in place -------------------------------------------------------------------------

TEST(MemoryPlan, ElementwiseChainRunsInPlace) {
  // a = exp(x) cannot overwrite the graph input; b and c take over a's storage in turn;
  // the output gets its own memory. One 256-byte block in all.
  auto g = parse(R"(graph main(%x: f32[64]) {
    %a = exp(%x) : f32[64]
    %b = neg(%a) : f32[64]
    %c = tanh(%b) : f32[64]
    %y = mul(%c, %c) : f32[64]
    return y=%y
  })");
  MemoryStats m = compile0(*g).memory_stats();
  EXPECT_EQ(m.inplace, 2);
  EXPECT_EQ(m.arena_bytes, 256u);
  EXPECT_EQ(m.intermediate_bytes, 768u);
  TensorMap in = random_inputs(*g);
  TensorMap out = expect_same_as_without_arena(*g, in);
  std::vector<float> x = in.at("x").to_vector<float>(), y = out.at("y").to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    float c = std::tanh(-std::exp(x[i]));
    EXPECT_NEAR(y[i], c * c, 1e-6f);
  }
}

TEST(MemoryPlan, NoInPlaceOverAnInputUsedLater) {
  // b cannot take a's storage (c reads a after b); c may take a's or b's, both dying there.
  auto g = parse(R"(graph main(%x: f32[64]) {
    %a = exp(%x) : f32[64]
    %b = neg(%a) : f32[64]
    %c = add(%a, %b) : f32[64]
    %y = neg(%c) : f32[64]
    return y=%y
  })");
  MemoryStats m = compile0(*g).memory_stats();
  EXPECT_EQ(m.inplace, 1);
  EXPECT_EQ(m.arena_bytes, 512u);
  expect_same_as_without_arena(*g, random_inputs(*g));
}

TEST(MemoryPlan, NoInPlaceOverGraphArgs) {
  auto g = parse(R"(graph main(%x: f32[64], param %w: f32[64]) {
    %a = add(%x, %w) : f32[64]
    %y = neg(%a) : f32[64]
    return y=%y
  })");
  CompiledGraph cg = compile0(*g);
  EXPECT_EQ(cg.memory_stats().inplace, 0);
  EXPECT_EQ(cg.memory_stats().param_bytes, 256u);
  Tensor x = Tensor::full(DType::f32, {64}, 1.5), w = Tensor::full(DType::f32, {64}, 2);
  cg.set_param("w", w);
  auto out = cg.run({{"x", x}});
  for (float v : out.at("y").to_vector<float>()) EXPECT_EQ(v, -3.5f);
  for (float v : x.to_vector<float>()) EXPECT_EQ(v, 1.5f);  // the args are left alone
  for (float v : w.to_vector<float>()) EXPECT_EQ(v, 2.0f);
}

TEST(MemoryPlan, NoInPlaceOverABroadcastInput) {
  // a [1,64] and b [4,1] both die at the comparison, but neither has the output's shape
  // (the bool output even has a's byte size).
  auto g = parse(R"(graph main(%x: f32[1,64], %z: f32[4,1]) {
    %a = exp(%x) : f32[1,64]
    %b = exp(%z) : f32[4,1]
    %c = lt(%a, %b) : bool[4,64]
    %y = logical_not(%c) : bool[4,64]
    return y=%y
  })");
  EXPECT_EQ(compile0(*g).memory_stats().inplace, 0);
  expect_same_as_without_arena(*g, random_inputs(*g));
  // The other way round: the big input of the right shape is overwritten while the
  // broadcast one is read whole.
  auto g2 = parse(R"(graph main(%x: f32[4,64], %z: f32[1,64]) {
    %a = exp(%x) : f32[4,64]
    %b = exp(%z) : f32[1,64]
    %c = sub(%b, %a) : f32[4,64]
    %y = neg(%c) : f32[4,64]
    return y=%y
  })");
  EXPECT_EQ(compile0(*g2).memory_stats().inplace, 1);
  expect_same_as_without_arena(*g2, random_inputs(*g2));
}

TEST(MemoryPlan, NoInPlaceWhenAViewOfTheInputIsReadToo) {
  // r is a view of a's first row (a contiguous slice), read at the same node that could
  // overwrite a: writing row 1 would change what row 2 reads.
  auto g = parse(R"(graph main(%x: f32[4,16]) {
    %a = exp(%x) : f32[4,16]
    %r = slice(%a) {axes=[0], starts=[0], steps=[1], stops=[1]} : f32[1,16]
    %c = add(%a, %r) : f32[4,16]
    %y = neg(%c) : f32[4,16]
    return y=%y
  })");
  MemoryStats m = compile0(*g).memory_stats();
  EXPECT_EQ(m.views, 1);
  EXPECT_EQ(m.inplace, 0);  // nor is y in place: it is an output
  expect_same_as_without_arena(*g, random_inputs(*g));
}

// --- views ----------------------------------------------------------------------------

TEST(MemoryPlan, ViewsOfOutputsKeepTheirStorageOutOfTheArena) {
  // o1 is a reshape of a, o2 a contiguous slice of b: a and b are returned through their
  // views, so they get memory of their own; c is the only arena value. Were a or b in the
  // arena, c (written after them) could take their place and change the outputs.
  auto g = parse(R"(graph main(%x: f32[4,16]) {
    %a = exp(%x) : f32[4,16]
    %o1 = reshape(%a) {shape=[64]} : f32[64]
    %b = neg(%x) : f32[4,16]
    %o2 = slice(%b) {axes=[0], starts=[1], steps=[1], stops=[3]} : f32[2,16]
    %c = tanh(%x) : f32[4,16]
    %o3 = neg(%c) : f32[4,16]
    return o1=%o1, o2=%o2, o3=%o3
  })");
  MemoryStats m = compile0(*g).memory_stats();
  EXPECT_EQ(m.views, 2);
  EXPECT_EQ(m.intermediates, 1);
  EXPECT_EQ(m.arena_bytes, 256u);
  EXPECT_EQ(m.output_bytes, 256u + 128u + 256u);
  TensorMap in = random_inputs(*g);
  TensorMap out = expect_same_as_without_arena(*g, in);
  std::vector<float> x = in.at("x").to_vector<float>();
  std::vector<float> o1 = out.at("o1").to_vector<float>(), o2 = out.at("o2").to_vector<float>();
  for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(o1[i], std::exp(x[i]), 1e-6f * std::exp(x[i]));
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(o2[i], -x[16 + i]);
}

TEST(MemoryPlan, ContiguousSlicesAreViews) {
  struct Case {
    const char* slice;  // attrs
    const char* type;   // the slice's type
    bool view;
  };
  const Case cases[] = {
      {"axes=[0], starts=[1], steps=[1], stops=[3]", "f32[2,3,8]", true},  // rows
      {"axes=[0, 1], starts=[2, 1], steps=[1, 1], stops=[3, 3]", "f32[1,2,8]", true},
      {"axes=[2], starts=[0], steps=[1], stops=[8]", "f32[4,3,8]", true},     // whole
      {"axes=[0], starts=[3], steps=[-1], stops=[2]", "f32[1,3,8]", true},    // one row, back
      {"axes=[2], starts=[0], steps=[1], stops=[4]", "f32[4,3,4]", false},    // columns
      {"axes=[1], starts=[1], steps=[1], stops=[2]", "f32[4,1,8]", false},    // one per row
      {"axes=[0], starts=[0], steps=[2], stops=[4]", "f32[2,3,8]", false},    // every other
      {"axes=[0], starts=[3], steps=[-1], stops=[-5]", "f32[4,3,8]", false},  // reversed
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.slice);
    auto g = parse(str_cat(R"(graph main(%x: f32[4,3,8]) {
      %a = exp(%x) : f32[4,3,8]
      %s = slice(%a) {)",
                           c.slice, "} : ", c.type, R"(
      %y = neg(%s) : )",
                           c.type, R"(
      return y=%y
    })"));
    MemoryStats m = compile0(*g).memory_stats();
    EXPECT_EQ(m.views, c.view ? 1 : 0);
    expect_same_as_without_arena(*g, random_inputs(*g));
  }
}

TEST(MemoryPlan, SliceViewsWithSymbolicDims) {
  // Rows of [batch, 8]: a view whatever batch is; columns never.
  auto g = parse(R"(graph main(%x: f32[batch,8]) {
    %a = exp(%x) : f32[batch,8]
    %r = slice(%a) {axes=[0], starts=[1], steps=[1], stops=[9223372036854775807]} : f32[?,8]
    %c = slice(%a) {axes=[1], starts=[2], steps=[1], stops=[4]} : f32[batch,2]
    %y = neg(%r) : f32[?,8]
    %z = neg(%c) : f32[batch,2]
    return y=%y, z=%z
  })");
  CompiledGraph cg = compile0(*g);
  EXPECT_EQ(cg.memory_stats({{"batch", 3}}).views, 1);
  for (int64_t n : {1, 3, 5}) expect_same_as_without_arena(*g, random_inputs(*g, n));
}

// --- plans per binding ------------------------------------------------------------------

TEST(MemoryPlan, OnePlanPerBindingOfTheDims) {
  // Per row of [n, 32] f32: a, b 128 B each, live together at node 1; then c over a.
  auto g = parse(R"(graph main(%x: f32[n,32]) {
    %a = exp(%x) : f32[n,32]
    %b = tanh(%x) : f32[n,32]
    %c = add(%a, %b) : f32[n,32]
    %y = neg(%c) : f32[n,32]
    return y=%y
  })");
  CompiledGraph cg = compile0(*g);
  MemoryStats two = cg.memory_stats({{"n", 2}});
  MemoryStats eight = cg.memory_stats({{"n", 8}});
  EXPECT_EQ(two.arena_bytes, 2 * 256u);
  EXPECT_EQ(eight.arena_bytes, 2 * 1024u);
  EXPECT_EQ(eight.intermediate_bytes, 3 * 1024u);
  EXPECT_EQ(eight.inplace, 1);
  EXPECT_EQ(eight.input_bytes, 1024u);
  EXPECT_EQ(cg.cached_plans(), 2u);
  for (int64_t n : {2, 8, 2, 5}) expect_same_as_without_arena(*g, random_inputs(*g, n));
  cg.run(random_inputs(*g, 8));  // the plan memory_stats made serves the run
  EXPECT_EQ(cg.cached_plans(), 2u);
  cg.run(random_inputs(*g, 5));
  EXPECT_EQ(cg.cached_plans(), 3u);
}

TEST(MemoryPlan, StatsNeedEverySymbolBound) {
  auto g = parse(R"(graph main(%x: f32[n,4], param %w: f32[m]) {
    %y = exp(%x) : f32[n,4]
    return y=%y, w=%w
  })");
  CompiledGraph cg = compile0(*g);
  try {
    cg.memory_stats({{"n", 2}});
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("dim 'm' of param 'w'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cg.memory_stats({{"n", -1}, {"m", 2}}), ValueError);
  MemoryStats m = cg.memory_stats({{"n", 2}, {"m", 3}});
  EXPECT_EQ(m.param_bytes, 12u);
  EXPECT_EQ(m.output_bytes, 32u + 12u);
  auto u = parse(R"(graph main(%x: f32[?]) {
    %y = exp(%x) : f32[?]
    return y=%y
  })");
  EXPECT_THROW(compile0(*u).memory_stats({{"?", 2}}), ValueError);
  EXPECT_THROW(CompiledGraph().memory_stats(), ValueError);
}

// --- kernels that hand back an input --------------------------------------------------

TEST(MemoryPlan, AScanOfLengthZeroReturnsItsCarryIntact) {
  // The scan runs no step, so its carry output is its carry input c: arena memory that d
  // takes over once c is dead. The runtime copies such outputs out of the arena.
  auto g = parse(R"(graph main(%x: f32[16], %xs: f32[0,16]) {
    %c = exp(%x) : f32[16]
    %carry, %ys = scan(%c, %xs) {length=-1, num_carry=1, reverse=false} [
      graph body(%k: f32[16], %xt: f32[16]) {
        return out0=%k, out1=%xt
      }
    ] : f32[16], f32[0,16]
    %d = neg(%x) : f32[16]
    %e = neg(%d) : f32[16]
    %y = add(%carry, %e) : f32[16]
    return y=%y
  })");
  TensorMap in = random_inputs(*g);
  TensorMap out = expect_same_as_without_arena(*g, in);
  std::vector<float> x = in.at("x").to_vector<float>(), y = out.at("y").to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], std::exp(x[i]) + x[i], 1e-5f);
}

TEST(MemoryPlan, ACondThatReturnsItsOperandKeepsItLive) {
  // With p true, c is a itself (the branch returns its argument): a must outlive c, or d
  // and e would take its place before y reads c.
  auto g = parse(R"(graph main(%p: bool[], %x: f32[16]) {
    %a = exp(%x) : f32[16]
    %c = cond(%p, %a) [
      graph then(%k: f32[16]) {
        return out0=%k
      },
      graph else(%k: f32[16]) {
        %n = neg(%k) : f32[16]
        return out0=%n
      }
    ] : f32[16]
    %d = neg(%x) : f32[16]
    %e = tanh(%d) : f32[16]
    %y = add(%c, %e) : f32[16]
    return y=%y
  })");
  for (bool p : {true, false}) {
    TensorMap in = random_inputs(*g);
    in.at("p") = Tensor::from_vector<bool>({p}, {});
    TensorMap out = expect_same_as_without_arena(*g, in);
    std::vector<float> x = in.at("x").to_vector<float>(), y = out.at("y").to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(y[i], (p ? 1 : -1) * std::exp(x[i]) + std::tanh(-x[i]), 1e-5f);
  }
}

// --- threads and the switch -------------------------------------------------------------

std::unique_ptr<Graph> mlp() {
  auto g = std::make_unique<Graph>();
  Value x = g->input("x", {DType::f32, {Dim::sym("batch"), 32}});
  Value w1 = g->param("w1", {DType::f32, {32, 64}});
  Value w2 = g->param("w2", {DType::f32, {64, 32}});
  Value h = gelu(matmul(x, w1));
  Value y = tanh(matmul(h * h + 1.0, w2)) + x;
  g->output(softmax(y * y - 0.5), "y");
  g->output(sum(y), "total");
  return g;
}

TEST(MemoryPlan, ConcurrentRunsEachHaveTheirOwnArena) {
  auto g = mlp();
  CompiledGraph cg = Session().compile(*g);  // the default pipeline: whatever it emits
  TensorMap params = random_inputs(*g, 1, 3);
  cg.set_param("w1", params.at("w1"));
  cg.set_param("w2", params.at("w2"));
  std::vector<TensorMap> inputs, expected;
  for (int i = 0; i < 8; ++i) {
    inputs.push_back({{"x", random_inputs(*g, 4 + i % 3, uint64_t(i)).at("x")}});
    expected.push_back(cg.run(inputs.back()));
  }
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 25; ++r) {
        size_t i = size_t(t * 25 + r) % inputs.size();
        TensorMap out = cg.run(inputs[i]);
        for (const auto& [name, v] : expected[i])
          if (out.at(name).to_doubles() != v.to_doubles()) ++mismatches;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(cg.memory_stats({{"batch", 4}}).arena_bytes, 0u);
}

TEST(MemoryPlan, ArenaOffGivesTheSameResults) {
  auto g = mlp();
  TensorMap params = random_inputs(*g, 1, 3);
  CompiledGraph on = Session().compile(*g);
  settings().arena = false;
  CompiledGraph off = Session().compile(*g);
  settings().arena = true;
  for (CompiledGraph* cg : {&on, &off}) {
    cg->set_param("w1", params.at("w1"));
    cg->set_param("w2", params.at("w2"));
  }
  TensorMap in{{"x", random_inputs(*g, 6).at("x")}};
  TensorMap a = on.run(in), b = off.run(in);
  for (const auto& [name, v] : a) EXPECT_EQ(v.to_doubles(), b.at(name).to_doubles()) << name;
  // The plan is the same either way; only the run ignores it.
  EXPECT_EQ(on.memory_stats({{"batch", 6}}).arena_bytes,
            off.memory_stats({{"batch", 6}}).arena_bytes);
}

}  // namespace
}  // namespace rlx
