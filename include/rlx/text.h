// The text format: print any graph, parse it back; print(parse(print(g))) == print(g).
//
//   graph main(%x: f32[batch,64], param %w: f32[64,32]) {
//     %0 = matmul(%x, %w) : f32[batch,32]
//     %1, %2 = split(%0) {axis=1, num=2, sizes=[]} : f32[batch,16], f32[batch,16]
//     return out0=%1, out1=%2
//   }
//
// Details:
// - Args are %<name> ("param" marks params); every other value is %0, %1, … in
//   definition order, restarting in each subgraph. Hand-written text may name results
//   freely (%h = relu(%x) : …); names must be new within their graph.
// - A node: [results =] op(inputs) [{attrs}] [[subgraphs]] [: result types]. Nodes with
//   no outputs have neither results nor types. The graph ends with
//   "return name=%v, …" ("return" alone when there are no outputs).
// - Attributes in key order. Ints plain; floats in the shortest form that reads back
//   exactly, always with '.', 'e', inf or nan (2.0, 0.1, 1e+300, -inf); strings quoted
//   with \n \t \r \" \\ \xHH escapes; bools true/false; dtypes bare (f32); lists [1, 2]
//   (Floats if any element is a float; [] reads as Ints, which the schema converts);
//   tensors tensor<f32[2,2]>[1.0, 2.0, 3.0, 4.0] (row-major; bool elements true/false).
// - Subgraphs follow the attributes as [graph then(…) {…}, graph else(…) {…}], each
//   indented two more spaces. They see only their own args.
// - "//" starts a comment to the end of the line.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx {

class OpRegistry;

// A syntax or semantic error in graph text, with its 1-based position.
class ParseError : public ValueError {
 public:
  ParseError(int line, int column, const std::string& msg)
      : ValueError(msg), line_(line), column_(column) {}
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  int line_, column_;
};

std::string print_graph(const Graph& g);
// One attribute value as the text format writes it: 3, 0.5, "same", [1,2], f32, ….
std::string attr_str(const AttrValue& a);
// Parses one graph; ops are looked up in `ops` (OpRegistry::global() without it), types
// re-inferred and checked against the written ones. Throws ParseError "[text:L:C] expected …,
// got …".
std::unique_ptr<Graph> parse_graph(std::string_view text);
std::unique_ptr<Graph> parse_graph(std::string_view text, const OpRegistry& ops);

}  // namespace rlx
