#include <algorithm>
#include <charconv>
#include <mutex>
#include <set>

#include "rlx/ops.h"
#include "rlx/safetensors.h"
#include "rlx/train.h"

namespace rlx::train {

namespace {

constexpr const char* kWhere = "Trainer";
constexpr const char* kLr = "train.lr";
constexpr const char* kStep = "train.step";
constexpr const char* kGradNorm = "train.grad_norm";
constexpr const char* kNew = "new.";
constexpr const char* kStepMeta = "train.step";
constexpr const char* kOptimizerMeta = "train.optimizer";

template <class... A>
[[noreturn]] void bad(A&&... parts) {
  fail<ValueError>(kWhere, std::forward<A>(parts)...);
}

const Output* find_output(const Graph& g, std::string_view name) {
  for (const Output& o : g.outputs())
    if (o.name == name) return &o;
  return nullptr;
}

// The params to train: as listed (each a float param of the model), or every float param.
std::vector<std::string> params_to_train(const Graph& model, const TrainerOptions& o) {
  std::vector<std::string> out;
  if (o.params.empty()) {
    for (const Arg& a : model.args())
      if (a.kind == ArgKind::param && is_float(a.value.dtype())) out.push_back(a.name);
    if (out.empty()) bad("expected a model with a float param to train, got none");
    return out;
  }
  std::set<std::string> seen;
  for (const std::string& name : o.params) {
    const Arg* a = model.find_arg(name);
    if (!a || a->kind != ArgKind::param)
      bad("expected the params to train to be params of the model, got '", name, "'",
          a ? " (an input)" : "");
    if (!is_float(a->value.dtype()))
      bad("expected a float param to train, got '", name, "' of type ", a->value.type().str());
    if (!seen.insert(name).second) bad("expected each param to train once, got '", name, "' twice");
    out.push_back(name);
  }
  return out;
}

void check_model(const Graph& model, const std::string& loss) {
  const Output* l = find_output(model, loss);
  if (!l) bad("expected the model to have a loss output '", loss, "', got none");
  if (l->value.rank() != 0 || !is_float(l->value.dtype()))
    bad("expected the loss '", loss, "' to be a float scalar, got ", l->value.type().str());
  for (const Arg& a : model.args())
    if (a.name == kLr || a.name == kStep)
      bad("expected no model arg named '", a.name, "' (the train graph's own input), got one");
  for (const Output& o : model.outputs())
    if (o.name == kGradNorm || o.name.starts_with(kNew))
      bad("expected no model output named '", o.name, "' (a train graph name), got one");
}

// A tensor against a declared type: dtype (TypeError), then the static dims (ValueError).
// `prefix` leads the message (the file, for a checkpoint).
void check_type(const std::string& prefix, const std::string& what, const Tensor& t,
                const TensorType& want) {
  if (t.dtype() != want.dtype)
    fail<TypeError>(kWhere, prefix, "expected ", what, " of type ", want.str(), ", got ",
                    t.type().str());
  bool ok = size_t(t.rank()) == want.shape.size();
  for (size_t i = 0; ok && i < want.shape.size(); ++i)
    ok = want.shape[i].is_symbolic() || want.shape[i].value() == t.shape()[i];
  if (!ok) bad(prefix, "expected ", what, " of type ", want.str(), ", got ", t.type().str());
}

// sqrt of the sum of squares of every gradient, in f64: one op for all of them, which a
// device reads in one launch (per-gradient sums were ~450 small kernels a GPT-2 step).
Value global_norm(const std::vector<Value>& grads) {
  return op("sqrt", {op("sum_squares", grads)});
}

}  // namespace

struct Trainer::Impl {
  TrainerOptions options;
  std::vector<std::string> model_params;  // every param of the model
  std::vector<std::string> trained;
  std::map<std::string, std::vector<std::string>> states_of;  // trained param -> states
  std::vector<std::string> states;
  std::vector<std::string> model_outputs;
  std::unique_ptr<Graph> graph;
  CompiledGraph compiled;
  CompiledGraph eval;
  int64_t steps = 0;
  // Held while the params and state are swapped (step, set_param, load) and while another
  // thread reads them (save, param, evaluate): a checkpoint writer sees one completed step.
  // The tensors themselves are never written once made, so the step's compute runs unlocked.
  mutable std::mutex swap;

  bool is_model_param(std::string_view name) const {
    return std::find(model_params.begin(), model_params.end(), name) != model_params.end();
  }
  bool is_state(std::string_view name) const {
    return std::find(states.begin(), states.end(), name) != states.end();
  }
  void build(const Graph& model);
  // Binds a param in the train graph and the evaluation copy (a state only in the former).
  void bind(const std::string& name, Tensor t) {
    t = t.to(options.device);  // params and state live where the step runs
    compiled.set_param(name, t);
    if (is_model_param(name)) eval.set_param(name, std::move(t));
  }
};

void Trainer::Impl::build(const Graph& model) {
  GradOptions go;
  go.wrt = trained;
  go.output = options.loss;
  go.remat = options.remat;
  std::unique_ptr<Graph> g = value_and_grad(model, go);
  StepScalars s{g->input(kLr, {DType::f64, {}}), g->input(kStep, {DType::f64, {}})};

  std::vector<Value> grads;
  for (const std::string& p : trained) {
    const Output* o = find_output(*g, "grad." + p);
    if (!o) bad("expected value_and_grad to output 'grad.", p, "', got none");
    grads.push_back(o->value);
  }
  if (options.grad_transform) {
    std::vector<Value> out = options.grad_transform(*g, trained, grads);
    if (out.size() != grads.size())
      bad("expected grad_transform to return ", grads.size(), " gradients, got ", out.size());
    for (size_t i = 0; i < out.size(); ++i)
      if (!out[i].valid() || out[i].graph != g.get() || !(out[i].type() == grads[i].type()))
        bad("expected grad_transform to return gradient '", trained[i], "' of type ",
            grads[i].type().str(), " in the train graph, got ",
            out[i].valid() ? out[i].type().str() : "none");
    grads = std::move(out);
  }
  Value norm = global_norm(grads);
  if (options.clip_norm > 0) {
    // torch.nn.utils.clip_grad_norm_: scale by min(max_norm / (norm + 1e-6), 1).
    Value coef = op("min", {options.clip_norm / (norm + 1e-6), scalar_like(norm, 1.0)});
    for (Value& gr : grads) gr = gr * (gr.dtype() == DType::f64 ? coef : cast(coef, gr.dtype()));
  }

  std::vector<Output> outs;
  for (const Output& o : model.outputs()) {
    outs.push_back(*find_output(*g, o.name));
    model_outputs.push_back(o.name);
  }
  outs.push_back({kGradNorm, norm});
  std::vector<Output> state_outs;
  for (size_t i = 0; i < trained.size(); ++i) {
    const std::string& p = trained[i];
    Update u = options.optimizer->emit(*g, p, g->find_arg(p)->value, grads[i], s);
    outs.push_back({kNew + p, u.param});
    for (auto& [name, v] : u.state) {
      const Arg* a = g->find_arg(name);
      if (!a || a->kind != ArgKind::param || model.find_arg(name) || is_state(name))
        bad("expected optimizer state '", name, "' to be a new param of the train graph, got ",
            model.find_arg(name) ? "a model arg of that name" : "a clash or no such param");
      states.push_back(name);
      states_of[p].push_back(name);
      state_outs.push_back({kNew + name, v});
    }
  }
  outs.insert(outs.end(), state_outs.begin(), state_outs.end());
  g->mutable_outputs() = std::move(outs);
  graph = prune(*g);
}

Trainer::Trainer(const Graph& model, TrainerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (!options.optimizer) options.optimizer = std::make_shared<AdamW>();
  if (!options.schedule) options.schedule = constant_lr(1e-3);
  if (options.clip_norm < 0) bad("expected clip_norm >= 0, got ", options.clip_norm);
  check_model(model, options.loss);
  m.options = std::move(options);
  for (const Arg& a : model.args())
    if (a.kind == ArgKind::param) m.model_params.push_back(a.name);
  m.trained = params_to_train(model, m.options);
  m.build(model);
  Session session(m.options.device);
  m.compiled = session.compile(*m.graph, m.options.compile);
  m.eval = session.compile(model, m.options.compile);
}

Trainer::~Trainer() = default;
Trainer::Trainer(Trainer&&) noexcept = default;
Trainer& Trainer::operator=(Trainer&&) noexcept = default;

void Trainer::set_param(std::string_view name, Tensor value) {
  Impl& m = *impl_;
  if (!m.is_model_param(name)) bad("expected the name of a model param, got '", name, "'");
  if (!value.defined()) bad("expected a tensor for param '", name, "', got an undefined one");
  std::string n(name);
  check_type("", str_cat("param '", n, "'"), value, m.graph->find_arg(n)->value.type());
  std::lock_guard lock(m.swap);
  m.bind(n, value);
  // Fresh optimizer state for a param that has none, or one of another shape.
  auto it = m.states_of.find(n);
  if (it == m.states_of.end()) return;
  for (const std::string& s : it->second) {
    Tensor cur = m.compiled.param(s);
    if (!cur.defined() || cur.shape() != value.shape())
      m.bind(s, Tensor::zeros(value.dtype(), value.shape()));
  }
}

Tensor Trainer::param(std::string_view name) const {
  const Impl& m = *impl_;
  if (!m.is_model_param(name) && !m.is_state(name))
    bad("expected the name of a model param or optimizer state, got '", name, "'");
  std::lock_guard lock(m.swap);
  return m.compiled.param(name);
}

TensorMap Trainer::step(const TensorMap& inputs) {
  Impl& m = *impl_;
  for (const std::string& p : m.model_params)
    if (!m.compiled.param(p).defined())
      bad("expected param '", p, "' to be set (set_param) before step(), got none");
  for (const char* n : {kLr, kStep})
    if (inputs.count(n)) bad("expected no input named '", n, "' (the Trainer sets it), got one");
  TensorMap in = inputs;
  in[kLr] = Tensor::full(DType::f64, {}, lr());
  in[kStep] = Tensor::full(DType::f64, {}, double(m.steps + 1));
  TensorMap out = m.compiled.run(in);
  {
    // Swap in the new params and state: shared, not copied.
    std::lock_guard lock(m.swap);
    for (const std::string& p : m.trained) m.bind(p, out.at(kNew + p));
    for (const std::string& s : m.states) m.bind(s, out.at(kNew + s));
    ++m.steps;
  }
  for (auto it = out.begin(); it != out.end();)
    it = it->first.starts_with(kNew) ? out.erase(it) : std::next(it);
  return out;
}

TensorMap Trainer::evaluate(const TensorMap& inputs) const {
  const Impl& m = *impl_;
  for (const std::string& p : m.model_params)
    if (!m.eval.param(p).defined())
      bad("expected param '", p, "' to be set (set_param) before evaluate(), got none");
  std::lock_guard lock(m.swap);
  return m.eval.run(inputs);
}

int64_t Trainer::steps() const {
  std::lock_guard lock(impl_->swap);
  return impl_->steps;
}
double Trainer::lr() const { return impl_->options.schedule(steps()); }
const std::vector<std::string>& Trainer::trained_params() const { return impl_->trained; }
const std::vector<std::string>& Trainer::state_names() const { return impl_->states; }
const Graph& Trainer::train_graph() const { return *impl_->graph; }
const CompiledGraph& Trainer::compiled() const { return impl_->compiled; }

void Trainer::save(const std::string& path) const {
  const Impl& m = *impl_;
  if (!m.options.writes_checkpoints) return;
  TensorMap tensors;
  int64_t steps = 0;
  {
    // One step's params and state (shared handles), copied and written after.
    std::lock_guard lock(m.swap);
    for (const auto* names : {&m.model_params, &m.states})
      for (const std::string& n : *names) {
        Tensor t = m.compiled.param(n);
        if (!t.defined()) bad("expected param '", n, "' to be set before save(), got none");
        tensors.emplace(n, t);
      }
    steps = m.steps;
  }
  for (auto& [n, t] : tensors) t = t.to(Device::cpu());
  save_safetensors(
      path, tensors,
      {{kStepMeta, std::to_string(steps)}, {kOptimizerMeta, m.options.optimizer->name()}});
}

void Trainer::load(const std::string& path) {
  Impl& m = *impl_;
  SafetensorsFile f = load_safetensors(path);
  auto where = [&](const std::string& what) { return str_cat(path, ": ", what); };

  // Check everything before changing anything.
  auto step_it = f.metadata.find(kStepMeta);
  int64_t steps = -1;
  if (step_it != f.metadata.end()) {
    const std::string& s = step_it->second;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), steps);
    if (ec != std::errc() || end != s.data() + s.size()) steps = -1;
  }
  if (steps < 0)
    bad(where("expected a non-negative integer \"train.step\" in the metadata, got "),
        step_it == f.metadata.end() ? "none" : "\"" + step_it->second + "\"");
  auto opt_it = f.metadata.find(kOptimizerMeta);
  if (opt_it != f.metadata.end() && opt_it->second != m.options.optimizer->name())
    bad(where("expected a checkpoint of optimizer '"), m.options.optimizer->name(), "', got '",
        opt_it->second, "'");
  for (const auto* names : {&m.model_params, &m.states})
    for (const std::string& n : *names) {
      auto it = f.tensors.find(n);
      if (it == f.tensors.end()) bad(where("expected a tensor '"), n, "', got none");
      check_type(path + ": ", str_cat("tensor '", n, "'"), it->second,
                 m.graph->find_arg(n)->value.type());
    }
  for (auto& [n, _] : f.tensors)
    if (!m.is_model_param(n) && !m.is_state(n))
      bad(where("expected only params and optimizer state, got an unknown tensor '"), n, "'");

  std::lock_guard lock(m.swap);
  for (auto& [n, t] : f.tensors) m.bind(n, t);
  m.steps = steps;
}

}  // namespace rlx::train
