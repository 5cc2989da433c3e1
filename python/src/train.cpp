// rlx.optim: optimizers, learning-rate schedules, initialisers and the Trainer, which
// compiles one train-step graph (loss, gradients, clipping, updates) and runs it.
#include "rlx/train.h"

#include <pybind11/functional.h>

#include "common.h"

namespace rlx::py {

namespace {

using namespace rlx::train;

// An lr: a number (constant), a schedule from rlx.optim, or a Python callable step -> lr.
LrSchedule to_schedule(pyb::handle lr) {
  if (pyb::isinstance<pyb::float_>(lr) || pyb::isinstance<pyb::int_>(lr))
    return constant_lr(lr.cast<double>());
  if (!PyCallable_Check(lr.ptr()))
    fail<TypeError>("Trainer", "expected lr as a number, a schedule or a callable, got ",
                    py_str(pyb::type::of(lr)));
  // pybind11 unwraps rlx's own schedules, and calls Python ones holding the GIL.
  return lr.cast<LrSchedule>();
}

TensorMap to_inputs(pyb::handle inputs, const Graph& g) {
  TensorMap in;
  for (auto [k, v] : inputs.cast<pyb::dict>()) {
    auto name = k.cast<std::string>();
    const Arg* a = g.find_arg(name);
    in[name] = to_tensor(v, a ? std::optional<DType>(a->value.dtype()) : std::nullopt);
  }
  return in;
}

pyb::dict to_outputs(const TensorMap& out) {
  pyb::dict d;
  for (const auto& [name, t] : out) d[pyb::str(name)] = to_numpy(t);
  return d;
}

// A Trainer and the model it trains (for the inputs' dtypes).
struct PyTrainer {
  GraphPtr model;
  std::unique_ptr<Trainer> trainer;
};

}  // namespace

void register_train(pyb::module_& m) {
  pyb::class_<Optimizer, std::shared_ptr<Optimizer>>(m, "Optimizer",
                                                     "Emits a param's update as graph ops.")
      .def_property_readonly("name", &Optimizer::name);
  pyb::class_<SGD, Optimizer, std::shared_ptr<SGD>>(m, "SGD", "torch.optim.SGD.")
      .def(pyb::init<double, double, double, bool>(), pyb::arg("momentum") = 0.0,
           pyb::arg("dampening") = 0.0, pyb::arg("weight_decay") = 0.0,
           pyb::arg("nesterov") = false);
  pyb::class_<Adam, Optimizer, std::shared_ptr<Adam>>(m, "Adam",
                                                      "torch.optim.Adam (weight decay as L2).")
      .def(pyb::init<double, double, double, double>(), pyb::arg("beta1") = 0.9,
           pyb::arg("beta2") = 0.999, pyb::arg("eps") = 1e-8, pyb::arg("weight_decay") = 0.0);
  pyb::class_<AdamW, Optimizer, std::shared_ptr<AdamW>>(
      m, "AdamW", "torch.optim.AdamW (decoupled weight decay).")
      .def(pyb::init<double, double, double, double>(), pyb::arg("beta1") = 0.9,
           pyb::arg("beta2") = 0.999, pyb::arg("eps") = 1e-8, pyb::arg("weight_decay") = 0.01);

  m.def("constant_lr", &constant_lr, pyb::arg("lr"));
  m.def("warmup_cosine", &warmup_cosine, pyb::arg("peak"), pyb::arg("warmup_steps"),
        pyb::arg("total_steps"), pyb::arg("min_lr") = 0.0,
        "Linear warmup to peak, then cosine decay to min_lr at total_steps.");
  m.def("step_lr", &step_lr, pyb::arg("base"), pyb::arg("step_size"), pyb::arg("gamma"),
        "base * gamma ** (step // step_size).");

  auto shape_of = [](pyb::handle s) {
    if (pyb::isinstance<pyb::int_>(s)) return std::vector<int64_t>{s.cast<int64_t>()};
    return s.cast<std::vector<int64_t>>();
  };
  m.def(
      "xavier_uniform",
      [shape_of](pyb::handle shape, uint64_t seed, double gain, pyb::handle dt) {
        return to_numpy(xavier_uniform(shape_of(shape), seed, gain, to_dtype(dt)));
      },
      pyb::arg("shape"), pyb::arg("seed"), pyb::arg("gain") = 1.0, pyb::arg("dtype") = DType::f32,
      "U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)) (PyTorch's fans).");
  m.def(
      "kaiming_uniform",
      [shape_of](pyb::handle shape, uint64_t seed, double a, pyb::handle dt) {
        return to_numpy(kaiming_uniform(shape_of(shape), seed, a, FanMode::fan_in, to_dtype(dt)));
      },
      pyb::arg("shape"), pyb::arg("seed"), pyb::arg("a") = 0.0, pyb::arg("dtype") = DType::f32,
      "U(-b, b), b = sqrt(3) * gain(a) / sqrt(fan_in) (PyTorch's kaiming_uniform_).");
  m.def(
      "normal",
      [shape_of](pyb::handle shape, double mean, double std, uint64_t seed, pyb::handle dt) {
        return to_numpy(normal(shape_of(shape), mean, std, seed, to_dtype(dt)));
      },
      pyb::arg("shape"), pyb::arg("mean") = 0.0, pyb::arg("std") = 1.0, pyb::arg("seed") = 0,
      pyb::arg("dtype") = DType::f32, "N(mean, std^2), deterministic in the seed.");

  pyb::class_<PyTrainer>(m, "Trainer", R"doc(
Trains a graph with a scalar float output (default "loss"): one compiled train-step graph
computes the loss, the gradients, optional clipping and the optimizer's updates.

    t = rlx.optim.Trainer(g, rlx.optim.AdamW(), lr=1e-2)
    t.set_param("w", rlx.optim.xavier_uniform((4, 1), seed=0))
    out = t.step({"x": x, "y": y})       # {"loss": ..., "train.grad_norm": ...}
)doc")
      .def(
          pyb::init([](const GraphPtr& g, std::shared_ptr<Optimizer> optimizer, pyb::object lr,
                       std::vector<std::string> params, const std::string& loss, double clip_norm) {
            TrainerOptions o;
            o.optimizer = optimizer ? optimizer : std::make_shared<AdamW>();
            o.schedule = to_schedule(lr);
            o.params = std::move(params);
            o.loss = loss;
            o.clip_norm = clip_norm;
            std::unique_ptr<Trainer> t;
            {
              pyb::gil_scoped_release release;  // compiles (and may run Python kernels)
              t = std::make_unique<Trainer>(*g, o);
            }
            return PyTrainer{g, std::move(t)};
          }),
          pyb::arg("model").none(false), pyb::arg("optimizer") = nullptr, pyb::arg("lr") = 1e-3,
          pyb::arg("params") = std::vector<std::string>{}, pyb::arg("loss") = "loss",
          pyb::arg("clip_norm") = 0.0, R"doc(
optimizer: SGD, Adam or AdamW (default AdamW()); lr: a number, a schedule
(warmup_cosine, step_lr) or a callable step -> lr; params: the params to train (default:
every float param); clip_norm: clip gradients by global norm (0: off).
)doc")
      .def(
          "set_param",
          [](PyTrainer& t, const std::string& name, pyb::handle value) {
            const Arg* a = t.model->find_arg(name);
            t.trainer->set_param(
                name, to_tensor(value, a ? std::optional<DType>(a->value.dtype()) : std::nullopt));
          },
          pyb::arg("name"), pyb::arg("value"))
      .def(
          "param",
          [](const PyTrainer& t, const std::string& name) -> pyb::object {
            Tensor v = t.trainer->param(name);
            if (!v.defined()) return pyb::none();
            return to_numpy(v);
          },
          pyb::arg("name"), "A param or optimizer state (a copy-free view), None when unset.")
      .def(
          "step",
          [](PyTrainer& t, pyb::handle inputs) {
            TensorMap in = to_inputs(inputs, *t.model), out;
            {
              pyb::gil_scoped_release release;
              out = t.trainer->step(in);
            }
            return to_outputs(out);
          },
          pyb::arg("inputs"), "One step: the model's outputs and \"train.grad_norm\".")
      .def(
          "evaluate",
          [](const PyTrainer& t, pyb::handle inputs) {
            TensorMap in = to_inputs(inputs, *t.model), out;
            {
              pyb::gil_scoped_release release;
              out = t.trainer->evaluate(in);
            }
            return to_outputs(out);
          },
          pyb::arg("inputs"), "The model's outputs with the current params (no update).")
      .def_property_readonly("steps", [](const PyTrainer& t) { return t.trainer->steps(); })
      .def_property_readonly("lr", [](const PyTrainer& t) { return t.trainer->lr(); })
      .def_property_readonly("trained_params",
                             [](const PyTrainer& t) { return t.trainer->trained_params(); })
      .def_property_readonly("state_names",
                             [](const PyTrainer& t) { return t.trainer->state_names(); })
      .def(
          "save", [](const PyTrainer& t, const std::string& path) { t.trainer->save(path); },
          pyb::arg("path"), "Params, optimizer state and step count as safetensors.")
      .def(
          "load", [](PyTrainer& t, const std::string& path) { t.trainer->load(path); },
          pyb::arg("path"), "Strict load of what save wrote.");
}

}  // namespace rlx::py
