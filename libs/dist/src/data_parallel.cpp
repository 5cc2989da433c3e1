// Data-parallel training: the gradients all-reduced in buckets inside the train step,
// params broadcast from one rank, and the distributed sampler.
#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "internal.h"
#include "rlx/ops.h"
#include "rlx/rules.h"

namespace rlx::dist {

namespace {

// One bucket: the gradients (by index) of one dtype that are reduced together.
struct Bucket {
  DType dtype;
  std::vector<size_t> members;
  size_t bytes = 0;
};

// Fills buckets from the last gradient to the first (the backward pass makes the last
// layers' first), one open bucket per dtype.
std::vector<Bucket> make_buckets(const std::vector<Value>& grads, size_t limit) {
  std::vector<Bucket> done;
  std::map<DType, Bucket> open;
  for (size_t i = grads.size(); i-- > 0;) {
    DType d = grads[i].dtype();
    Bucket& b = open.try_emplace(d, Bucket{d, {}, 0}).first->second;
    b.members.push_back(i);
    b.bytes += size_t(*grads[i].type().numel()) * dtype_size(d);
    if (b.bytes >= limit) {
      done.push_back(std::move(b));
      open.erase(d);
    }
  }
  for (auto& [d, b] : open) done.push_back(std::move(b));
  return done;
}

std::vector<Value> reduce_grads(const std::vector<Value>& grads, const DataParallelOptions& dp) {
  std::vector<Value> out(grads.size());
  std::vector<Value> bucketable;
  std::vector<size_t> where;  // index into grads of each bucketable one
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].type().is_static()) {
      bucketable.push_back(grads[i]);
      where.push_back(i);
    } else {
      out[i] = all_reduce(grads[i], dp.op);  // a symbolic shape cannot be sliced back
    }
  }
  for (const Bucket& b : make_buckets(bucketable, std::max<size_t>(dp.bucket_bytes, 1))) {
    if (b.members.size() == 1) {
      size_t i = b.members[0];
      out[where[i]] = all_reduce(bucketable[i], dp.op);
      continue;
    }
    std::vector<Value> flat;
    for (size_t i : b.members) flat.push_back(reshape(bucketable[i], {-1}));
    Value reduced = all_reduce(op("concat", flat, {{"axis", int64_t(0)}}), dp.op);
    int64_t off = 0;
    for (size_t i : b.members) {
      Value g = bucketable[i];
      int64_t n = *g.type().numel();
      Value part = op("slice", {reduced}, {{"starts", IntList{off}}, {"stops", IntList{off + n}}});
      out[where[i]] = reshape(part, IntList(static_sizes(g.shape())));
      off += n;
    }
  }
  return out;
}

}  // namespace

void data_parallel(train::TrainerOptions& options, const ProcessGroup& pg,
                   const DataParallelOptions& dp) {
  if (dp.op != ReduceOp::sum && dp.op != ReduceOp::mean)
    fail<ValueError>("dist.data_parallel", "expected op sum or mean for gradients, got ",
                     reduce_op_name(dp.op));
  options.writes_checkpoints = pg.rank() == 0;
  // Also for one rank (the collectives are copies there): the same graph whatever the size.
  options.grad_transform = [dp](Graph&, const std::vector<std::string>&, std::vector<Value> grads) {
    return reduce_grads(grads, dp);
  };
}

void broadcast_params(train::Trainer& trainer, const ProcessGroup& pg, int root) {
  if (root < 0 || root >= pg.size())
    fail<ValueError>("dist.broadcast_params", "expected root in [0, ", pg.size(), "), got ", root);
  if (pg.size() == 1) return;
  const auto& states = trainer.state_names();
  std::vector<std::string> names;
  for (const Arg& a : trainer.train_graph().args())
    if (a.kind == ArgKind::param && std::find(states.begin(), states.end(), a.name) == states.end())
      names.push_back(a.name);
  // One graph for every param: one compile, the broadcasts in a fixed order.
  Graph g("dist.broadcast_params");
  TensorMap in;
  for (const std::string& n : names) {
    Tensor t = trainer.param(n);
    if (!t.defined())
      fail<ValueError>("dist.broadcast_params", "expected param '", n,
                       "' to be set first, got none");
    g.output(broadcast(g.input(n, t.type()), root), n);
    in.emplace(n, t);
  }
  Device device = in.empty() ? Device::cpu() : in.begin()->second.device();
  TensorMap out = Session(device).compile(g).run(in);
  for (const std::string& n : names) trainer.set_param(n, out.at(n));
}

DistributedSampler::DistributedSampler(int64_t dataset_size, const ProcessGroup& pg, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : n_(dataset_size),
      rank_(pg.rank()),
      size_(pg.size()),
      shuffle_(shuffle),
      drop_last_(drop_last),
      seed_(seed) {
  if (n_ < 0) fail<ValueError>("dist.DistributedSampler", "expected a dataset size >= 0, got ", n_);
  if (drop_last_ && n_ < size_)
    fail<ValueError>("dist.DistributedSampler", "expected at least one sample per rank (", size_,
                     ") with drop_last, got ", n_);
}

int64_t DistributedSampler::num_samples() const {
  return drop_last_ ? n_ / size_ : (n_ + size_ - 1) / size_;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all(static_cast<size_t>(n_));
  std::iota(all.begin(), all.end(), 0);
  if (shuffle_) {
    // A Fisher-Yates of our own: std::shuffle's algorithm is the library's choice, and
    // every rank must draw the same permutation.
    std::mt19937_64 rng(seed_ + uint64_t(epoch_));
    for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[rng() % i]);
  }
  int64_t total = num_samples() * size_;
  for (int64_t i = n_; i < total; ++i) all.push_back(all[size_t(i % std::max<int64_t>(n_, 1))]);
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total; i += size_) mine.push_back(all[size_t(i)]);
  return mine;
}

}  // namespace rlx::dist
