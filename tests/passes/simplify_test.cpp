// Algebraic simplification: each rule, its chains collapsing in one run, and the cases
// it must leave (a result of another type, x * 0, x - x, inexact casts, checkpoints…).
// Bypassed nodes stay in the graph for dce, so they show in the expected text.
#include <gtest/gtest.h>

#include <chrono>

#include "op_tables/pass_check.h"
#include "op_tables/pass_graphs.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using test::expect_pass;

TEST(Simplify, IdentityElementsGoInEveryDtype) {
  expect_pass("simplify", R"(graph main(%x: f32[2,3], %i: i32[3]) {
      %one = constant() {value=tensor<f32[]>[1.0]} : f32[]
      %zero = constant() {value=tensor<f32[3]>[0.0, 0.0, 0.0]} : f32[3]
      %a = mul(%x, %one) : f32[2,3]
      %b = mul(%one, %a) : f32[2,3]
      %c = add(%b, %zero) : f32[2,3]
      %d = sub(%c, %zero) : f32[2,3]
      %e = div(%d, %one) : f32[2,3]
      %z = constant() {value=tensor<i32[1]>[0]} : i32[1]
      %f = add(%z, %i) : i32[3]
      %u = constant() {value=tensor<i32[]>[1]} : i32[]
      %g = div(%f, %u) : i32[3]
      return x=%e, i=%g
    })",
              R"(graph main(%x: f32[2,3], %i: i32[3]) {
      %one = constant() {value=tensor<f32[]>[1.0]} : f32[]
      %zero = constant() {value=tensor<f32[3]>[0.0, 0.0, 0.0]} : f32[3]
      %z = constant() {value=tensor<i32[1]>[0]} : i32[1]
      %u = constant() {value=tensor<i32[]>[1]} : i32[]
      return x=%x, i=%i
    })");
}

TEST(Simplify, IdentityKeepsSymbolicDimsThatTheConstantCannotChange) {
  expect_pass("simplify", R"(graph main(%x: f32[batch,3], %y: f32[?]) {
      %one = constant() {value=tensor<f32[3]>[1.0, 1.0, 1.0]} : f32[3]
      %a = mul(%x, %one) : f32[batch,3]
      %zero = constant() {value=tensor<f32[1]>[0.0]} : f32[1]
      %b = add(%y, %zero) : f32[?]
      return a=%a, b=%b
    })",
              R"(graph main(%x: f32[batch,3], %y: f32[?]) {
      %one = constant() {value=tensor<f32[3]>[1.0, 1.0, 1.0]} : f32[3]
      %zero = constant() {value=tensor<f32[1]>[0.0]} : f32[1]
      return a=%x, b=%y
    })");
}

// x * 1 where the 1 makes the result bigger than x is a broadcast of x, when the result's
// shape is static; otherwise it stays.
TEST(Simplify, IdentityThatBroadcastsXIsABroadcast) {
  expect_pass("simplify", R"(graph main(%x: f32[3], %y: f32[1], %z: f32[batch,1]) {
      %one = constant() {value=tensor<f32[2,3]>[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]} : f32[2,3]
      %a = mul(%x, %one) : f32[2,3]
      %zero = constant() {value=tensor<f32[4]>[0.0, 0.0, 0.0, 0.0]} : f32[4]
      %b = add(%y, %zero) : f32[4]
      %three = constant() {value=tensor<f32[1,3]>[1.0, 1.0, 1.0]} : f32[1,3]
      %c = mul(%z, %three) : f32[batch,3]
      return a=%a, b=%b, c=%c
    })",
              R"(graph main(%x: f32[3], %y: f32[1], %z: f32[batch,1]) {
      %one = constant() {value=tensor<f32[2,3]>[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]} : f32[2,3]
      %a = broadcast_to(%x) {shape=[2, 3]} : f32[2,3]
      %zero = constant() {value=tensor<f32[4]>[0.0, 0.0, 0.0, 0.0]} : f32[4]
      %b = broadcast_to(%y) {shape=[4]} : f32[4]
      %three = constant() {value=tensor<f32[1,3]>[1.0, 1.0, 1.0]} : f32[1,3]
      %c = mul(%z, %three) : f32[batch,3]
      return a=%a, b=%b, c=%c
    })");
}

TEST(Simplify, LeavesWhatDependsOnXThroughNanAndInfinity) {
  expect_pass("simplify", R"(graph main(%x: f32[4]) {
      %zero = constant() {value=tensor<f32[]>[0.0]} : f32[]
      %one = constant() {value=tensor<f32[]>[1.0]} : f32[]
      %a = mul(%x, %zero) : f32[4]
      %b = sub(%x, %x) : f32[4]
      %c = sub(%zero, %x) : f32[4]
      %d = add(%x, %one) : f32[4]
      %e = div(%one, %x) : f32[4]
      return a=%a, b=%b, c=%c, d=%d, e=%e
    })",
              "");
}

TEST(Simplify, TimesItsSigmoidIsSilu) {
  // Either order; the sigmoid stays for dce. A sigmoid of another value is left alone.
  expect_pass("simplify", R"(graph main(%x: f32[2,3], %y: f32[2,3]) {
      %s = sigmoid(%x) : f32[2,3]
      %a = mul(%x, %s) : f32[2,3]
      %b = mul(%s, %x) : f32[2,3]
      %c = mul(%y, %s) : f32[2,3]
      return a=%a, b=%b, c=%c
    })",
              R"(graph main(%x: f32[2,3], %y: f32[2,3]) {
      %s = sigmoid(%x) : f32[2,3]
      %a = silu(%x) : f32[2,3]
      %b = silu(%x) : f32[2,3]
      %c = mul(%y, %s) : f32[2,3]
      return a=%a, b=%b, c=%c
    })");
}

TEST(Simplify, DoubleNegationCollapsesInOneRun) {
  expect_pass("simplify", R"(graph main(%x: i64[batch]) {
      %a = neg(%x) : i64[batch]
      %b = neg(%a) : i64[batch]
      %c = neg(%b) : i64[batch]
      %d = neg(%c) : i64[batch]
      %e = neg(%d) : i64[batch]
      return out=%e, even=%d
    })",
              R"(graph main(%x: i64[batch]) {
      %a = neg(%x) : i64[batch]
      %c = neg(%x) : i64[batch]
      %e = neg(%x) : i64[batch]
      return out=%e, even=%x
    })");
}

TEST(Simplify, SubtractingANegationAdds) {
  expect_pass("simplify", R"(graph main(%x: f32[4], %y: f32[4]) {
      %n = neg(%y) : f32[4]
      %a = sub(%x, %n) : f32[4]
      %b = add(%x, %n) : f32[4]
      %c = add(%n, %x) : f32[4]
      return a=%a, b=%b, c=%c
    })",
              R"(graph main(%x: f32[4], %y: f32[4]) {
      %n = neg(%y) : f32[4]
      %a = add(%x, %y) : f32[4]
      %b = sub(%x, %y) : f32[4]
      %c = sub(%x, %y) : f32[4]
      return a=%a, b=%b, c=%c
    })");
}

TEST(Simplify, TransposeChainsCompose) {
  expect_pass("simplify", R"(graph main(%x: f32[2,3,4], %m: f32[2,3]) {
      %a = transpose(%x) {perm=[1, 2, 0]} : f32[3,4,2]
      %b = transpose(%a) {perm=[2, 0, 1]} : f32[2,3,4]
      %c = transpose(%x) {perm=[1, 0, 2]} : f32[3,2,4]
      %d = transpose(%c) {perm=[0, -1, 1]} : f32[3,4,2]
      %e = transpose(%m) : f32[3,2]
      %f = transpose(%e) : f32[2,3]
      %g = transpose(%m) {perm=[0, 1]} : f32[2,3]
      return b=%b, d=%d, f=%f, g=%g
    })",
              R"(graph main(%x: f32[2,3,4], %m: f32[2,3]) {
      %a = transpose(%x) {perm=[1, 2, 0]} : f32[3,4,2]
      %c = transpose(%x) {perm=[1, 0, 2]} : f32[3,2,4]
      %d = transpose(%x) {perm=[1, 2, 0]} : f32[3,4,2]
      %e = transpose(%m) : f32[3,2]
      return b=%x, d=%d, f=%m, g=%m
    })");
}

TEST(Simplify, ReshapeChainsCollapse) {
  expect_pass("simplify", R"(graph main(%x: f32[2,6], %s: f32[batch,6]) {
      %a = reshape(%x) {shape=[3, 4]} : f32[3,4]
      %b = reshape(%a) {shape=[12]} : f32[12]
      %c = reshape(%x) {shape=[2, 6]} : f32[2,6]
      %d = expand_dims(%x) {axes=[0]} : f32[1,2,6]
      %e = squeeze(%d) {axes=[0]} : f32[2,6]
      %f = squeeze(%d) : f32[2,6]
      %g = expand_dims(%f) {axes=[1]} : f32[2,1,6]
      %h = reshape(%s) {shape=[0, 2, 3]} : f32[batch,2,3]
      %i = reshape(%h) {shape=[0, 3, 2]} : f32[batch,3,2]
      %j = reshape(%h) {shape=[0, 6]} : f32[batch,6]
      return b=%b, c=%c, e=%e, g=%g, i=%i, j=%j
    })",
              R"(graph main(%x: f32[2,6], %s: f32[batch,6]) {
      %a = reshape(%x) {shape=[3, 4]} : f32[3,4]
      %b = reshape(%x) {shape=[12]} : f32[12]
      %d = expand_dims(%x) {axes=[0]} : f32[1,2,6]
      %g = expand_dims(%x) {axes=[1]} : f32[2,1,6]
      %h = reshape(%s) {shape=[0, 2, 3]} : f32[batch,2,3]
      %i = reshape(%s) {shape=[0, 3, 2]} : f32[batch,3,2]
      return b=%b, c=%x, e=%x, g=%g, i=%i, j=%s
    })");
}

// What grad emits: shapes taken from values (reshape_like) and zeros broadcast like one.
TEST(Simplify, ShapeFromAValueOps) {
  expect_pass("simplify", R"(graph main(%x: f32[2,6], %l: f32[3,4], %c: f32[batch,4], %y: f32[4]) {
      %a = reshape_like(%x, %l) : f32[3,4]
      %b = reshape_like(%a, %x) : f32[2,6]
      %z = constant() {value=tensor<f32[]>[0.0]} : f32[]
      %zeros = broadcast_like(%z, %c) : f32[batch,4]
      %d = add(%c, %zeros) : f32[batch,4]
      %e = reshape_like(%c, %c) : f32[batch,4]
      %f = broadcast_like(%y, %l) : f32[3,4]
      %g = mul(%l, %f) : f32[3,4]
      return a=%a, b=%b, d=%d, e=%e, g=%g
    })",
              R"(graph main(%x: f32[2,6], %l: f32[3,4], %c: f32[batch,4], %y: f32[4]) {
      %a = reshape(%x) {shape=[3, 4]} : f32[3,4]
      %z = constant() {value=tensor<f32[]>[0.0]} : f32[]
      %zeros = broadcast_like(%z, %c) : f32[batch,4]
      %f = broadcast_like(%y, %l) : f32[3,4]
      %g = mul(%l, %y) : f32[3,4]
      return a=%a, b=%x, d=%c, e=%c, g=%g
    })");
}

TEST(Simplify, LeavesReshapesOfUnknownSizes) {
  expect_pass("simplify", R"(graph main(%x: f32[batch,6], %y: f32[?,4]) {
      %a = reshape(%x) {shape=[-1]} : f32[?]
      %b = reshape(%a) {shape=[0]} : f32[?]
      %c = reshape(%y) {shape=[0, 4]} : f32[?,4]
      %t = transpose(%x) : f32[6,batch]
      %d = reshape(%t) {shape=[-1]} : f32[?]
      return b=%b, c=%c, d=%d
    })",
              "");
}

TEST(Simplify, CastChainsThroughExactWidenings) {
  expect_pass("simplify", R"(graph main(%b: bf16[4], %h: f16[4], %i: i8[4], %x: f32[4]) {
      %a = cast(%b) {dtype=f32} : f32[4]
      %c = cast(%a) {dtype=bf16} : bf16[4]
      %d = cast(%h) {dtype=f32} : f32[4]
      %e = cast(%d) {dtype=f64} : f64[4]
      %f = cast(%i) {dtype=i32} : i32[4]
      %g = cast(%f) {dtype=f32} : f32[4]
      %k = cast(%x) {dtype=f32} : f32[4]
      return c=%c, e=%e, g=%g, k=%k
    })",
              R"(graph main(%b: bf16[4], %h: f16[4], %i: i8[4], %x: f32[4]) {
      %a = cast(%b) {dtype=f32} : f32[4]
      %d = cast(%h) {dtype=f32} : f32[4]
      %e = cast(%h) {dtype=f64} : f64[4]
      %f = cast(%i) {dtype=i32} : i32[4]
      %g = cast(%i) {dtype=f32} : f32[4]
      return c=%b, e=%e, g=%g, k=%x
    })");
}

TEST(Simplify, LeavesCastChainsThatRound) {
  expect_pass("simplify", R"(graph main(%x: f32[4], %i: i32[4], %h: f16[4], %l: i64[4]) {
      %a = cast(%x) {dtype=f16} : f16[4]
      %b = cast(%a) {dtype=f32} : f32[4]
      %c = cast(%i) {dtype=f32} : f32[4]
      %d = cast(%c) {dtype=i64} : i64[4]
      %e = cast(%h) {dtype=bf16} : bf16[4]
      %f = cast(%e) {dtype=f16} : f16[4]
      %g = cast(%x) {dtype=i32} : i32[4]
      %k = cast(%g) {dtype=f32} : f32[4]
      %m = cast(%l) {dtype=f64} : f64[4]
      %n = cast(%m) {dtype=i64} : i64[4]
      return b=%b, d=%d, f=%f, k=%k, n=%n
    })",
              "", {.lo = -1e6, .hi = 1e6});
}

TEST(Simplify, ElementwiseOpsBroadcastTheirInputsThemselves) {
  expect_pass("simplify", R"(graph main(%x: f32[2,3], %y: f32[3], %p: bool[2,3]) {
      %b = broadcast_to(%y) {shape=[2, 3]} : f32[2,3]
      %a = add(%x, %b) : f32[2,3]
      %two = constant() {value=tensor<f32[2,3]>[2.0, 2.0, 2.0, 2.0, 2.0, 2.0]} : f32[2,3]
      %m = mul(%two, %x) : f32[2,3]
      %s = select(%p, %b, %x) : f32[2,3]
      return a=%a, m=%m, s=%s
    })",
              R"(graph main(%x: f32[2,3], %y: f32[3], %p: bool[2,3]) {
      %b = broadcast_to(%y) {shape=[2, 3]} : f32[2,3]
      %a = add(%x, %y) : f32[2,3]
      %two = constant() {value=tensor<f32[2,3]>[2.0, 2.0, 2.0, 2.0, 2.0, 2.0]} : f32[2,3]
      %t = constant() {value=tensor<f32[]>[2.0]} : f32[]
      %m = mul(%t, %x) : f32[2,3]
      %s = select(%p, %y, %x) : f32[2,3]
      return a=%a, m=%m, s=%s
    })");
  // Here the broadcast makes the output: it stays.
  expect_pass("simplify", R"(graph main(%x: f32[3], %y: f32[3]) {
      %b = broadcast_to(%y) {shape=[2, 3]} : f32[2,3]
      %a = add(%x, %b) : f32[2,3]
      %n = neg(%b) : f32[2,3]
      return a=%a, n=%n
    })",
              "");
}

TEST(Simplify, DivisionByAPowerOfTwoMultiplies) {
  expect_pass("simplify", R"(graph main(%x: f32[2], %h: f16[2]) {
      %c = constant() {value=tensor<f32[2]>[4.0, -0.125]} : f32[2]
      %a = div(%x, %c) : f32[2]
      %k = constant() {value=tensor<f16[]>[0.5]} : f16[]
      %b = div(%h, %k) : f16[2]
      return a=%a, b=%b
    })",
              R"(graph main(%x: f32[2], %h: f16[2]) {
      %c = constant() {value=tensor<f32[2]>[4.0, -0.125]} : f32[2]
      %r = constant() {value=tensor<f32[2]>[0.25, -8.0]} : f32[2]
      %a = mul(%x, %r) : f32[2]
      %k = constant() {value=tensor<f16[]>[0.5]} : f16[]
      %s = constant() {value=tensor<f16[]>[2.0]} : f16[]
      %b = mul(%h, %s) : f16[2]
      return a=%a, b=%b
    })",
              {.rtol = 0});
}

// A reciprocal that is not exact would move results by an ulp (and a quantizer's rounding).
TEST(Simplify, LeavesDivisionsWithoutAnExactNormalReciprocal) {
  expect_pass("simplify", R"(graph main(%x: f32[2], %i: i32[2], %y: f32[2], %h: f16[2]) {
      %z = constant() {value=tensor<f32[2]>[2.0, 0.0]} : f32[2]
      %a = div(%x, %z) : f32[2]
      %big = constant() {value=tensor<f32[]>[1e+38]} : f32[]
      %b = div(%x, %big) : f32[2]
      %n = constant() {value=tensor<f32[]>[nan]} : f32[]
      %c = div(%x, %n) : f32[2]
      %k = constant() {value=tensor<i32[]>[2]} : i32[]
      %d = div(%i, %k) : i32[2]
      %e = div(%x, %y) : f32[2]
      %tiny = constant() {value=tensor<f16[]>[32768.0]} : f16[]
      %f = div(%h, %tiny) : f16[2]
      %three = constant() {value=tensor<f32[2]>[4.0, 3.0]} : f32[2]
      %g = div(%x, %three) : f32[2]
      %s = constant() {value=tensor<f32[]>[255.0]} : f32[]
      %q = div(%y, %s) : f32[2]
      return a=%a, b=%b, c=%c, d=%d, e=%e, f=%f, g=%g, q=%q
    })",
              "");
}

TEST(Simplify, LeavesCheckpointsRandomDrawsAndControlFlow) {
  expect_pass("simplify", R"(graph main(%x: f32[4], %p: bool[]) {
      %a = checkpoint(%x) : f32[4]
      %b = checkpoint(%a) : f32[4]
      %s = stop_gradient(%b) : f32[4]
      %r = uniform() {shape=[4]} : f32[4]
      %c = cond(%p, %s) [graph then(%x: f32[4]) {
        %0 = neg(%x) : f32[4]
        %1 = neg(%0) : f32[4]
        return out=%1
      }, graph else(%x: f32[4]) {
        return out=%x
      }] : f32[4]
      %d = add(%c, %r) : f32[4]
      return out=%d
    })",
              "");
}

TEST(Simplify, TrainGraphOfTheDemoTransformer) {
  auto g = test::gpt_train_graph();
  auto t0 = std::chrono::steady_clock::now();
  auto out = run_pass("simplify", *g);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 500) << g->nodes().size() << " nodes";
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(run_pass("simplify", *out), nullptr);
  auto pruned = run_pass("dce", *out);  // null when simplify left nothing dead
  EXPECT_LE((pruned ? *pruned : *out).nodes().size(), g->nodes().size());
  CompileOptions o;
  o.passes = std::vector<std::string>{"simplify", "dce"};
  test::expect_same_outputs(*g, o, 1, 1e-5, 1e-6, 0, 2);
}

}  // namespace
}  // namespace rlx
