// Byte-level BPE ("gpt2") encoding: pre-tokenize into words, map each word's UTF-8 bytes to
// GPT-2's printable stand-ins, then merge adjacent symbols by merge rank (lowest first,
// leftmost on ties) as llama.cpp's llm_tokenizer_bpe_session does.
#include <queue>

#include "tokenizer_internal.h"

namespace rlx::llm {

namespace {

struct Symbol {
  int next;
  size_t off, n;  // n == 0 once merged into its left neighbour
};

struct Bigram {
  int32_t rank;
  int left, right;
  size_t size;
};

struct BigramOrder {  // priority_queue top: lowest rank, then smallest left index
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::Impl::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  const std::vector<uint32_t> cps = detail::decode_utf8(text);
  const auto& b2u = detail::byte_to_unicode();
  std::vector<Symbol> sym;
  std::string word, utf8, key;
  size_t at = 0;
  for (size_t len : detail::split_lengths(pre, cps)) {
    utf8.clear();
    for (size_t i = at; i < at + len; ++i) detail::append_utf8(utf8, cps[i]);
    at += len;
    word.clear();
    for (char c : utf8) word += b2u[uint8_t(c)];

    if (ignore_merges) {
      if (const int32_t id = lookup(word); id >= 0) {
        out.push_back(id);
        continue;
      }
    }

    sym.clear();
    for (size_t off = 0; off < word.size();) {
      const size_t n = std::min(detail::utf8_len(uint8_t(word[off])), word.size() - off);
      const int i = int(sym.size());
      sym.push_back({off + n == word.size() ? -1 : i + 1, off, n});
      off += n;
    }
    std::vector<int> prev(sym.size());
    for (size_t i = 0; i < sym.size(); ++i) prev[i] = int(i) - 1;

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      key.assign(word, sym[l].off, sym[l].n);
      key += ' ';
      key.append(word, sym[r].off, sym[r].n);
      auto it = ranks.find(key);
      if (it != ranks.end()) queue.push({it->second, l, r, sym[l].n + sym[r].n});
    };
    for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Symbol& l = sym[b.left];
      Symbol& r = sym[b.right];
      // Both sides unmerged and the same total length means the same text: the right
      // symbol stays the left one's neighbour until the left one absorbs it.
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) prev[r.next] = b.left;
      try_add(prev[b.left], b.left);
      try_add(b.left, l.next);
    }

    for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[i].next) {
      const std::string_view s = std::string_view(word).substr(sym[i].off, sym[i].n);
      if (const int32_t id = lookup(s); id >= 0) {
        out.push_back(id);
        continue;
      }
      // Not in the vocabulary (only with incomplete vocabularies): llama.cpp tries each
      // byte of the encoded text as a token and drops the ones that are not.
      for (char c : s) {
        if (const int32_t id = lookup(std::string_view(&c, 1)); id >= 0) out.push_back(id);
      }
    }
  }
}

}  // namespace rlx::llm
