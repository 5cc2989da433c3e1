#include "sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model.h"

namespace demo {

namespace {

// Picks an index from logits: top-k filter, softmax at `temperature`, one draw.
int64_t pick(std::vector<double> logits, const SampleOptions& o, std::mt19937_64& rng) {
  std::vector<size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  size_t k = o.top_k > 0 ? std::min(size_t(o.top_k), order.size()) : order.size();
  std::partial_sort(order.begin(), order.begin() + ptrdiff_t(k), order.end(),
                    [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  std::vector<double> weights(k);
  for (size_t i = 0; i < k; ++i)  // shifted by the max: exp never overflows
    weights[i] = std::exp((logits[order[i]] - logits[order[0]]) / o.temperature);
  std::discrete_distribution<size_t> draw(weights.begin(), weights.end());
  return int64_t(order[draw(rng)]);
}

}  // namespace

std::string sample(const rlx::CompiledGraph& model, const CharData& data, const std::string& prompt,
                   const SampleOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::vector<int64_t> ids = data.encode(prompt);
  std::string out;
  for (int64_t i = 0; i < options.length; ++i) {
    const int64_t seq = std::min<int64_t>(int64_t(ids.size()), options.context);
    std::vector<int64_t> window(ids.end() - seq, ids.end());
    rlx::TensorMap res = model.run(
        {{"tokens", rlx::Tensor::from_vector(window, {1, seq})}, {"pos", positions(seq)}});
    // The last position's row of logits [1, seq, vocab]: the next character's scores.
    const rlx::Tensor& logits = res.at("logits");
    std::vector<double> last = logits.slice(1, seq - 1, seq).to_doubles();
    int64_t next = pick(std::move(last), options, rng);
    ids.push_back(next);
    out.push_back(data.decode(next));
  }
  return out;
}

}  // namespace demo
