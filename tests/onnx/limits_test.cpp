// Resource limits of every reader of outside bytes (ONNX models and TensorProtos, the text
// IR, .npy, safetensors, GGUF): a small input that claims 10^12 elements is a typed error
// raised before anything of that size is allocated, an external-data file must lie inside
// the model's folder, and deep nesting ends in a typed error, not a stack overflow.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <typeinfo>

#include "rlx/gguf.h"
#include "rlx/npy.h"
#include "rlx/onnx.h"
#include "rlx/safetensors.h"
#include "rlx/session.h"
#include "rlx/text.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using ::onnx::TensorProto;

constexpr int64_t kMega = 1000000;  // [kMega, kMega]: 10^12 elements

::onnx::ModelProto model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(17);
  m.mutable_graph()->set_name("g");
  return m;
}

void add_io(::onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

// y = x + w, w an initializer [kMega, kMega] that `fill` may change.
template <class Fill>
std::string add_model(Fill fill, std::vector<int64_t> dims = {kMega, kMega}) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", dims);
  add_io(g->add_output(), "y", dims);
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(TensorProto::FLOAT);
  w->add_dims(kMega);
  w->add_dims(kMega);
  fill(*w);
  return m.SerializeAsString();
}

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no " << typeid(E).name();
  return {};
}

TEST(Limits, OnnxInitializerClaimingTeraElementsIsAValueError) {
  std::string raw = add_model([](TensorProto& w) { w.set_raw_data(std::string(4, '\0')); });
  std::string typed = add_model([](TensorProto& w) { w.add_float_data(1); });
  ASSERT_LT(raw.size(), 1024u);
  EXPECT_NE(error_of<ValueError>([&] {
              onnx::load_bytes(raw, ".");
            }).find("expected 4000000000000 bytes of raw_data for FLOAT[1000000,1000000], got 4"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([&] { onnx::load_bytes(typed, "."); })
                .find("expected 1000000000000 elements for dims [1000000,1000000] in float_data, "
                      "got 1"),
            std::string::npos);
}

// The element count fits int64 but its bytes do not (2^61 doubles), or the count itself
// overflows.
TEST(Limits, OnnxDimsWhoseBytesOverflowAreValueErrors) {
  std::string doubles = add_model([](TensorProto& w) {
    w.set_data_type(TensorProto::DOUBLE);
    w.clear_dims();
    w.add_dims(int64_t{1} << 61);
  });
  std::string count = add_model([](TensorProto& w) {
    w.add_dims(int64_t{1} << 40);
    w.add_dims(int64_t{1} << 40);
  });
  EXPECT_NE(error_of<ValueError>([&] { onnx::load_bytes(doubles, "."); }).find("fits in memory"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([&] { onnx::load_bytes(count, "."); }).find("expected dims"),
            std::string::npos);
}

TEST(Limits, OnnxConstantClaimingTeraElementsIsAValueError) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_output(), "c", {kMega, kMega});
  auto* n = g->add_node();
  n->set_op_type("Constant");
  n->add_output("c");
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(TensorProto::FLOAT);
  a->mutable_t()->add_dims(kMega);
  a->mutable_t()->add_dims(kMega);
  EXPECT_THROW(onnx::load_bytes(m.SerializeAsString(), "."), ValueError);
}

TEST(Limits, OnnxExternalDataStaysInTheModelFolder) {
  fs::path dir = fs::temp_directory_path() / str_cat("rlx_limits_", ::getpid());
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "w.bin", std::ios::binary) << std::string(8, '\0');
  auto external = [](std::string location, std::string length = "8") {
    return add_model(
        [&](TensorProto& w) {
          w.clear_dims();
          w.add_dims(2);
          w.set_data_location(TensorProto::EXTERNAL);
          auto* kv = w.add_external_data();
          kv->set_key("location");
          kv->set_value(location);
          kv = w.add_external_data();
          kv->set_key("length");
          kv->set_value(length);
        },
        {2});
  };
  for (const char* bad : {"../w.bin", "/etc/passwd", "sub/../../w.bin"})
    EXPECT_NE(error_of<ValueError>([&] {
                onnx::load_bytes(external(bad), (dir / "sub").string());
              }).find("inside the model's folder"),
              std::string::npos)
        << bad;
  EXPECT_NO_THROW(onnx::load_bytes(external("sub/w.bin"), dir.string()));
  // A length past the file, or one that overflows with the offset.
  EXPECT_THROW(onnx::load_bytes(external("sub/w.bin", "1000000000000"), dir.string()), IoError);
  EXPECT_THROW(onnx::load_bytes(external("sub/w.bin", "9223372036854775807"), dir.string()),
               IoError);
  fs::remove_all(dir);
}

// If nodes nested `depth` deep, the innermost returning x.
std::string nested_ifs(int depth) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", {2});
  auto* c = g->add_input();
  c->set_name("c");
  c->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::BOOL);
  c->mutable_type()->mutable_tensor_type()->mutable_shape();  // a scalar
  add_io(g->add_output(), "y", {2});
  ::onnx::GraphProto* at = g;
  std::string out = "y";
  for (int d = 0; d < depth; ++d) {
    auto* n = at->add_node();
    n->set_op_type("If");
    n->add_input("c");
    n->add_output(out);
    ::onnx::GraphProto* branches[2];
    for (int b = 0; b < 2; ++b) {
      auto* a = n->add_attribute();
      a->set_name(b ? "else_branch" : "then_branch");
      a->set_type(::onnx::AttributeProto::GRAPH);
      branches[b] = a->mutable_g();
      branches[b]->set_name(str_cat("b", d, "_", b));
      add_io(branches[b]->add_output(), str_cat("o", d, "_", b), {2});
    }
    auto* id = branches[1]->add_node();  // else: x
    id->set_op_type("Identity");
    id->add_input("x");
    id->add_output(str_cat("o", d, "_1"));
    at = branches[0];  // then: the next level
    out = str_cat("o", d, "_0");
  }
  auto* id = at->add_node();
  id->set_op_type("Identity");
  id->add_input("x");
  id->add_output(out);
  return m.SerializeAsString();
}

TEST(Limits, OnnxSubgraphNestingIsBounded) {
  onnx::Model ok = onnx::load_bytes(nested_ifs(8), ".");
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  auto out = Session().compile(*ok.graph).run(
      std::vector<Tensor>{x, Tensor::from_vector<bool>({true}, {})});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 2}));
  // Protobuf's recursion limit (100 messages deep) turns deeper models away.
  EXPECT_THROW(onnx::load_bytes(nested_ifs(200), "."), IoError);
}

TEST(Limits, TensorProtoFileClaimingTeraElementsIsAValueError) {
  fs::path p = fs::temp_directory_path() / str_cat("rlx_limits_", ::getpid(), ".pb");
  TensorProto t;
  t.set_data_type(TensorProto::FLOAT);
  t.add_dims(kMega);
  t.add_dims(kMega);
  t.set_raw_data(std::string(16, '\0'));
  std::ofstream(p, std::ios::binary) << t.SerializeAsString();
  EXPECT_THROW(onnx::read_tensor(p.string()), ValueError);
  fs::remove(p);
}

TEST(Limits, TextLiteralClaimingTeraElementsIsAParseError) {
  EXPECT_THROW(parse_graph("graph main() {\n  %0 = constant() {value=tensor<f32[1000000,1000000]>"
                           "[1.0]} : f32[1000000,1000000]\n  return out0=%0\n}\n"),
               ParseError);
}

TEST(Limits, TextSubgraphNestingIsAParseError) {
  std::string text = "graph main(%p: bool[]) {\n";
  for (int d = 0; d < 200; ++d) text += "%0 = cond(%p) [graph then(%p: bool[]) {\n";
  EXPECT_THROW(parse_graph(text), ParseError);
}

std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

TEST(Limits, NpyClaimingTeraElementsIsAnIoError) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }";
  header.resize(117, ' ');  // 10 + 118 header bytes: a multiple of 64
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header;
  file += std::string(16, '\0');
  EXPECT_THROW(read_npy(bytes_of(file)), IoError);
}

std::vector<uint8_t> safetensors_file(const std::string& header, size_t data) {
  std::vector<uint8_t> out(8);
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data);
  return out;
}

TEST(Limits, SafetensorsClaimingTeraElementsIsAnIoError) {
  auto file = safetensors_file(
      R"({"w":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,16]}})", 16);
  EXPECT_THROW(read_safetensors(file), IoError);
}

TEST(Limits, SafetensorsDeepJsonIsAnIoError) {
  auto file = safetensors_file(std::string(100000, '[') + std::string(100000, ']'), 0);
  EXPECT_THROW(read_safetensors(file), IoError);
}

TEST(Limits, GgufClaimingTeraElementsIsAnIoError) {
  std::vector<uint8_t> f;
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) f.push_back(uint8_t(v >> (8 * i)));
  };
  f = {'G', 'G', 'U', 'F'};
  put(3, 4);  // version
  put(1, 8);  // tensors
  put(0, 8);  // metadata
  put(1, 8);  // name "w"
  f.push_back('w');
  put(2, 4);  // n_dims
  put(kMega, 8);
  put(kMega, 8);
  put(0, 4);  // F32
  put(0, 8);  // offset
  f.resize((f.size() + 31) / 32 * 32 + 64);
  EXPECT_THROW(gguf::File::from_bytes(f), IoError);
}

}  // namespace
}  // namespace rlx
