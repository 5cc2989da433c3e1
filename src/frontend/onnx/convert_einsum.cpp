// ONNX Einsum as core ops: repeated labels of one operand become diagonals (a masked
// sum), labels nothing else needs are summed out, operands are contracted pairwise left
// to right with dot_general, and the result is transposed to the output's order.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "frontend/onnx/context.h"
#include "frontend/onnx/ops/reduce.h"

namespace rlx::onnx_import {

namespace {

// Letters label themselves (their char code); the dims an ellipsis covers get kEllipsis
// + j, right-aligned across operands (numpy broadcasting).
constexpr int kEllipsis = 1000;

struct Operand {
  Value v;
  std::vector<int> labels;  // one per axis of v
};

struct Term {
  std::vector<int> before, after;  // letters before / after the ellipsis
  bool ellipsis = false;
};

Term parse_term(const NodeContext& ctx, std::string_view s) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.substr(i, 3) == "...") {
      if (t.ellipsis) ctx.fail("expected at most one ellipsis per term, got '", s, "'");
      t.ellipsis = true;
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(s[i]))) {
      (t.ellipsis ? t.after : t.before).push_back(s[i]);
    } else {
      ctx.fail("expected letters and '...' in the equation's terms, got '", s, "'");
    }
  }
  return t;
}

std::vector<int> term_labels(const Term& t, int64_t ell_dims, int64_t max_ell) {
  std::vector<int> l = t.before;
  for (int64_t j = 0; j < ell_dims; ++j) l.push_back(kEllipsis + int(max_ell - ell_dims + j));
  l.insert(l.end(), t.after.begin(), t.after.end());
  return l;
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Value transpose(NodeContext& ctx, Operand& op, const std::vector<int>& order) {
  IntList perm;
  for (int l : order)
    perm.push_back(std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  op.labels = order;
  if (!identity) op.v = ctx.apply1("transpose", {op.v}, {{"perm", perm}});
  return op.v;
}

// Replaces each label repeated within the operand by its diagonal.
void take_diagonals(NodeContext& ctx, Operand& op) {
  for (;;) {
    size_t p = 0, q = 0;
    for (size_t i = 0; i < op.labels.size() && q == 0; ++i)
      for (size_t j = i + 1; j < op.labels.size(); ++j)
        if (op.labels[i] == op.labels[j]) {
          p = i, q = j;
          break;
        }
    if (q == 0) return;
    const Dim &a = op.v.shape()[p], &b = op.v.shape()[q];
    if (!a.is_static() || !(a == b))
      ctx.unsupported("Einsum diagonal needs equal static dims, got ", shape_str(op.v.shape()));
    // Move the pair last, keep the diagonal through a mask, sum one of the pair away.
    std::vector<int> order;
    for (size_t i = 0; i < op.labels.size(); ++i)
      if (i != p && i != q) order.push_back(op.labels[i]);
    int label = op.labels[p];
    op.labels[q] = -1;  // tell the two apart for the transpose
    order.push_back(label);
    order.push_back(-1);
    transpose(ctx, op, order);
    int64_t n = a.value();
    auto iota = [&](int64_t axis) {
      return ctx.apply1("iota", {},
                        {{"shape", IntList{n, n}}, {"dtype", DType::i64}, {"axis", axis}});
    };
    Value row = iota(0), col = iota(1);
    Value mask = ctx.apply1("eq", {row, col});
    Value kept = ctx.apply1("select", {mask, op.v, ctx.scalar(op.v.dtype(), 0)});
    op.v = ctx.apply1("sum", {kept}, {{"axes", IntList{op.v.rank() - 1}}, {"keepdims", false}});
    op.labels.pop_back();
  }
}

// Sums out the labels of op that are not in `keep`.
void sum_out(NodeContext& ctx, Operand& op, const std::vector<int>& keep) {
  IntList axes;
  std::vector<int> rest;
  for (size_t i = 0; i < op.labels.size(); ++i) {
    if (contains(keep, op.labels[i]))
      rest.push_back(op.labels[i]);
    else
      axes.push_back(int64_t(i));
  }
  if (axes.empty()) return;
  op.v = ctx.apply1("sum", {op.v}, {{"axes", axes}, {"keepdims", false}});
  op.labels = rest;
}

// Drops axis i (static size 1) from op.
void drop_unit_axis(NodeContext& ctx, Operand& op, size_t i) {
  op.v = ctx.apply1("squeeze", {op.v}, {{"axes", IntList{int64_t(i)}}});
  op.labels.erase(op.labels.begin() + std::ptrdiff_t(i));
}

// a · b over their shared labels: those in `needed` stay as batch dims, the others are
// contracted. Result labels: batch, a's free, b's free (dot_general's order).
Operand contract(NodeContext& ctx, Operand a, Operand b, const std::vector<int>& needed) {
  // A shared label of size 1 on one side only broadcasts: it belongs to the other side.
  for (size_t i = a.labels.size(); i-- > 0;) {
    auto it = std::find(b.labels.begin(), b.labels.end(), a.labels[i]);
    if (it == b.labels.end()) continue;
    size_t j = size_t(it - b.labels.begin());
    const Dim &da = a.v.shape()[i], &db = b.v.shape()[j];
    if (da.is(1) && !db.is(1))
      drop_unit_axis(ctx, a, i);
    else if (db.is(1) && !da.is(1))
      drop_unit_axis(ctx, b, j);
  }
  std::vector<int> keep_a = needed, keep_b = needed;
  keep_a.insert(keep_a.end(), b.labels.begin(), b.labels.end());
  keep_b.insert(keep_b.end(), a.labels.begin(), a.labels.end());
  sum_out(ctx, a, keep_a);
  sum_out(ctx, b, keep_b);

  IntList lb, rb, lc, rc;
  std::vector<int> batch, free_a, free_b;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    int l = a.labels[i];
    auto it = std::find(b.labels.begin(), b.labels.end(), l);
    if (it == b.labels.end()) {
      free_a.push_back(l);
      continue;
    }
    int64_t j = it - b.labels.begin();
    if (contains(needed, l)) {
      lb.push_back(int64_t(i)), rb.push_back(j), batch.push_back(l);
    } else {
      lc.push_back(int64_t(i)), rc.push_back(j);
    }
  }
  for (int l : b.labels)
    if (!contains(a.labels, l)) free_b.push_back(l);
  Operand out;
  out.labels = batch;
  out.labels.insert(out.labels.end(), free_a.begin(), free_a.end());
  out.labels.insert(out.labels.end(), free_b.begin(), free_b.end());
  if (lc.empty()) {
    // Nothing to sum: a broadcast product, [batch, free_a, 1…] * [batch, 1…, free_b].
    std::vector<int> order_a = batch, order_b = batch;
    order_a.insert(order_a.end(), free_a.begin(), free_a.end());
    order_b.insert(order_b.end(), free_b.begin(), free_b.end());
    IntList units_a, units_b;
    for (size_t i = 0; i < free_b.size(); ++i) units_a.push_back(int64_t(order_a.size() + i));
    for (size_t i = 0; i < free_a.size(); ++i) units_b.push_back(int64_t(batch.size() + i));
    Value va = transpose(ctx, a, order_a), vb = transpose(ctx, b, order_b);
    if (!units_a.empty()) va = ctx.apply1("expand_dims", {va}, {{"axes", units_a}});
    if (!units_b.empty()) vb = ctx.apply1("expand_dims", {vb}, {{"axes", units_b}});
    out.v = ctx.apply1("mul", {va, vb});
  } else {
    out.v = ctx.apply1(
        "dot_general", {a.v, b.v},
        {{"lhs_batch", lb}, {"rhs_batch", rb}, {"lhs_contracting", lc}, {"rhs_contracting", rc}});
  }
  return out;
}

}  // namespace

std::vector<Value> convert_einsum(NodeContext& ctx) {
  std::string eq;
  for (char c : ctx.attr_string("equation", ""))
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(ctx, std::string_view(lhs).substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  size_t n = ctx.num_inputs();
  if (terms.size() != n)
    ctx.fail("expected one equation term per input (", n, "), got ", terms.size(), " in '", eq,
             "'");

  // How many dims each ellipsis covers; the widest sets the output's ellipsis dims.
  std::vector<int64_t> ell(n, 0);
  int64_t max_ell = 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t rank = ctx.input(i).rank();
    int64_t letters = int64_t(terms[i].before.size() + terms[i].after.size());
    ell[i] = rank - letters;
    if (ell[i] < 0 || (!terms[i].ellipsis && ell[i] != 0))
      ctx.fail("expected input ", i, " of rank ", letters, terms[i].ellipsis ? " or more" : "",
               " for its term, got ", shape_str(ctx.input(i).shape()));
    max_ell = std::max(max_ell, ell[i]);
  }
  std::vector<Operand> ops(n);
  for (size_t i = 0; i < n; ++i) {
    ops[i].v = ctx.input(i);
    ops[i].labels = term_labels(terms[i], ell[i], max_ell);
  }

  std::vector<int> out;
  if (arrow != std::string::npos) {
    Term t = parse_term(ctx, std::string_view(eq).substr(arrow + 2));
    out = term_labels(t, t.ellipsis ? max_ell : 0, max_ell);
    std::set<int> seen;
    for (int l : out) {
      bool found = false;
      for (const Operand& op : ops) found = found || contains(op.labels, l);
      if (!seen.insert(l).second || !found)
        ctx.fail("expected output labels that are distinct and appear in the inputs, got '",
                 eq.substr(arrow + 2), "'");
    }
  } else {
    // Implicit output: the ellipsis dims, then the letters used once, in ASCII order.
    out = term_labels(Term{{}, {}, true}, max_ell, max_ell);
    std::map<int, int> count;
    for (const Term& t : terms) {
      for (int l : t.before) ++count[l];
      for (int l : t.after) ++count[l];
    }
    for (auto [l, c] : count)
      if (c == 1) out.push_back(l);
  }

  DType dt = ops[0].v.dtype();
  for (size_t i = 0; i < n; ++i) {
    if (ops[i].v.dtype() != dt)
      ctx.fail_type("expected inputs of one dtype, got ", dtype_name(dt), " and ",
                    dtype_name(ops[i].v.dtype()));
    take_diagonals(ctx, ops[i]);
  }
  // Labels needed after operand i: the output's and those of operands i+1…
  Operand acc = ops[0];
  for (size_t i = 1; i < n; ++i) {
    std::vector<int> needed = out;
    for (size_t j = i + 1; j < n; ++j)
      needed.insert(needed.end(), ops[j].labels.begin(), ops[j].labels.end());
    acc = contract(ctx, acc, ops[i], needed);
  }
  sum_out(ctx, acc, out);
  return {transpose(ctx, acc, out)};
}

}  // namespace rlx::onnx_import
