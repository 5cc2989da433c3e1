// SentencePiece-style ("llama") encoding: start from UTF-8 characters and repeatedly merge the
// adjacent pair whose concatenation is the highest-scoring vocabulary piece (leftmost on
// ties); pieces that end up outside the vocabulary fall back to <0xXX> byte tokens. Same
// algorithm and tie-breaking as llama.cpp's llm_tokenizer_spm_session.
#include <queue>

#include "rlx/error.h"
#include "tokenizer_internal.h"

namespace rlx::llm {

namespace {

struct Symbol {
  int prev, next;
  size_t off, n;  // bytes of the (escaped) text; n == 0 once merged into its left neighbour
};

struct Bigram {
  float score;
  int left, right;
  size_t size;
};

struct BigramOrder {  // priority_queue top: highest score, then smallest left index
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::Impl::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> sym;
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(detail::utf8_len(uint8_t(text[off])), text.size() - off);
    const int i = int(sym.size());
    sym.push_back({i - 1, off + n == text.size() ? -1 : i + 1, off, n});
    off += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const std::string_view s = text.substr(sym[l].off, sym[l].n + sym[r].n);
    const int32_t id = lookup(s);
    if (id >= 0) queue.push({tokens[id].score, l, r, s.size()});
  };
  for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale: a side merged since
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[i].next) {
    const std::string_view s = text.substr(sym[i].off, sym[i].n);
    if (const int32_t id = lookup(s); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Every merge produced a vocabulary piece, so only unmerged characters get here.
    for (char c : s) {
      const int32_t id = byte_ids[uint8_t(c)] >= 0 ? byte_ids[uint8_t(c)] : unk;
      if (id < 0) {
        fail<ValueError>("llm.tokenizer", "expected a <0x", std::hex, int(uint8_t(c)),
                         "> byte token or an unknown token in the vocabulary, got neither");
      }
      out.push_back(id);
    }
  }
}

}  // namespace rlx::llm
