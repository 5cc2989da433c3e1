#include "data.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "rlx/error.h"

namespace demo {

CharData::CharData(const std::string& path) : index_(256, 0) {
  std::ifstream f(path, std::ios::binary);
  if (!f) rlx::fail<rlx::IoError>("demo", "cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  if (text.size() < 1000) rlx::fail<rlx::IoError>("demo", "expected a text file, got ", path);

  std::vector<bool> seen(256, false);
  for (unsigned char c : text) seen[c] = true;
  for (int c = 0; c < 256; ++c) {
    if (!seen[size_t(c)]) continue;
    index_[size_t(c)] = int64_t(chars_.size());
    chars_.push_back(char(c));
  }
  std::vector<int64_t> ids = encode(text);
  auto split = ids.begin() + ptrdiff_t(ids.size() * 9 / 10);
  train_.assign(ids.begin(), split);
  val_.assign(split, ids.end());
}

std::vector<int64_t> CharData::encode(const std::string& s) const {
  std::vector<int64_t> ids;
  ids.reserve(s.size());
  for (unsigned char c : s) ids.push_back(index_[c]);
  return ids;
}

double CharData::unigram_entropy() const {
  std::vector<double> counts(chars_.size(), 0.0);
  for (int64_t id : train_) counts[size_t(id)] += 1;
  double h = 0, n = double(train_.size());
  for (double c : counts)
    if (c > 0) h -= c / n * std::log(c / n);
  return h;
}

CharData::Batch CharData::sample(bool train, int64_t batch, int64_t seq,
                                 std::mt19937_64& rng) const {
  const std::vector<int64_t>& src = train ? train_ : val_;
  std::uniform_int_distribution<size_t> start(0, src.size() - size_t(seq) - 1);
  std::vector<int64_t> starts(static_cast<size_t>(batch));
  for (int64_t& s : starts) s = int64_t(start(rng));
  return windows(train, starts, seq);
}

int64_t CharData::num_windows(bool train, int64_t seq) const {
  return int64_t(((train ? train_ : val_).size() - 1) / size_t(seq));
}

CharData::Batch CharData::windows(bool train, const std::vector<int64_t>& starts,
                                  int64_t seq) const {
  const std::vector<int64_t>& src = train ? train_ : val_;
  const int64_t batch = int64_t(starts.size());
  std::vector<int64_t> tokens(size_t(batch * seq)), targets(tokens.size());
  for (int64_t b = 0; b < batch; ++b) {
    size_t s = size_t(starts[size_t(b)]);
    for (int64_t t = 0; t < seq; ++t) {
      tokens[size_t(b * seq + t)] = src[s + size_t(t)];
      targets[size_t(b * seq + t)] = src[s + size_t(t) + 1];
    }
  }
  return {rlx::Tensor::from_vector(tokens, {batch, seq}),
          rlx::Tensor::from_vector(targets, {batch, seq})};
}

}  // namespace demo
