// The importer on hand-built models: what real exporters write (unsorted nodes, Constant
// nodes instead of initializers, external data, 16-bit and 8-bit initializers, symbolic
// and 0-d inputs, extra opset imports) and bad input (typed errors, never a crash).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "rlx/onnx.h"
#include "rlx/session.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using ::onnx::TensorProto;

void add_io(::onnx::ValueInfoProto* vi, const std::string& name, int elem,
            const std::vector<std::string>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else if (!d.empty())
      dim->set_dim_param(d);
  }
}

::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op,
                            std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

::onnx::ModelProto model(int64_t opset = 17) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

std::string bytes_of(const ::onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

onnx::Model import(const ::onnx::ModelProto& m, const onnx::ImportOptions& o = {}) {
  return onnx::load_bytes(bytes_of(m), ".", o);
}

std::vector<Tensor> run(const Graph& g, std::vector<Tensor> in) {
  return Session(Device::cpu()).compile(g).run(in);
}

// y = x + c, c a Constant node made after its user (the file is not in topological order).
::onnx::ModelProto unsorted_add() {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x:0", TensorProto::FLOAT, {"batch", "3"});
  add_io(g->add_output(), "y:0", TensorProto::FLOAT, {"batch", "3"});
  add_node(g, "Add", {"x:0", "c"}, {"y:0"});
  auto* c = add_node(g, "Constant", {}, {"c"});
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(3);
  for (float v : {1.f, 2.f, 3.f}) t->add_float_data(v);
  return m;
}

TEST(OnnxImport, UnsortedNodesConstantNodesSymbolicDimsAndNames) {
  onnx::Model m = import(unsorted_add());
  ASSERT_EQ(m.inputs, std::vector<std::string>{"x:0"});
  EXPECT_EQ(m.graph->args()[0].name, "x_0");  // identifiers in rlx
  EXPECT_EQ(m.graph->args()[0].value.type().str(), "f32[batch,3]");
  auto out = run(*m.graph, {Tensor::from_vector<float>({1, 1, 1, 2, 2, 2}, {2, 3})});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, 3, 4, 3, 4, 5}));
}

TEST(OnnxImport, InputShapesBindSymbolicDims) {
  onnx::ImportOptions o;
  o.input_shapes["x:0"] = {4, 3};
  onnx::Model m = import(unsorted_add(), o);
  EXPECT_EQ(m.graph->args()[0].value.type().str(), "f32[4,3]");
  o.input_shapes["x:0"] = {4, 5};
  EXPECT_THROW(import(unsorted_add(), o), ValueError);  // dim 1 is 3
  o.input_shapes = {{"nope", {1, 3}}};
  EXPECT_THROW(import(unsorted_add(), o), ValueError);
}

TEST(OnnxImport, ExtraOpsetImportsAreIgnored) {
  ::onnx::ModelProto m = unsorted_add();
  auto* o = m.add_opset_import();
  o->set_domain("com.example.unused");
  o->set_version(3);
  EXPECT_NO_THROW(import(m));
}

TEST(OnnxImport, WrongInputDtypeOrShapeIsATypedErrorAtRun) {
  onnx::Model m = import(unsorted_add());
  CompiledGraph cg = Session(Device::cpu()).compile(*m.graph);
  EXPECT_THROW(cg.run(std::vector<Tensor>{Tensor::zeros(DType::i64, {2, 3})}), TypeError);
  EXPECT_THROW(cg.run(std::vector<Tensor>{Tensor::zeros(DType::f32, {2, 4})}), ValueError);
  EXPECT_THROW(cg.run(std::vector<Tensor>{}), ValueError);
}

// A model whose output is one initializer of the given type and raw bytes.
::onnx::ModelProto initializer_model(int elem, std::vector<int64_t> dims, const std::string& raw) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  auto* t = g->add_initializer();
  t->set_name("w");
  t->set_data_type(elem);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(raw);
  add_node(g, "Constant", {}, {"unused"})->add_attribute()->set_name("value_int");
  g->mutable_node(0)->mutable_attribute(0)->set_type(::onnx::AttributeProto::INT);
  std::vector<std::string> sdims;
  for (int64_t d : dims) sdims.push_back(std::to_string(d));
  add_io(g->add_output(), "w", elem, sdims);
  return m;
}

TEST(OnnxImport, SixteenAndEightBitInitializers) {
  struct Case {
    int elem;
    std::string raw;
    DType dtype;
    std::vector<double> values;
  };
  const std::vector<Case> cases = {
      {TensorProto::FLOAT16, std::string("\x00\x3c\x00\xc0", 4), DType::f16, {1, -2}},
      {TensorProto::BFLOAT16, std::string("\x80\x3f\x40\xc0", 4), DType::bf16, {1, -3}},
      {TensorProto::INT8, std::string("\x05\xfb", 2), DType::i8, {5, -5}},
      {TensorProto::UINT8, std::string("\x05\xfb", 2), DType::u8, {5, 251}},
      {TensorProto::UINT16, std::string("\xff\xff\x01\x00", 4), DType::i32, {65535, 1}},
      {TensorProto::UINT32,
       std::string("\xff\xff\xff\xff\x02\x00\x00\x00", 8),
       DType::i64,
       {4294967295.0, 2}},
      {TensorProto::BOOL, std::string("\x01\x00", 2), DType::boolean, {1, 0}},
  };
  for (const Case& c : cases) {
    onnx::Model m = import(initializer_model(c.elem, {2}, c.raw));
    auto out = run(*m.graph, {});
    EXPECT_EQ(out[0].dtype(), c.dtype) << c.elem;
    EXPECT_EQ(out[0].to_doubles(), c.values) << c.elem;
  }
}

// A u8 initializer from values.
void add_u8(::onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
            const std::vector<uint8_t>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::UINT8);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(v.begin(), v.end()));
}

// MatMulInteger and ConvInteger are exact over reductions far past f32's 2^24 (all 255s
// against zero points 0: every term 65025), with weights known at import (cut into runs by
// their sums) and computed at run time (the worst case): against int64 sums.
TEST(OnnxImport, IntegerProductsAreExactOverLongReductions) {
  std::mt19937 gen(7);
  auto bytes = [&](size_t n, bool extreme) {
    std::vector<uint8_t> v(n);
    for (auto& x : v) x = extreme ? (gen() % 8 ? 255 : 0) : uint8_t(gen() % 256);
    return v;
  };
  const int64_t k = 3000, n = 3, c = 70;  // c * 9 taps = 630 per output
  for (bool weights_known : {true, false}) {
    // y [2, n] = MatMulInteger(a [2, k], b [k, n], a_zp 0, b_zp 3)
    ::onnx::ModelProto m = model();
    auto* g = m.mutable_graph();
    add_io(g->add_input(), "a", TensorProto::UINT8, {"2", std::to_string(k)});
    std::vector<uint8_t> b = bytes(size_t(k * n), true), zp = {3};
    if (weights_known)
      add_u8(g, "b", {k, n}, b);
    else
      add_io(g->add_input(), "b", TensorProto::UINT8, {std::to_string(k), std::to_string(n)});
    add_u8(g, "bz", {}, zp);
    add_u8(g, "az", {}, {0});
    add_io(g->add_output(), "y", TensorProto::INT32, {"2", std::to_string(n)});
    add_node(g, "MatMulInteger", {"a", "b", "az", "bz"}, {"y"});
    std::vector<uint8_t> a = bytes(size_t(2 * k), true);
    std::vector<Tensor> in = {Tensor::from_vector(a, {2, k})};
    if (!weights_known) in.push_back(Tensor::from_vector(b, {k, n}));
    Tensor y = run(*import(m).graph, in)[0];
    ASSERT_EQ(y.dtype(), DType::i32);
    std::vector<double> got = y.to_doubles();
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t want = 0;
        for (int64_t q = 0; q < k; ++q)
          want += int64_t(a[size_t(i * k + q)]) * (b[size_t(q * n + j)] - 3);
        EXPECT_EQ(int64_t(got[size_t(i * n + j)]), want)
            << i << "," << j << " known " << weights_known;
      }
  }
  // y [1, 2, 3, 3] = ConvInteger(x [1, c, 3, 3], w [2, c, 3, 3]) with padding 1, w_zp 1
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", TensorProto::UINT8, {"1", std::to_string(c), "3", "3"});
  std::vector<uint8_t> w = bytes(size_t(2 * c * 9), true), x = bytes(size_t(c * 9), true);
  add_u8(g, "w", {2, c, 3, 3}, w);
  add_u8(g, "wz", {}, {1});
  add_u8(g, "xz", {}, {0});
  add_io(g->add_output(), "y", TensorProto::INT32, {"1", "2", "3", "3"});
  auto* conv = add_node(g, "ConvInteger", {"x", "w", "xz", "wz"}, {"y"});
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(::onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  std::vector<double> got =
      run(*import(m).graph, {Tensor::from_vector(x, {1, c, 3, 3})})[0].to_doubles();
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t p = 0; p < 9; ++p) {
      int64_t want = 0, py = p / 3, px = p % 3;
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t t = 0; t < 9; ++t) {
          int64_t iy = py + t / 3 - 1, ix = px + t % 3 - 1;
          if (iy < 0 || iy > 2 || ix < 0 || ix > 2) continue;
          want += int64_t(x[size_t(ci * 9 + iy * 3 + ix)]) * (w[size_t((o * c + ci) * 9 + t)] - 1);
        }
      EXPECT_EQ(int64_t(got[size_t(o * 9 + p)]), want) << o << "," << p;
    }
  // One channel whose 300 taps alone may pass 2^24 (all 255): no run is short enough (f64).
  ::onnx::ModelProto m1 = model();
  auto* g1 = m1.mutable_graph();
  add_io(g1->add_input(), "x", TensorProto::UINT8, {"1", "1", "300"});
  add_u8(g1, "w", {1, 1, 300}, std::vector<uint8_t>(300, 255));
  add_io(g1->add_output(), "y", TensorProto::INT32, {"1", "1", "1"});
  add_node(g1, "ConvInteger", {"x", "w"}, {"y"});
  Tensor y1 =
      run(*import(m1).graph, {Tensor::from_vector(std::vector<uint8_t>(300, 255), {1, 1, 300})})[0];
  EXPECT_EQ(int64_t(y1.to_doubles()[0]), int64_t(300) * 255 * 255);
}

TEST(OnnxImport, RawDataOfTheWrongSizeIsAValueError) {
  EXPECT_THROW(import(initializer_model(TensorProto::FLOAT, {3}, std::string(8, '\0'))),
               ValueError);
}

TEST(OnnxImport, StringInitializersAndUnsupportedTypes) {
  ::onnx::ModelProto m = initializer_model(TensorProto::STRING, {2}, "");
  auto* t = m.mutable_graph()->mutable_initializer(0);
  t->clear_raw_data();
  t->add_string_data("naïve");
  t->add_string_data("");
  EXPECT_EQ(run(*import(m).graph, {})[0].to_strings(), (std::vector<std::string>{"naïve", ""}));
  t->clear_string_data();  // 2 elements declared, none given
  EXPECT_THROW(import(m), ValueError);
  EXPECT_THROW(import(initializer_model(TensorProto::UNDEFINED, {1}, "")), NotSupported);
  // Complex initializers: raw bytes, (re, im) pairs in float_data; an odd count is refused.
  const float pair[2] = {1.5f, -2.0f};
  std::string raw(reinterpret_cast<const char*>(pair), sizeof pair);
  Tensor z = run(*import(initializer_model(TensorProto::COMPLEX64, {1}, raw)).graph, {})[0];
  ASSERT_EQ(z.dtype(), DType::c64);
  EXPECT_EQ(std::memcmp(z.data(), pair, sizeof pair), 0);
  ::onnx::ModelProto c = initializer_model(TensorProto::COMPLEX64, {1}, "");
  c.mutable_graph()->mutable_initializer(0)->clear_raw_data();
  c.mutable_graph()->mutable_initializer(0)->add_float_data(1.5f);
  EXPECT_THROW(import(c), ValueError);
  c.mutable_graph()->mutable_initializer(0)->add_float_data(-2.0f);
  z = run(*import(c).graph, {})[0];
  EXPECT_EQ(std::memcmp(z.data(), pair, sizeof pair), 0);
}

TEST(OnnxImport, ExternalData) {
  fs::path dir = fs::temp_directory_path() / ("rlx_onnx_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  float w[4] = {1.5f, -2.5f, 3.5f, 4.5f};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f.write("pad!", 4);
    f.write(reinterpret_cast<const char*>(w), sizeof w);
  }
  ::onnx::ModelProto m = initializer_model(TensorProto::FLOAT, {4}, "");
  auto* t = m.mutable_graph()->mutable_initializer(0);
  t->clear_raw_data();
  t->set_data_location(TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "4");
  kv("length", "16");
  std::string path = (dir / "model.onnx").string();
  std::ofstream(path, std::ios::binary) << bytes_of(m);
  auto out = run(*onnx::load(path).graph, {});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1.5f, -2.5f, 3.5f, 4.5f}));
  // The file is shorter than offset + length: an IoError naming it.
  t->mutable_external_data(2)->set_value("400");
  std::ofstream(path, std::ios::binary) << bytes_of(m);
  EXPECT_THROW(onnx::load(path), IoError);
  fs::remove_all(dir);
}

TEST(OnnxImport, TruncatedCorruptOrMissingFilesAreIoErrors) {
  std::string good = bytes_of(unsorted_add());
  EXPECT_THROW(onnx::load_bytes(good.substr(0, good.size() / 2), "."), IoError);
  EXPECT_THROW(onnx::load_bytes(std::string(64, '\xff'), "."), IoError);
  EXPECT_THROW(onnx::load_bytes("", "."), IoError);
  EXPECT_THROW(onnx::load("/nonexistent/model.onnx"), IoError);
  // Every prefix of a real model: an error or a model, never a crash.
  std::ifstream f(std::string(RLX_ONNX_TEST_DATA) + "/cnn/model.onnx", std::ios::binary);
  std::string cnn((std::istreambuf_iterator<char>(f)), {});
  ASSERT_GT(cnn.size(), 1000u);
  for (size_t n = 0; n < cnn.size(); n += 97) {
    try {
      onnx::load_bytes(cnn.substr(0, n), ".");
    } catch (const Error&) {
    }
  }
}

TEST(OnnxImport, ACycleIsAValueErrorNamingIt) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", TensorProto::FLOAT, {"2"});
  add_io(g->add_output(), "b", TensorProto::FLOAT, {"2"});
  add_node(g, "Add", {"x", "b"}, {"a"});
  add_node(g, "Add", {"x", "a"}, {"b"});
  try {
    import(m);
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, UndefinedNamesAreValueErrors) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", TensorProto::FLOAT, {"2"});
  add_io(g->add_output(), "y", TensorProto::FLOAT, {"2"});
  add_node(g, "Add", {"x", "nowhere"}, {"y"});
  EXPECT_THROW(import(m), ValueError);
}

TEST(OnnxImport, MissingOpsAreListedInOneError) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", TensorProto::FLOAT, {"2"});
  add_io(g->add_output(), "z", TensorProto::FLOAT, {"2"});
  add_node(g, "FrobnicateA", {"x"}, {"y"});
  add_node(g, "FrobnicateB", {"y"}, {"z"})->set_domain("com.example");
  try {
    import(m);
    FAIL() << "expected NotSupported";
  } catch (const NotSupported& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("FrobnicateA"), std::string::npos) << msg;
    EXPECT_NE(msg.find("com.example.FrobnicateB"), std::string::npos) << msg;
  }
}

// An If on `cond` giving `out`, its branches empty graphs that each output `r` (f32 of
// dims `dims`): the caller adds their nodes.
std::pair<::onnx::GraphProto*, ::onnx::GraphProto*> add_if(::onnx::GraphProto* g,
                                                           const std::string& cond,
                                                           const std::string& out,
                                                           const std::string& r,
                                                           const std::vector<std::string>& dims) {
  auto* n = add_node(g, "If", {cond}, {out});
  ::onnx::GraphProto* branches[2];
  int i = 0;
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::GRAPH);
    auto* b = a->mutable_g();
    b->set_name(name);
    add_io(b->add_output(), r, TensorProto::FLOAT, dims);
    branches[i++] = b;
  }
  return {branches[0], branches[1]};
}

TEST(OnnxImport, ZeroDimInputAndIfOnARuntimeCondition) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "c", TensorProto::BOOL, {});
  add_io(g->add_input(), "x", TensorProto::FLOAT, {"2"});
  add_io(g->add_output(), "y", TensorProto::FLOAT, {"2"});
  // then: x (captured from the outer graph); else: a constant.
  auto [then_g, else_g] = add_if(g, "c", "y", "r", {"2"});
  add_node(then_g, "Identity", {"x"}, {"r"});
  auto* v = add_node(else_g, "Constant", {}, {"r"})->add_attribute();
  v->set_name("value_floats");
  v->set_type(::onnx::AttributeProto::FLOATS);
  v->add_floats(7);
  v->add_floats(8);
  onnx::Model mm = import(m);
  EXPECT_EQ(mm.graph->args()[0].value.type().str(), "bool[]");
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  EXPECT_EQ(run(*mm.graph, {Tensor::from_vector<bool>({true}, {}), x})[0].to_vector<float>(),
            (std::vector<float>{1, 2}));
  EXPECT_EQ(run(*mm.graph, {Tensor::from_vector<bool>({false}, {}), x})[0].to_vector<float>(),
            (std::vector<float>{7, 8}));
}

// Branches whose outputs differ in dims (torchvision's batched_nms: an empty constant
// when there are no boxes, NMS's data-dependent count else): the If runs as onnx.if.
TEST(OnnxImport, IfWithBranchesOfDifferentDims) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "c", TensorProto::BOOL, {});
  add_io(g->add_input(), "x", TensorProto::FLOAT, {"n"});
  add_io(g->add_output(), "y", TensorProto::FLOAT, {"k"});
  auto [then_g, else_g] = add_if(g, "c", "y", "r", {"k"});
  auto* v = add_node(then_g, "Constant", {}, {"r"})->add_attribute();  // f32[0]
  v->set_name("value");
  v->set_type(::onnx::AttributeProto::TENSOR);
  v->mutable_t()->set_data_type(TensorProto::FLOAT);
  v->mutable_t()->add_dims(0);
  add_node(else_g, "Identity", {"x"}, {"r"});
  onnx::Model mm = import(m);
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  EXPECT_EQ(run(*mm.graph, {Tensor::from_vector<bool>({true}, {}), x})[0].shape(),
            (std::vector<int64_t>{0}));
  EXPECT_EQ(run(*mm.graph, {Tensor::from_vector<bool>({false}, {}), x})[0].to_vector<float>(),
            (std::vector<float>{1, 2, 3}));
}

TEST(OnnxImport, ReadTensorFiles) {
  std::string dir = std::string(RLX_ONNX_TEST_DATA) + "/mlp/test_data_set_0";
  Tensor t = onnx::read_tensor(dir + "/input_0.pb");
  EXPECT_EQ(t.type().str(), "f32[8,64]");
  EXPECT_THROW(onnx::read_tensor(dir + "/missing.pb"), IoError);
}

// String inputs, Constant value_strings and TfIdfVectorizer over a pool of strings.
TEST(OnnxImport, StringTensors) {
  ::onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "text", TensorProto::STRING, {"6"});
  auto* tf = add_node(g, "TfIdfVectorizer", {"text"}, {"tf"});
  auto ints = [&](const char* name, std::vector<int64_t> v) {
    auto* a = tf->add_attribute();
    a->set_name(name);
    if (v.size() == 1 && std::string(name).find("length") != std::string::npos) {
      a->set_type(::onnx::AttributeProto::INT);
      a->set_i(v[0]);
      return;
    }
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  ints("min_gram_length", {1});
  ints("max_gram_length", {2});
  auto* skip = tf->add_attribute();
  skip->set_name("max_skip_count");
  skip->set_type(::onnx::AttributeProto::INT);
  skip->set_i(0);
  auto* mode = tf->add_attribute();
  mode->set_name("mode");
  mode->set_type(::onnx::AttributeProto::STRING);
  mode->set_s("TF");
  ints("ngram_counts", {0, 3});
  ints("ngram_indexes", {0, 1, 2, 3, 4});
  auto* pool = tf->add_attribute();
  pool->set_name("pool_strings");
  pool->set_type(::onnx::AttributeProto::STRINGS);
  for (const char* w : {"a", "b", "c", "a", "b", "b", "c"}) pool->add_strings(w);
  auto* c = add_node(g, "Constant", {}, {"labels"})->add_attribute();
  c->set_name("value_strings");
  c->set_type(::onnx::AttributeProto::STRINGS);
  for (const char* w : {"spam", "ham"}) c->add_strings(w);
  add_io(g->add_output(), "tf", TensorProto::FLOAT, {"5"});
  add_io(g->add_output(), "labels", TensorProto::STRING, {"2"});
  onnx::Model mdl = import(m);
  auto out = run(*mdl.graph, {Tensor::from_strings({"a", "b", "c", "a", "b", "z"}, {6})});
  // unigrams a, b, c: 2, 2, 1; bigrams (a b), (b c): 2, 1.
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, 2, 1, 2, 1}));
  EXPECT_EQ(out[1].to_strings(), (std::vector<std::string>{"spam", "ham"}));
  EXPECT_THROW(run(*mdl.graph, {Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {6})}), Error);
}

}  // namespace
}  // namespace rlx
