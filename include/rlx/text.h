// The text format: print any graph, parse it back; print(parse(print(g))) == print(g).
//
//   graph main(%x: f32[batch,64], param %w: f32[64,32]) {
//     %0 = matmul(%x, %w) : f32[batch,32]
//     %1, %2 = split(%0) {axis=1, num=2, sizes=[]} : f32[batch,16], f32[batch,16]
//     return out0=%1, out1=%2
//   }
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx {

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
// Parses one graph; ops are looked up in OpRegistry::global(), types re-inferred and
// checked against the written ones. Throws ParseError "[text:L:C] expected …, got …".
std::unique_ptr<Graph> parse_graph(std::string_view text);

}  // namespace rlx
