// Data-dependent errors of the shape kernels: an index out of range is a ValueError that
// names the op, the index and the valid range; it is never an out-of-bounds access.
#include <gtest/gtest.h>

#include "rlx/rlx.h"
#include "rlx/session.h"

namespace rlx {
namespace {

// Runs one op on the CPU; returns the message of the ValueError it throws ("" if none).
std::string run_error(const std::string& op, const std::vector<Tensor>& inputs, Attrs attrs = {}) {
  Graph g("err");
  std::vector<Value> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(g.input(str_cat("x", i), inputs[i].type()));
  for (Value v : g.apply(op, ins, std::move(attrs))) g.output(v);
  CompiledGraph cg = Session(Device::cpu()).compile(g);
  try {
    cg.run(std::span<const Tensor>(inputs));
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

Tensor data(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Tensor::from_vector(std::vector<float>(size_t(n), 1.0f), std::move(shape));
}

void expect_mentions(const std::string& msg, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(msg.empty()) << "expected a ValueError";
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << " lacks " << p;
}

TEST(ShapeErrors, GatherIndexTooLarge) {
  auto idx = Tensor::from_vector(std::vector<int64_t>{0, 5}, {2});
  expect_mentions(run_error("gather", {data({5, 4}), idx}), {"[gather]", "[-5, 5)", "got 5"});
}

TEST(ShapeErrors, GatherIndexTooNegative) {
  auto idx = Tensor::from_vector(std::vector<int32_t>{-5, -6}, {2});
  expect_mentions(run_error("gather", {data({5, 4}), idx}, {{"axis", 0}}),
                  {"[gather]", "[-5, 5)", "got -6"});
  auto idx8 = Tensor::from_vector(std::vector<int8_t>{-5}, {1});
  EXPECT_EQ(run_error("gather", {data({5, 4}), idx8}), "");  // -5 wraps to 0
}

TEST(ShapeErrors, GatherOnEmptyAxis) {
  auto idx = Tensor::from_vector(std::vector<int64_t>{0}, {1});
  expect_mentions(run_error("gather", {data({0, 4}), idx}), {"[gather]", "[0, 0)", "got 0"});
}

TEST(ShapeErrors, GatherElementsAndNd) {
  auto idx = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 4}, {1, 4});
  expect_mentions(run_error("gather_elements", {data({5, 4}), idx}, {{"axis", 1}}),
                  {"[gather_elements]", "[-4, 4)", "got 4"});
  auto nd = Tensor::from_vector(std::vector<int64_t>{4, 3, 5, 0}, {2, 2});
  expect_mentions(run_error("gather_nd", {data({5, 4}), nd}), {"[gather_nd]", "[-5, 5)", "got 5"});
}

TEST(ShapeErrors, Scatters) {
  auto idx = Tensor::from_vector(std::vector<int64_t>{1, -7}, {2, 1});
  expect_mentions(
      run_error("scatter_elements", {data({5, 4}), idx, data({2, 1})}, {{"reduction", "add"}}),
      {"[scatter_elements]", "[-5, 5)", "got -7"});
  auto nd = Tensor::from_vector(std::vector<int64_t>{9}, {1, 1});
  expect_mentions(run_error("scatter_nd", {data({5, 4}), nd, data({1, 4})}),
                  {"[scatter_nd]", "[-5, 5)", "got 9"});
}

}  // namespace
}  // namespace rlx
