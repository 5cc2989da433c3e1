// Runs of f32 region steps as one AVX-512 loop (region_jit.h), emitted with Xbyak.
//
// Registers are given out by hand: the constants an op needs live in zmm registers loaded
// before the loop; each value takes a register from its definition (or, for an input, its
// first use) to its last use in the run; exp and sigmoid borrow a few for their steps. A
// run that needs more than the 32 registers gets no code.
//
// Each op computes what its interpreter functor (elementwise_ops.h) computes, with the
// same special values (sqrt, rsqrt, reciprocal and the arithmetic are IEEE operations): relu keeps
// NaN and -0, max / min take +0 / -0 of two zeros and propagate NaN as a + b, neg and abs flip /
// clear the sign bit. exp and sigmoid are the instruction sequences of fm::exp16 and fm::sigmoid_n
// (elementwise_math.h), so full vectors give the interpreter's bits; the masked last vector
// computes what the interpreter's scalar tail does to within its few-ulp bounds.
#include "backend/cpu/region_jit.h"

#include "backend/cpu/elementwise_math.h"

#if defined(RLX_HAVE_XBYAK)
#include <xbyak/xbyak.h>
#include <xbyak/xbyak_util.h>
#endif

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "rlx/cpu_isa.h"
#include "rlx/settings.h"

namespace rlx::cpu::jit {

#if !defined(RLX_HAVE_XBYAK)

bool supports(std::string_view) { return false; }
Code compile(const Run&, const std::vector<bool>&) { return {}; }

#else

namespace {

enum class Kind { unary, binary };
struct OpInfo {
  std::string_view name;
  Kind kind;
};
constexpr OpInfo kOps[] = {
    {"add", Kind::binary}, {"sub", Kind::binary},       {"mul", Kind::binary},
    {"div", Kind::binary}, {"max", Kind::binary},       {"min", Kind::binary},
    {"neg", Kind::unary},  {"abs", Kind::unary},        {"square", Kind::unary},
    {"relu", Kind::unary}, {"sqrt", Kind::unary},       {"rsqrt", Kind::unary},
    {"exp", Kind::unary},  {"reciprocal", Kind::unary}, {"sigmoid", Kind::unary}};

const OpInfo* info(std::string_view name) {
  for (const OpInfo& o : kOps)
    if (o.name == name) return &o;
  return nullptr;
}

bool enabled() {
  static const bool cpu_has = [] {
    using Xbyak::util::Cpu;
    Cpu cpu;
    return cpu.has(Cpu::tAVX512F) && cpu.has(Cpu::tBMI2);
  }();
  // The level in use, too: RLX_CPU_ISA=avx2 on an AVX-512 CPU runs no AVX-512 code.
  return cpu_has && cpu_isa_avx512() && settings().region_jit;
}

uint32_t bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

// fm::exp16's constants (elementwise_math.h), so the JIT's exp gives the interpreter's bits.
constexpr float kHi = fm::kExpHi, kLo = fm::kExpLo, kLog2e = fm::kLog2e, kC1 = fm::kLn2Hi,
                kC2 = fm::kLn2Lo, kP0 = fm::kExpPoly[0], kP1 = fm::kExpPoly[1],
                kP2 = fm::kExpPoly[2], kP3 = fm::kExpPoly[3], kP4 = fm::kExpPoly[4],
                kP5 = fm::kExpPoly[5];
constexpr uint32_t kSign = 0x80000000u, kAbs = 0x7fffffffu;

// The constants (as bits) an op reads.
std::vector<uint32_t> constants_of(std::string_view op) {
  std::vector<uint32_t> exp = {bits(kHi), bits(kLo), bits(kLog2e), bits(kC1), bits(kC2), bits(kP0),
                               bits(kP1), bits(kP2), bits(kP3),    bits(kP4), bits(kP5), bits(1.f)};
  if (op == "neg") return {kSign};
  if (op == "abs") return {kAbs};
  if (op == "relu") return {0u};
  if (op == "rsqrt" || op == "reciprocal") return {bits(1.f)};
  if (op == "max" || op == "min") return {kSign};
  if (op == "exp") return exp;
  if (op == "sigmoid") {
    exp.insert(exp.end(), {kAbs, 0u, bits(2.f)});
    return exp;
  }
  return {};
}

struct OutOfRegisters {};

// vcmpps predicates
constexpr uint8_t kLtOq = 0x11, kEqOq = 0x00, kGtOq = 0x1E, kUnordQ = 0x03;

class Gen : public Xbyak::CodeGenerator {
 public:
  Gen(const Run& run, const std::vector<bool>& stream, bool nt, size_t bytes)
      : Xbyak::CodeGenerator(bytes, Xbyak::DontSetProtectRWE), run_(run) {
    using namespace Xbyak;
    // The slots in memory (read before the run writes them, or written), and where each
    // value is last read.
    std::vector<int> made;
    for (size_t j = 0; j < run.ops.size(); ++j) {
      for (int s : run.ops[j].in) {
        if (std::find(made.begin(), made.end(), s) == made.end()) slot(s);
        last_[s] = int(j);
      }
      made.push_back(run.ops[j].out);
    }
    for (int s : run.outputs) slot(s);
    for (size_t k = 0; k < run.outputs.size(); ++k) store_nt_[run.outputs[k]] = nt && stream[k];
    for (const Op& op : run.ops)
      for (uint32_t c : constants_of(op.name))
        if (!consts_.count(c)) consts_[c] = take();
    // Pointers: rdi = p, rsi = begin (the index), rdx = end; rax and r11 are scratch.
    static const Reg64 pool[] = {rcx, r8, r9, r10, rbx, rbp, r12, r13, r14, r15};
    if (slots_.size() > std::size(pool)) throw OutOfRegisters{};
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Reg64& r = pool[i];
      if (r.getIdx() == rbx.getIdx() || r.getIdx() == rbp.getIdx() || r.getIdx() >= 12) {
        push(r);
        saved_.push_back(r);
      }
      ptr_[slots_[i]] = r;
      mov(r, qword[rdi + 8 * slots_[i]]);
    }
    Label consts, loop, tail, done;
    size_t ci = 0;
    for (auto& [b, z] : consts_) vbroadcastss(Zmm(z), dword[rip + consts + int(4 * ci++)]);

    L(loop);
    mov(rax, rdx);
    sub(rax, rsi);
    cmp(rax, 16);
    jl(tail, T_NEAR);
    body(false);
    add(rsi, 16);
    jmp(loop, T_NEAR);
    L(tail);
    test(rax, rax);
    jle(done, T_NEAR);
    mov(r11d, 0xffff);
    bzhi(r11d, r11d, eax);
    kmovw(k1, r11d);
    body(true);
    L(done);
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) pop(*it);
    vzeroupper();
    ret();
    align(4);
    L(consts);
    for (auto& [b, z] : consts_) dd(b);
  }

 private:
  void slot(int s) {
    if (std::find(slots_.begin(), slots_.end(), s) == slots_.end()) slots_.push_back(s);
  }
  int take() {
    for (int r = 0; r < 32; ++r)
      if (!used_[size_t(r)]) {
        used_[size_t(r)] = true;
        return r;
      }
    throw OutOfRegisters{};
  }
  void give(int r) { used_[size_t(r)] = false; }
  Xbyak::Zmm cst(uint32_t b) { return Xbyak::Zmm(consts_.at(b)); }
  Xbyak::Zmm cst(float v) { return cst(bits(v)); }
  Xbyak::Address at(int s) { return ptr[ptr_.at(s) + rsi * 4]; }

  // One vector of every op; `masked`: the lanes of k1 only.
  void body(bool masked) {
    using namespace Xbyak;
    std::unordered_map<int, int> reg;  // slot -> zmm
    for (size_t j = 0; j < run_.ops.size(); ++j) {
      const Op& op = run_.ops[j];
      for (int s : op.in)
        if (!reg.count(s)) {  // an input of the run: loaded at its first use
          int z = take();
          if (masked)
            vmovups(Zmm(z) | k1 | T_z, at(s));
          else
            vmovups(Zmm(z), at(s));
          reg[s] = z;
        }
      std::vector<int> in;
      for (int s : op.in) in.push_back(reg.at(s));
      // Inputs read for the last time give their registers back before the result takes
      // one, except where the op still reads them after writing it.
      const int y = take();
      if (op.in.size() == 1)
        unary(op.name, Zmm(y), Zmm(in[0]));
      else
        binary(op.name, Zmm(y), Zmm(in[0]), Zmm(in[1]));
      reg[op.out] = y;
      if (store_nt_.count(op.out)) {
        if (masked)
          vmovups(at(op.out) | k1, Zmm(y));
        else if (store_nt_.at(op.out))
          vmovntps(at(op.out), Zmm(y));
        else
          vmovups(at(op.out), Zmm(y));
      }
      for (int s : op.in)
        if (last_.at(s) == int(j) && reg.count(s)) {
          give(reg.at(s));
          reg.erase(s);
        }
      if (!last_.count(op.out)) {  // read by nothing after it in the run
        give(y);
        reg.erase(op.out);
      }
    }
  }

  void unary(std::string_view op, const Xbyak::Zmm& y, const Xbyak::Zmm& x) {
    if (op == "neg") {
      vpxord(y, x, cst(kSign));
    } else if (op == "abs") {
      vpandd(y, x, cst(kAbs));
    } else if (op == "square") {
      vmulps(y, x, x);
    } else if (op == "relu") {  // x < 0 ? 0 : x (NaN and -0 pass)
      vcmpps(k2, x, cst(0.f), kLtOq);
      vblendmps(y | k2, x, cst(0.f));
    } else if (op == "sqrt") {  // correctly rounded, as fm::sqrt_n
      vsqrtps(y, x);
    } else if (op == "rsqrt") {  // 1 / sqrt(x), two roundings, as fm::sqrt_n
      vsqrtps(y, x);
      vdivps(y, cst(1.f), y);
    } else if (op == "reciprocal") {
      vdivps(y, cst(1.f), x);
    } else if (op == "exp") {
      exp16(y, x);
    } else {  // sigmoid: fm::sigmoid_n
      const int e = take(), d = take();
      Xbyak::Zmm ze(e), zd(d);
      vpandd(zd, x, cst(kAbs));
      vsubps(zd, cst(0.f), zd);
      exp16(ze, zd);
      vaddps(zd, cst(1.f), ze);
      vrcp14ps(y, zd);
      vfnmadd213ps(zd, y, cst(2.f));  // d = 2 - d r
      vmulps(y, y, zd);
      vcmpps(k2, x, cst(0.f), kLtOq);
      vmulps(y | k2, ze, y);  // x < 0: e r
      give(e);
      give(d);
    }
  }

  void binary(std::string_view op, const Xbyak::Zmm& y, const Xbyak::Zmm& a, const Xbyak::Zmm& b) {
    if (op == "add") {
      vaddps(y, a, b);
    } else if (op == "sub") {
      vsubps(y, a, b);
    } else if (op == "mul") {
      vmulps(y, a, b);
    } else if (op == "div") {
      vdivps(y, a, b);
    } else {  // max / min (ewop::Max, ewop::Min)
      const bool max = op == "max";
      vcmpps(k2, a, b, max ? kGtOq : kLtOq);
      vblendmps(y | k2, b, a);  // the larger (smaller); b where unordered
      // Equal values (only +-0 differ): max takes a unless a is -0, min a if a is -0.
      vcmpps(k3, a, b, kEqOq);
      vptestmd(k4, a, cst(kSign));
      if (max)
        kandnw(k4, k4, k3);
      else
        kandw(k4, k4, k3);
      vmovaps(y | k4, a);
      kandnw(k4, k4, k3);  // the other equal lanes: b
      vmovaps(y | k4, b);
      vcmpps(k2, a, b, kUnordQ);
      vaddps(y | k2, a, b);
    }
  }

  // fm::exp16: clamp (NaN kept), n = round(x / ln 2), Cody-Waite r, the cephes
  // polynomial, scalef by n. y may not be x.
  void exp16(const Xbyak::Zmm& y, const Xbyak::Zmm& x) {
    const int iv = take(), in = take(), ir = take();
    Xbyak::Zmm v(iv), nf(in), r(ir);
    vmovaps(v, x);
    vcmpps(k2, v, cst(kHi), kGtOq);
    vmovaps(v | k2, cst(kHi));
    vcmpps(k2, v, cst(kLo), kLtOq);
    vmovaps(v | k2, cst(kLo));
    vmulps(nf, v, cst(kLog2e));
    vrndscaleps(nf, nf, 0x08);  // to nearest, no exceptions
    vmovaps(r, v);
    vfmadd231ps(r, nf, cst(kC1));
    vfmadd231ps(r, nf, cst(kC2));
    vmovaps(y, cst(kP0));
    vfmadd213ps(y, r, cst(kP1));
    vfmadd213ps(y, r, cst(kP2));
    vfmadd213ps(y, r, cst(kP3));
    vfmadd213ps(y, r, cst(kP4));
    vfmadd213ps(y, r, cst(kP5));
    vmulps(v, r, r);
    vfmadd213ps(y, v, r);  // p r^2 + r
    vaddps(y, y, cst(1.f));
    vscalefps(y, y, nf);
    give(iv);
    give(in);
    give(ir);
  }

  const Run& run_;
  std::vector<int> slots_;
  std::map<uint32_t, int> consts_;  // constant bits -> zmm
  std::unordered_map<int, int> last_;
  std::unordered_map<int, bool> store_nt_;  // written slots -> streaming
  std::unordered_map<int, Xbyak::Reg64> ptr_;
  std::vector<Xbyak::Reg64> saved_;
  std::array<bool, 32> used_{};
};

}  // namespace

bool supports(std::string_view name) { return info(name) != nullptr; }

namespace {

Code generate(const Run& run, const std::vector<bool>& stream_outputs) {
  Code c;
  // Room for the code: a few hundred bytes an op (two copies of the body), and a larger
  // buffer once if that was short.
  for (size_t bytes = 4096 + 1024 * run.ops.size(), tries = 0; tries < 2; ++tries, bytes *= 4) {
    try {
      auto plain = std::make_shared<Gen>(run, stream_outputs, false, bytes);
      auto stream = std::make_shared<Gen>(run, stream_outputs, true, bytes);
      for (Gen* g : {plain.get(), stream.get()}) {
        g->ready();             // every label bound
        g->setProtectModeRE();  // written once, then only read and executed
      }
      c.plain = plain->getCode<RunFn>();
      c.stream = stream->getCode<RunFn>();
      c.holder =
          std::make_shared<std::pair<std::shared_ptr<Gen>, std::shared_ptr<Gen> > >(plain, stream);
      return c;
    } catch (const OutOfRegisters&) {
      return Code{};
    } catch (const Xbyak::Error&) {  // the buffer was short: once more, larger
    }
  }
  return Code{};
}

// What the code depends on: the ops, their slots, the written slots and which stream.
std::string key_of(const Run& run, const std::vector<bool>& stream_outputs) {
  std::string k;
  auto num = [&](int v) { k += std::to_string(v) + ','; };
  for (const Op& op : run.ops) {
    k.append(op.name);
    k += ':';
    num(op.out);
    for (int v : op.in) num(v);
    k += ';';
  }
  for (size_t i = 0; i < run.outputs.size(); ++i) {
    num(run.outputs[i]);
    k += stream_outputs[i] ? 's' : 'p';
  }
  return k;
}

}  // namespace

Code compile(const Run& run, const std::vector<bool>& stream_outputs) {
  if (!enabled() || run.ops.empty() || stream_outputs.size() != run.outputs.size()) return {};
  for (const Op& op : run.ops) {
    const OpInfo* i = info(op.name);
    if (!i || op.in.size() != (i->kind == Kind::unary ? 1u : 2u)) return {};
  }
  // Bodies repeat (a model's layers, a train step's forward and backward): one copy of the
  // code per distinct run, kept while some region holds it.
  // The functions of a cached holder, and the holder while some region keeps it.
  struct Cached {
    RunFn plain, stream;
    std::weak_ptr<const void> holder;
  };
  static std::mutex mu;
  static std::unordered_map<std::string, Cached> cache;
  const std::string key = key_of(run, stream_outputs);
  std::lock_guard lock(mu);
  auto it = cache.find(key);
  if (it != cache.end())
    if (std::shared_ptr<const void> held = it->second.holder.lock())
      return {it->second.plain, it->second.stream, std::move(held)};
  Code c = generate(run, stream_outputs);
  if (c.plain) {
    if (cache.size() > 4096)
      std::erase_if(cache, [](const auto& e) { return e.second.holder.expired(); });
    cache[key] = {c.plain, c.stream, c.holder};
  }
  return c;
}

#endif

}  // namespace rlx::cpu::jit
