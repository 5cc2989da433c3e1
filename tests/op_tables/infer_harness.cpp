#include "op_tables/infer_harness.h"

#include <gtest/gtest.h>

namespace rlx::testing {

std::string case_label(const InferCase& c) {
  std::string s = c.op + "(";
  for (size_t i = 0; i < c.inputs.size(); ++i) s += (i ? ", " : "") + c.inputs[i];
  s += ")";
  if (!c.attrs.empty()) {
    s += " {";
    bool first = true;
    for (const auto& [k, _] : c.attrs) {
      s += (first ? "" : ",") + k;
      first = false;
    }
    s += "}";
  }
  return s;
}

std::unique_ptr<Graph> build_case_graph(const InferCase& c) {
  auto g = std::make_unique<Graph>();
  std::vector<Value> in;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    in.push_back(g->input(str_cat("x", i), TensorType::parse(c.inputs[i])));
  auto outs = g->apply(c.op, in, c.attrs, c.subgraphs);
  for (auto v : outs) g->output(v);
  return g;
}

void run_infer_case(const InferCase& c) {
  SCOPED_TRACE(case_label(c));
  if (c.expect == Expect::ok) {
    std::unique_ptr<Graph> g;
    try {
      g = build_case_graph(c);
    } catch (const std::exception& e) {
      FAIL() << "unexpected error: " << e.what();
    }
    const auto& outs = g->outputs();
    ASSERT_EQ(outs.size(), c.outputs.size()) << "number of outputs";
    for (size_t i = 0; i < outs.size(); ++i)
      EXPECT_EQ(outs[i].value.type().str(), c.outputs[i]) << "output " << i;
    return;
  }
  try {
    build_case_graph(c);
  } catch (const TypeError& e) {
    EXPECT_EQ(c.expect, Expect::type_error) << "got TypeError: " << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("[" + c.op + "]", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    return;
  } catch (const ValueError& e) {
    EXPECT_EQ(c.expect, Expect::value_error) << "got ValueError: " << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("[" + c.op + "]", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    return;
  } catch (const std::exception& e) {
    FAIL() << "expected a ValueError or TypeError, got: " << e.what();
  }
  FAIL() << "expected an error, got none";
}

int for_each_ok_case(const std::function<void(const InferCase&, Graph&)>& fn) {
  int n = 0;
  for (const auto& c : all_cases()) {
    if (c.expect != Expect::ok) continue;
    SCOPED_TRACE(case_label(c));
    auto g = build_case_graph(c);
    fn(c, *g);
    ++n;
  }
  return n;
}

std::vector<InferCase> all_cases() {
  std::vector<InferCase> out;
  for (auto fn : {elementwise_cases, reduce_cases, linalg_cases, shape_cases, nn_cases,
                  random_cases, control_cases, autodiff_cases, fused_cases, quant_cases, llm_cases,
                  region_cases, complex_cases}) {
    auto v = fn();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace rlx::testing
