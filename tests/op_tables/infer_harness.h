// Table-driven shape/dtype inference tests: each op family lists cases (inputs, attrs,
// expected output types or the expected error), and one harness checks them all.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::testing {

enum class Expect { ok, value_error, type_error };

struct InferCase {
  std::string op;
  std::vector<std::string> inputs;  // input types, e.g. "f32[batch,3]"
  Attrs attrs;
  std::vector<std::string> outputs;  // expected output types when expect == ok
  Expect expect = Expect::ok;
  std::string message;  // for errors: a fragment the message must contain
  std::vector<SubgraphPtr> subgraphs;
};

inline InferCase ok(std::string op, std::vector<std::string> inputs, Attrs attrs,
                    std::vector<std::string> outputs) {
  return {std::move(op), std::move(inputs), std::move(attrs), std::move(outputs)};
}
inline InferCase bad(std::string op, std::vector<std::string> inputs, Attrs attrs,
                     Expect kind = Expect::value_error, std::string message = {}) {
  return {std::move(op), std::move(inputs), std::move(attrs), {}, kind, std::move(message)};
}

// Builds a graph with inputs x0, x1, … of the given types and applies the op. For ok
// cases checks the output types; for error cases checks the exception type and that the
// message starts with "[op]" (and contains `message`).
void run_infer_case(const InferCase& c);
// The graph of an ok case, with the op's outputs as graph outputs (for text/verify tests).
std::unique_ptr<Graph> build_case_graph(const InferCase& c);
std::string case_label(const InferCase& c);
// Calls fn(case, graph) for every ok case of every family, under a trace naming the case;
// returns how many ran.
int for_each_ok_case(const std::function<void(const InferCase&, Graph&)>& fn);

// The case tables, one per op family (tests/op_tables/cases_<family>.cpp).
std::vector<InferCase> elementwise_cases();
std::vector<InferCase> reduce_cases();
std::vector<InferCase> linalg_cases();
std::vector<InferCase> shape_cases();
std::vector<InferCase> nn_cases();
std::vector<InferCase> random_cases();
std::vector<InferCase> control_cases();
std::vector<InferCase> autodiff_cases();
std::vector<InferCase> fused_cases();
std::vector<InferCase> quant_cases();    // dequantize, quant_matmul
std::vector<InferCase> llm_cases();      // rope, kv_cache_write, attention_cached, sample
std::vector<InferCase> region_cases();   // fused_elementwise
std::vector<InferCase> complex_cases();  // complex, real, imag, conj, the FFTs
std::vector<InferCase> all_cases();

}  // namespace rlx::testing
