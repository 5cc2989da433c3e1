// The demo's data: a text file as a character vocabulary, a 90/10 train/val split, and
// random contiguous windows of it as (tokens, targets) batches.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "rlx/tensor.h"

namespace demo {

class CharData {
 public:
  // Reads `path`; the last 10% of the text is held out for validation.
  explicit CharData(const std::string& path);

  int64_t vocab_size() const { return int64_t(chars_.size()); }
  std::vector<int64_t> encode(const std::string& s) const;  // unknown chars map to 0
  char decode(int64_t id) const { return chars_[size_t(id)]; }
  size_t train_size() const { return train_.size(); }
  size_t val_size() const { return val_.size(); }
  // Entropy (nats) of the train split's character frequencies: the loss of a model that
  // ignores context, the bar a sequence model has to clear.
  double unigram_entropy() const;

  struct Batch {
    rlx::Tensor tokens, targets;  // i64 [batch, seq]; targets are tokens shifted by one
  };
  Batch sample(bool train, int64_t batch, int64_t seq, std::mt19937_64& rng) const;
  // The windows starting at `starts` (each < size - seq). Window k of a split starts at
  // k * seq: num_windows of them fit without overlap (a dataset of windows to shard).
  Batch windows(bool train, const std::vector<int64_t>& starts, int64_t seq) const;
  int64_t num_windows(bool train, int64_t seq) const;

 private:
  std::string chars_;           // id -> char, sorted
  std::vector<int64_t> index_;  // char (as unsigned byte) -> id
  std::vector<int64_t> train_, val_;
};

}  // namespace demo
