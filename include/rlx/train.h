// Training: initialisers, learning-rate schedules, optimizers and a Trainer that compiles
// one train-step graph (loss, gradients, clipping, optimizer updates) and runs it.
//
//   rlx::train::TrainerOptions opts;
//   opts.optimizer = std::make_shared<rlx::train::AdamW>();
//   opts.schedule = rlx::train::warmup_cosine(1e-3, 100, 1000);
//   rlx::train::Trainer t(model, opts);       // model: a graph with a scalar output "loss"
//   t.set_param("w", rlx::train::xavier_uniform({64, 32}, /*seed=*/0));
//   for (...) auto out = t.step({{"x", x}, {"y", y}});   // out["loss"], out["train.grad_norm"]
//   t.save("ckpt.safetensors");
//
// Everything an optimizer does is emitted as graph ops, so a step is one run of one
// compiled graph; the new params and optimizer state it outputs replace the old ones.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rlx/graph.h"
#include "rlx/session.h"
#include "rlx/tensor.h"
#include "rlx/transforms.h"

namespace rlx::train {

// ---- Initialisers: host tensors, deterministic in the seed -----------------------------

enum class FanMode { fan_in, fan_out };

// PyTorch's conventions: for rank >= 2, receptive = prod(shape[2:]),
// fan_in = shape[1] * receptive, fan_out = shape[0] * receptive. Rank < 2 is a ValueError.
struct Fans {
  int64_t fan_in;
  int64_t fan_out;
};
Fans fans(const std::vector<int64_t>& shape);
// torch.nn.init.calculate_gain("leaky_relu", a): sqrt(2 / (1 + a^2)).
double leaky_relu_gain(double a);

Tensor normal(std::vector<int64_t> shape, double mean, double std, uint64_t seed,
              DType dt = DType::f32);
// Values in [low, high), then rounded to dt (which may round onto high).
Tensor uniform(std::vector<int64_t> shape, double low, double high, uint64_t seed,
               DType dt = DType::f32);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform(std::vector<int64_t> shape, uint64_t seed, double gain = 1.0,
                      DType dt = DType::f32);
// N(0, s^2) with s = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal(std::vector<int64_t> shape, uint64_t seed, double gain = 1.0,
                     DType dt = DType::f32);
// U(-b, b) with b = sqrt(3) * leaky_relu_gain(a) / sqrt(fan).
Tensor kaiming_uniform(std::vector<int64_t> shape, uint64_t seed, double a = 0.0,
                       FanMode mode = FanMode::fan_in, DType dt = DType::f32);
// N(0, s^2) with s = leaky_relu_gain(a) / sqrt(fan).
Tensor kaiming_normal(std::vector<int64_t> shape, uint64_t seed, double a = 0.0,
                      FanMode mode = FanMode::fan_in, DType dt = DType::f32);

// ---- Learning-rate schedules ------------------------------------------------------------

// step: the number of completed steps (0 for the first step).
using LrSchedule = std::function<double(int64_t step)>;

LrSchedule constant_lr(double lr);
// Linear warmup from 0 (at step 0) to peak (at warmup_steps), then cosine decay to min_lr
// at total_steps, min_lr after (optax.warmup_cosine_decay_schedule with decay_steps =
// total_steps). Needs 0 <= warmup_steps <= total_steps, total_steps > 0.
LrSchedule warmup_cosine(double peak, int64_t warmup_steps, int64_t total_steps,
                         double min_lr = 0.0);
// torch.optim.lr_scheduler.StepLR: base * gamma^floor(step / step_size).
LrSchedule step_lr(double base, int64_t step_size, double gamma);

// ---- Optimizers -------------------------------------------------------------------------

// The f64 scalar inputs "train.lr" and "train.step" (the 1-based number of this step)
// of the train graph.
struct StepScalars {
  Value lr;
  Value step;
};

// One param's update: its new value, and (state param name, new value) for each state.
struct Update {
  Value param;
  std::vector<std::pair<std::string, Value>> state;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // Emits one param's update into g. Its state tensors are declared as params of g named
  // "<name()>.<slot>.<param>" (e.g. "adamw.m.w"; the Trainer zero-initialises them) and
  // returned with their new values. Computes in the param's dtype.
  virtual Update emit(Graph& g, const std::string& param_name, Value param, Value grad,
                      const StepScalars& s) const = 0;
};

// torch.optim.SGD. State "sgd.momentum.<param>" when momentum != 0.
struct SGD : Optimizer {
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;

  explicit SGD(double momentum = 0, double dampening = 0, double weight_decay = 0,
               bool nesterov = false)
      : momentum(momentum), dampening(dampening), weight_decay(weight_decay), nesterov(nesterov) {}
  std::string name() const override { return "sgd"; }
  Update emit(Graph& g, const std::string& param_name, Value param, Value grad,
              const StepScalars& s) const override;
};

// torch.optim.Adam (weight decay as L2: added to the gradient). States "adam.m.<param>",
// "adam.v.<param>".
struct Adam : Optimizer {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;

  explicit Adam(double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
                double weight_decay = 0)
      : beta1(beta1), beta2(beta2), eps(eps), weight_decay(weight_decay) {}
  std::string name() const override { return "adam"; }
  Update emit(Graph& g, const std::string& param_name, Value param, Value grad,
              const StepScalars& s) const override;
};

// torch.optim.AdamW (decoupled weight decay: param *= 1 - lr * weight_decay first).
// States "adamw.m.<param>", "adamw.v.<param>".
struct AdamW : Optimizer {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;

  explicit AdamW(double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
                 double weight_decay = 0.01)
      : beta1(beta1), beta2(beta2), eps(eps), weight_decay(weight_decay) {}
  std::string name() const override { return "adamw"; }
  Update emit(Graph& g, const std::string& param_name, Value param, Value grad,
              const StepScalars& s) const override;
};

// ---- Trainer ----------------------------------------------------------------------------

struct TrainerOptions {
  std::vector<std::string> params;       // params to train (empty: every float param)
  std::string loss = "loss";             // the model's scalar float loss output
  std::shared_ptr<Optimizer> optimizer;  // default AdamW
  LrSchedule schedule;                   // default constant_lr(1e-3)
  double clip_norm = 0;                  // clip by global norm (0: off), as torch's
                                         // clip_grad_norm_
  Remat remat = Remat::none;
  CompileOptions compile;
  // Where the step runs; params and optimizer state are kept there (set_param copies
  // them over), outputs are that device's tensors.
  Device device = Device::cpu();
  // Data parallelism (rlx::dist::data_parallel fills these in). grad_transform rewrites
  // the gradients inside the train graph, before clipping and the update: it gets the
  // graph, the trained params' names and their gradients, and returns one new gradient
  // of the same type per param (all-reduced across ranks, say).
  std::function<std::vector<Value>(Graph&, const std::vector<std::string>&, std::vector<Value>)>
      grad_transform;
  bool writes_checkpoints = true;  // false: save() writes nothing (ranks other than 0)
};

// Train-graph names: inputs "train.lr", "train.step"; outputs the model's outputs,
// "train.grad_norm" (f64, before clipping), "new.<param>" and "new.<state>".
class Trainer {
 public:
  // Builds one train-step graph and compiles it once (plus a forward-only copy of the
  // model for evaluate). Throws ValueError for an unknown or non-float param to train, a
  // missing or non-scalar loss, or model args that clash with the "train." names.
  Trainer(const Graph& model, TrainerOptions options);
  ~Trainer();
  Trainer(Trainer&&) noexcept;
  Trainer& operator=(Trainer&&) noexcept;

  // Every param of the model (trained or not) must be set before step(). The tensor is
  // shared, not copied, and never written to; a dtype other than the declared one is a
  // TypeError, other dims a ValueError. Setting a trained param zeroes its
  // optimizer state when the state is unset or of another shape.
  void set_param(std::string_view name, Tensor value);
  Tensor param(std::string_view name) const;  // a model param or an optimizer state

  // One step: returns the model's outputs and "train.grad_norm"; the new params and
  // optimizer state replace the old ones. Never recompiles.
  TensorMap step(const TensorMap& inputs);
  // Forward only, with the current params.
  TensorMap evaluate(const TensorMap& inputs) const;

  int64_t steps() const;  // completed steps
  double lr() const;      // the lr of the next step
  const std::vector<std::string>& trained_params() const;
  const std::vector<std::string>& state_names() const;  // optimizer state params

  // Params, optimizer state and the step count ("train.step" metadata) as safetensors.
  // Nothing is written when TrainerOptions::writes_checkpoints is false. save(), param(),
  // steps() and evaluate() may run on another thread while step() runs (a checkpoint
  // writer): they see the params and state of one completed step.
  void save(const std::string& path) const;
  // Strict: every param and state must be in the file with its dtype and shape, and
  // nothing else. Errors name the tensor: ValueError (missing, unknown, shape, metadata),
  // TypeError (dtype); IoError for a bad file. Nothing changes unless all is well.
  void load(const std::string& path);

  const Graph& train_graph() const;
  const CompiledGraph& compiled() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx::train
