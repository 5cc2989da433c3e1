// rlx.llm: GGUF models from Python (rlx::llm). Generation is an iterator of text pieces;
// the GIL is released while a step runs.
#include "rlx_llm/llm.h"

#include <algorithm>
#include <deque>

#include "common.h"
#include "rlx/device.h"

namespace rlx::py {

namespace {

using llm::Model;

// for piece in m.generate(...): prefill on the first next(), then decode steps. On a GPU
// the steps run in runs of kGpuRun (Generator::decode: each queued before the last one's
// token is back), the tokens waiting here for the next() calls; on the CPU one at a time.
class PieceIterator {
 public:
  PieceIterator(std::shared_ptr<Model> m, std::vector<int32_t> prompt, int64_t max_tokens,
                llm::SamplerOptions s)
      : model_(std::move(m)),
        gen_(*model_, s),
        text_(model_->tokenizer()),
        prompt_(std::move(prompt)),
        left_(max_tokens),
        run_(model_->options().device.is_cpu() ? 1 : kGpuRun) {}

  std::string next() {
    const llm::Tokenizer& tok = model_->tokenizer();
    while (true) {
      if (done_) throw pyb::stop_iteration();
      if (pending_.empty()) {
        if (left_ <= 0 || (started_ && (tok.is_eog(last_) || gen_.position() >= model_->ctx()))) {
          done_ = true;
          std::string rest = text_.flush();
          if (!rest.empty()) return rest;
          throw pyb::stop_iteration();
        }
        pyb::gil_scoped_release nogil;
        if (!started_) {
          pending_.push_back(gen_.prefill(prompt_));
        } else {
          const int64_t n = std::min({left_, run_, model_->ctx() - gen_.position()});
          gen_.decode(std::span(&last_, 1), n, [&](std::span<const int32_t> t) {
            pending_.push_back(t[0]);
            return !tok.is_eog(t[0]);
          });
        }
        started_ = true;
      }
      last_ = pending_.front();
      pending_.pop_front();
      --left_;
      ids_.push_back(last_);
      if (tok.is_eog(last_)) continue;  // an end token prints nothing
      std::string piece = text_.push(last_);
      if (!piece.empty()) return piece;
    }
  }
  const std::vector<int32_t>& tokens() const { return ids_; }

 private:
  static constexpr int64_t kGpuRun = 16;
  std::shared_ptr<Model> model_;
  llm::Generator gen_;
  llm::StreamDecoder text_;
  std::vector<int32_t> prompt_;
  int64_t left_;
  const int64_t run_;
  bool started_ = false, done_ = false;
  int32_t last_ = -1;
  std::deque<int32_t> pending_;  // decoded, not yet handed out
  std::vector<int32_t> ids_;
};

std::vector<int32_t> prompt_ids(const Model& m, pyb::handle prompt) {
  if (pyb::isinstance<pyb::str>(prompt))
    return m.tokenizer().encode(prompt.cast<std::string>(), true, false);
  return prompt.cast<std::vector<int32_t>>();
}

}  // namespace

void register_llm(pyb::module_& m) {
  pyb::class_<Model, std::shared_ptr<Model>>(m, "Model",
                                             "A GGUF model (llama, qwen2) loaded for generation")
      .def_property_readonly("arch", [](const Model& x) { return x.config().arch; })
      .def_property_readonly("vocab_size", [](const Model& x) { return x.config().vocab; })
      .def_property_readonly("ctx", &Model::ctx)
      .def_property_readonly("n_layer", [](const Model& x) { return x.config().n_layer; })
      .def(
          "tokenize",
          [](const Model& x, const std::string& text, bool add_special, bool parse_special) {
            return x.tokenizer().encode(text, add_special, parse_special);
          },
          pyb::arg("text"), pyb::arg("add_special") = true, pyb::arg("parse_special") = false,
          "Token ids of text (BOS added where the model asks for it).")
      .def(
          "detokenize",
          [](const Model& x, const std::vector<int32_t>& ids) {
            return pyb::bytes(x.tokenizer().decode(ids));
          },
          pyb::arg("ids"), "The bytes the ids spell (decode('utf-8') for text).")
      .def(
          "logits",
          [](Model& x, const std::vector<int32_t>& ids, bool all) {
            Tensor t;
            {
              pyb::gil_scoped_release nogil;
              t = x.logits(ids, all);
            }
            return to_numpy(t);
          },
          pyb::arg("ids"), pyb::arg("all") = true,
          "Logits [len(ids), vocab] of a fresh sequence (all=False: the last row).")
      .def(
          "generate",
          [](std::shared_ptr<Model> x, pyb::handle prompt, int64_t max_tokens, double temperature,
             int64_t top_k, double top_p, double min_p, double repeat_penalty,
             int64_t repeat_last_n, uint64_t seed) {
            llm::SamplerOptions s{temperature,    top_k,         top_p, min_p,
                                  repeat_penalty, repeat_last_n, seed};
            std::vector<int32_t> ids = prompt_ids(*x, prompt);
            return std::make_unique<PieceIterator>(std::move(x), std::move(ids), max_tokens, s);
          },
          pyb::arg("prompt"), pyb::arg("max_tokens") = 64, pyb::arg("temperature") = 0.8,
          pyb::arg("top_k") = 40, pyb::arg("top_p") = 0.95, pyb::arg("min_p") = 0.05,
          pyb::arg("repeat_penalty") = 1.0, pyb::arg("repeat_last_n") = 64, pyb::arg("seed") = 0,
          "An iterator of text pieces after prompt (text or token ids); temperature 0 is "
          "greedy. Its .tokens lists the ids generated so far.");
  pyb::class_<PieceIterator>(m, "Generation")
      .def("__iter__", [](PieceIterator& it) -> PieceIterator& { return it; })
      .def("__next__",
           [](PieceIterator& it) {
             // Bytes that are no UTF-8 (a byte token on its own) read as U+FFFD, as a
             // terminal shows them; detokenize() gives the exact bytes.
             std::string s = it.next();
             return pyb::reinterpret_steal<pyb::str>(
                 PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace"));
           })
      .def_property_readonly("tokens", &PieceIterator::tokens);
  m.def(
      "load",
      [](const std::string& path, const std::string& device, int64_t ctx, int threads,
         const std::string& kv, int64_t batch) {
        llm::LoadOptions o;
        o.device = device == "cuda" ? Device::cuda(0) : Device::cpu();
        if (device != "cpu" && device != "cuda")
          fail<ValueError>("rlx.llm.load", "expected device 'cpu' or 'cuda', got '", device, "'");
        o.ctx = ctx;
        o.threads = threads;
        o.kv_dtype = to_dtype(pyb::str(kv));
        o.batch = batch;
        pyb::gil_scoped_release nogil;
        return Model::load(path, o);
      },
      pyb::arg("path"), pyb::arg("device") = "cpu", pyb::arg("ctx") = 0, pyb::arg("threads") = 0,
      pyb::arg("kv") = "f16", pyb::arg("batch") = 1,
      "Loads a GGUF model (weights memory-mapped, kept in their encoding).");
}

}  // namespace rlx::py
