// Runs of f32 region steps as one vector loop (region_jit.h), emitted with Xbyak: AVX-512
// (zmm, opmasks) or AVX2 (ymm, vector masks), one generator over the register type.
//
// Registers are given out by hand: the constants an op needs live in vector registers
// loaded before the loop; each value takes a register from its definition (or, for an
// input, its first use) to its last use in the run; exp and sigmoid borrow a few for their
// steps. Where that needs more registers than there are (AVX2's 16 fill up with exp's
// constants alone), the constants are read from memory instead, and a run that still
// does not fit gets no code.
//
// Each op computes what its interpreter functor (elementwise_ops.h) computes at the level
// in use, with the same special values (sqrt, rsqrt, reciprocal and the arithmetic are IEEE
// operations): relu keeps NaN and -0, max / min take +0 / -0 of two zeros and propagate NaN
// as a + b, neg and abs flip / clear the sign bit, hard_sigmoid is one fma (g++ contracts
// the functor's alpha x + beta at both levels) clamped to [0, 1] with NaN kept, erf is
// fm::erf's clamps and rational function. exp and sigmoid are the instruction sequences of
// fm::exp16 and fm::sigmoid_n (AVX-512) or fm::exp8 and fm::sigmoid8 (AVX2) in
// elementwise_math.h. So full vectors give the interpreter's bits; the masked last vector
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
#include <type_traits>
#include <unordered_map>

#include "rlx/cpu_isa.h"
#include "rlx/settings.h"

namespace rlx::cpu::jit {

#if !defined(RLX_HAVE_XBYAK)

bool supports(std::string_view) { return false; }
std::vector<std::string_view> attributes(std::string_view) { return {}; }
Code compile(const Run&, const std::vector<bool>&) { return {}; }

#else

namespace {

enum class Kind { unary, binary };
// An op, its operands, and the float attributes it reads (Op::params, in this order).
struct OpInfo {
  std::string_view name;
  Kind kind;
  std::array<std::string_view, 2> attrs{};
  size_t params() const {
    return size_t(
        std::count_if(attrs.begin(), attrs.end(), [](std::string_view a) { return !a.empty(); }));
  }
};
constexpr OpInfo kOps[] = {{"add", Kind::binary},
                           {"sub", Kind::binary},
                           {"mul", Kind::binary},
                           {"div", Kind::binary},
                           {"max", Kind::binary},
                           {"min", Kind::binary},
                           {"neg", Kind::unary},
                           {"abs", Kind::unary},
                           {"square", Kind::unary},
                           {"relu", Kind::unary},
                           {"sqrt", Kind::unary},
                           {"rsqrt", Kind::unary},
                           {"exp", Kind::unary},
                           {"reciprocal", Kind::unary},
                           {"sigmoid", Kind::unary},
                           {"erf", Kind::unary},
                           {"hard_sigmoid", Kind::unary, {"alpha", "beta"}}};

const OpInfo* info(std::string_view name) {
  for (const OpInfo& o : kOps)
    if (o.name == name) return &o;
  return nullptr;
}

enum class Isa { none, avx2, avx512 };

// The code must match the interpreter's functors at the level in use: AVX-512 code at the
// avx512 level, AVX2 code at avx2 (and in a native build without AVX-512), none at baseline
// (so RLX_CPU_ISA=avx2 on an AVX-512 CPU gets the AVX2 code).
Isa isa() {
  using Xbyak::util::Cpu;
  static const Cpu cpu;
  static const bool has512 = cpu.has(Cpu::tAVX512F) && cpu.has(Cpu::tBMI2);
  static const bool has2 = cpu.has(Cpu::tAVX2) && cpu.has(Cpu::tFMA);
  if (!settings().region_jit) return Isa::none;
  if (cpu_isa_avx512()) return has512 ? Isa::avx512 : Isa::none;
  const CpuIsa level = cpu_isa();
  return has2 && (level == CpuIsa::avx2 || level == CpuIsa::native) ? Isa::avx2 : Isa::none;
}

uint32_t bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

// fm::exp16's and fm::exp8's constants (elementwise_math.h), so the JIT's exp gives the
// interpreter's bits; kBias is exp8's exponent bias (an integer).
constexpr float kHi = fm::kExpHi, kLo = fm::kExpLo, kLog2e = fm::kLog2e, kC1 = fm::kLn2Hi,
                kC2 = fm::kLn2Lo, kP0 = fm::kExpPoly[0], kP1 = fm::kExpPoly[1],
                kP2 = fm::kExpPoly[2], kP3 = fm::kExpPoly[3], kP4 = fm::kExpPoly[4],
                kP5 = fm::kExpPoly[5];
constexpr uint32_t kSign = 0x80000000u, kAbs = 0x7fffffffu, kBias = 127u;

// The constants (as bits) an op reads at that level.
std::vector<uint32_t> constants_of(const Op& op, bool avx512) {
  std::vector<uint32_t> exp = {bits(kHi), bits(kLo), bits(kLog2e), bits(kC1), bits(kC2), bits(kP0),
                               bits(kP1), bits(kP2), bits(kP3),    bits(kP4), bits(kP5), bits(1.f)};
  if (!avx512) exp.push_back(kBias);
  const std::string_view name = op.name;
  if (name == "neg") return {kSign};
  if (name == "abs") return {kAbs};
  if (name == "relu" || name == "max" || name == "min") {  // AVX2 needs none
    if (!avx512) return {};
    return {name == "relu" ? 0u : kSign};
  }
  if (name == "rsqrt" || name == "reciprocal") return {bits(1.f)};
  if (name == "exp") return exp;
  if (name == "sigmoid") {
    exp.insert(exp.end(), {kAbs, 0u});
    if (avx512) exp.push_back(bits(2.f));
    return exp;
  }
  if (name == "erf") {
    std::vector<uint32_t> c = {bits(4.f), bits(-4.f), bits(1.f), bits(-1.f)};
    for (float k : fm::kErfP) c.push_back(bits(k));
    for (float k : fm::kErfQ) c.push_back(bits(k));
    return c;
  }
  if (name == "hard_sigmoid") return {bits(op.params[0]), bits(op.params[1]), 0u, bits(1.f)};
  return {};
}

struct OutOfRegisters {};

// vcmpps predicates
constexpr uint8_t kLtOq = 0x11, kEqOq = 0x00, kGtOq = 0x1E, kUnordQ = 0x03;

// V: Xbyak::Zmm (AVX-512) or Xbyak::Ymm (AVX2).
template <class V>
class Gen : public Xbyak::CodeGenerator {
  static constexpr bool k512 = std::is_same_v<V, Xbyak::Zmm>;
  static constexpr int kRegs = k512 ? 32 : 16, kLanes = k512 ? 16 : 8, kBytes = 4 * kLanes;

 public:
  // `in_memory`: the constants are read from memory rather than kept in registers.
  Gen(const Run& run, const std::vector<bool>& stream, bool nt, bool in_memory, size_t bytes)
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
    std::map<uint32_t, int> consts;  // constant bits -> register (-1: in memory)
    for (const Op& op : run.ops)
      for (uint32_t c : constants_of(op, k512))
        if (!consts.count(c)) consts[c] = in_memory ? -1 : take();
    size_t ci = 0;
    for (auto& [b, z] : consts) {
      if (z >= 0)
        creg_.emplace(b, V(z));
      else
        cmem_.emplace(b, ptr[rip + consts_ + int(kBytes * ci++)]);
    }
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
    Label loop, tail, done;
    ci = 0;
    for (auto& [b, z] : creg_) vbroadcastss(z, dword[rip + consts_ + int(4 * ci++)]);

    L(loop);
    mov(rax, rdx);
    sub(rax, rsi);
    cmp(rax, kLanes);
    jl(tail, T_NEAR);
    body(false);
    add(rsi, kLanes);
    jmp(loop, T_NEAR);
    L(tail);
    test(rax, rax);
    jle(done, T_NEAR);
    if constexpr (k512) {
      mov(r11d, 0xffff);
      bzhi(r11d, r11d, eax);
      kmovw(k1, r11d);
    }
    body(true);
    L(done);
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) pop(*it);
    vzeroupper();
    ret();
    // Constants in registers: one float each, broadcast; in memory: a vector each.
    align(cmem_.empty() ? 4 : kBytes);
    L(consts_);
    for (auto& [b, z] : creg_) dd(b);
    for (auto& [b, a] : cmem_)
      for (int l = 0; l < kLanes; ++l) dd(b);
    if constexpr (!k512) {  // the AVX2 tail's lane masks: 8 set, then 8 clear
      L(masks_);
      for (int l = 0; l < 2 * kLanes; ++l) dd(l < kLanes ? 0xffffffffu : 0u);
    }
  }

 private:
  void slot(int s) {
    if (std::find(slots_.begin(), slots_.end(), s) == slots_.end()) slots_.push_back(s);
  }
  int take() {
    for (int r = 0; r < kRegs; ++r)
      if (!used_[size_t(r)]) {
        used_[size_t(r)] = true;
        return r;
      }
    throw OutOfRegisters{};
  }
  void give(int r) { used_[size_t(r)] = false; }
  // A constant as an operand: its register, or its vector in memory.
  const Xbyak::Operand& cst(uint32_t b) {
    auto it = creg_.find(b);
    if (it != creg_.end()) return it->second;
    return cmem_.at(b);
  }
  const Xbyak::Operand& cst(float v) { return cst(bits(v)); }
  // A constant where an instruction needs a register: its own, or one it is loaded into
  // until drop().
  V creg(float v) {
    auto it = creg_.find(bits(v));
    if (it != creg_.end()) return it->second;
    V t(take());
    scratch_.push_back(t.getIdx());
    vmovups(t, cmem_.at(bits(v)));
    return t;
  }
  void drop() {
    for (int r : scratch_) give(r);
    scratch_.clear();
  }
  Xbyak::Address at(int s) { return ptr[ptr_.at(s) + rsi * 4]; }

  // One vector of every op; `masked`: the tail's lanes only (AVX-512: k1; AVX2: the lane
  // mask of the rax remaining elements, loaded here).
  void body(bool masked) {
    using namespace Xbyak;
    std::unordered_map<int, int> reg;  // slot -> vector register
    int lanes = -1;
    if constexpr (!k512) {
      if (masked) {
        lanes = take();
        lea(r11, ptr[rip + masks_]);
        neg(rax);
        vmovups(V(lanes), ptr[r11 + rax * 4 + kBytes]);
      }
    }
    for (size_t j = 0; j < run_.ops.size(); ++j) {
      const Op& op = run_.ops[j];
      for (int s : op.in)
        if (!reg.count(s)) {  // an input of the run: loaded at its first use
          int z = take();
          if (!masked)
            vmovups(V(z), at(s));
          else if constexpr (k512)
            vmovups(V(z) | k1 | T_z, at(s));
          else
            vmaskmovps(V(z), V(lanes), at(s));
          reg[s] = z;
        }
      std::vector<int> in;
      for (int s : op.in) in.push_back(reg.at(s));
      // The result takes a register before the inputs read for the last time give theirs
      // back, so it is never one of them (the ops below may read an input after writing y).
      const int y = take();
      if (op.in.size() == 1)
        unary(op, V(y), V(in[0]));
      else
        binary(op.name, V(y), V(in[0]), V(in[1]));
      reg[op.out] = y;
      if (store_nt_.count(op.out)) {
        if (!masked && store_nt_.at(op.out))
          vmovntps(at(op.out), V(y));
        else if (!masked)
          vmovups(at(op.out), V(y));
        else if constexpr (k512)
          vmovups(at(op.out) | k1, V(y));
        else
          vmaskmovps(at(op.out), V(lanes), V(y));
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
    if (lanes >= 0) give(lanes);
  }

  void unary(const Op& op, const V& y, const V& x) {
    const std::string_view name = op.name;
    if (name == "neg") {
      if constexpr (k512)
        vpxord(y, x, cst(kSign));
      else
        vxorps(y, x, cst(kSign));
    } else if (name == "abs") {
      if constexpr (k512)
        vpandd(y, x, cst(kAbs));
      else
        vandps(y, x, cst(kAbs));
    } else if (name == "square") {
      vmulps(y, x, x);
    } else if (name == "relu") {  // x < 0 ? 0 : x (NaN and -0 pass)
      if constexpr (k512) {
        vcmpps(k2, x, cst(0.f), kLtOq);
        vblendmps(y | k2, x, cst(0.f));
      } else {  // maxps returns its second operand unless the first is larger
        vxorps(y, y, y);
        vmaxps(y, y, x);
      }
    } else if (name == "sqrt") {  // correctly rounded, as fm::sqrt_n
      vsqrtps(y, x);
    } else if (name == "rsqrt") {  // 1 / sqrt(x), two roundings, as fm::sqrt_n
      vsqrtps(y, x);
      vdivps(y, creg(1.f), y);
      drop();
    } else if (name == "reciprocal") {
      vdivps(y, creg(1.f), x);
      drop();
    } else if (name == "exp") {
      exp(y, x);
    } else if (name == "sigmoid") {
      sigmoid(y, x);
    } else if (name == "erf") {
      erf(y, x);
    } else {  // hard_sigmoid: v = fma(alpha, x, beta); v < 0 ? 0 : (v > 1 ? 1 : v)
      vmovaps(y, cst(op.params[0]));
      vfmadd213ps(y, x, cst(op.params[1]));
      vmaxps(y, creg(0.f), y);  // 0 > v ? 0 : v (NaN kept)
      drop();
      vminps(y, creg(1.f), y);  // 1 < v ? 1 : v
      drop();
    }
  }

  // fm::sigmoid_n's AVX-512 loop (a reciprocal and a Newton step) or fm::sigmoid8 (a
  // division): e = exp(0 - |x|), 1 / (1 + e), e / (1 + e) where x < 0.
  void sigmoid(const V& y, const V& x) {
    const int e = take(), d = take();
    V ze(e), zd(d);
    if constexpr (k512) {
      vpandd(zd, x, cst(kAbs));
      vsubps(zd, creg(0.f), zd);
      drop();
      exp(ze, zd);
      vaddps(zd, creg(1.f), ze);
      drop();
      vrcp14ps(y, zd);
      vfnmadd213ps(zd, y, cst(2.f));  // d = 2 - d r
      vmulps(y, y, zd);
      vcmpps(k2, x, cst(0.f), kLtOq);
      vmulps(y | k2, ze, y);  // x < 0: e r
    } else {
      vandps(zd, x, cst(kAbs));
      vxorps(ze, ze, ze);
      vsubps(zd, ze, zd);  // 0 - |x|, not -|x|: +0 for +-0, as sigmoid8
      exp(ze, zd);
      vaddps(zd, ze, cst(1.f));  // e + 1 (sigmoid8's 1 + e: the same bits)
      vdivps(y, creg(1.f), zd);
      drop();
      vmulps(zd, ze, y);
      vcmpps(ze, x, cst(0.f), kLtOq);
      vblendvps(y, y, zd, ze);  // x < 0: e r
    }
    give(e);
    give(d);
  }

  void binary(std::string_view op, const V& y, const V& a, const V& b) {
    if (op == "add") {
      vaddps(y, a, b);
    } else if (op == "sub") {
      vsubps(y, a, b);
    } else if (op == "mul") {
      vmulps(y, a, b);
    } else if (op == "div") {
      vdivps(y, a, b);
    } else if constexpr (k512) {  // max / min (ewop::Max, ewop::Min)
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
    } else {
      // maxps (minps) gives the larger (smaller) of unequal ordered values and its second
      // operand otherwise, so both orders agree there; of equal values (only +-0 differ)
      // max keeps a sign bit both have (a & b), min one either has (a | b); unordered: a + b.
      const int t = take(), s = take();
      if (op == "max") {
        vmaxps(y, a, b);
        vmaxps(V(t), b, a);
        vandps(y, y, V(t));
      } else {
        vminps(y, a, b);
        vminps(V(t), b, a);
        vorps(y, y, V(t));
      }
      vcmpps(V(t), a, b, kUnordQ);
      vaddps(V(s), a, b);
      vblendvps(y, y, V(s), V(t));
      give(t);
      give(s);
    }
  }

  // fm::erf as g++ vectorises it: c = x clamped to [-4, 4] (NaN kept), s = c^2, the two
  // polynomials in s, c (p / q) clamped to [-1, 1].
  void erf(const V& y, const V& x) {
    const int ic = take(), is = take(), iq = take();
    V c(ic), s(is), q(iq);
    vmovaps(c, cst(4.f));
    vminps(c, c, x);  // 4 < x ? 4 : x
    vmovaps(s, cst(-4.f));
    vmaxps(c, s, c);  // -4 > c ? -4 : c
    vmulps(s, c, c);
    vmovaps(y, cst(fm::kErfP[0]));
    for (size_t k = 1; k < std::size(fm::kErfP); ++k) vfmadd213ps(y, s, cst(fm::kErfP[k]));
    vmovaps(q, cst(fm::kErfQ[0]));
    for (size_t k = 1; k < std::size(fm::kErfQ); ++k) vfmadd213ps(q, s, cst(fm::kErfQ[k]));
    vdivps(y, y, q);
    vmulps(y, c, y);
    vminps(y, creg(1.f), y);  // 1 < r ? 1 : r
    drop();
    vmaxps(y, creg(-1.f), y);  // -1 > r ? -1 : r
    drop();
    give(ic);
    give(is);
    give(iq);
  }

  // fm::exp16 / fm::exp8: clamp (NaN kept), n = round(x / ln 2), Cody-Waite r, the cephes
  // polynomial, then 2^n: scalef (AVX-512) or two factors built in the exponent field
  // (AVX2). y may not be x.
  void exp(const V& y, const V& x) {
    const int iv = take(), in = take(), ir = take();
    V v(iv), nf(in), r(ir);
    if constexpr (k512) {
      vmovaps(v, x);
      vcmpps(k2, v, cst(kHi), kGtOq);
      vmovaps(v | k2, cst(kHi));
      vcmpps(k2, v, cst(kLo), kLtOq);
      vmovaps(v | k2, cst(kLo));
    } else {  // hi < x ? hi : x, then lo > v ? lo : v: exp8's ordered blends
      vmovaps(v, cst(kHi));
      vminps(v, v, x);
      vmovaps(nf, cst(kLo));
      vmaxps(v, nf, v);
    }
    vmulps(nf, v, cst(kLog2e));
    if constexpr (k512)
      vrndscaleps(nf, nf, 0x08);  // to nearest, no exceptions
    else
      vroundps(nf, nf, 0x08);
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
    if constexpr (k512) {
      vscalefps(y, y, nf);
    } else {  // y 2^n1 2^n2 with n1 = n >> 1, n2 = n - n1 (NaN: n is an integer that keeps it)
      vcvtps2dq(nf, nf);
      vpsrad(v, nf, 1);
      vpsubd(r, nf, v);
      vpaddd(v, v, cst(kBias));
      vpslld(v, v, 23);
      vpaddd(r, r, cst(kBias));
      vpslld(r, r, 23);
      vmulps(y, y, v);
      vmulps(y, y, r);
    }
    give(iv);
    give(in);
    give(ir);
  }

  const Run& run_;
  std::vector<int> slots_;
  std::map<uint32_t, V> creg_;               // constant bits -> its register
  std::map<uint32_t, Xbyak::Address> cmem_;  // constant bits -> its vector in memory
  std::vector<int> scratch_;                 // registers creg() loaded constants into
  Xbyak::Label consts_, masks_;
  std::unordered_map<int, int> last_;
  std::unordered_map<int, bool> store_nt_;  // written slots -> streaming
  std::unordered_map<int, Xbyak::Reg64> ptr_;
  std::vector<Xbyak::Reg64> saved_;
  std::array<bool, 32> used_{};
};

}  // namespace

bool supports(std::string_view name) { return info(name) != nullptr; }

std::vector<std::string_view> attributes(std::string_view name) {
  const OpInfo* i = info(name);
  if (!i) return {};
  return {i->attrs.begin(), i->attrs.begin() + i->params()};
}

namespace {

template <class V>
Code generate(const Run& run, const std::vector<bool>& stream_outputs) {
  // Constants in registers first, then in memory; room for the code: a few hundred bytes
  // an op (two copies of the body), and a larger buffer once if that was short.
  for (bool in_memory : {false, true}) {
    for (size_t bytes = 4096 + 1024 * run.ops.size(), tries = 0; tries < 2; ++tries, bytes *= 4) {
      try {
        auto plain = std::make_shared<Gen<V> >(run, stream_outputs, false, in_memory, bytes);
        auto stream = std::make_shared<Gen<V> >(run, stream_outputs, true, in_memory, bytes);
        for (Gen<V>* g : {plain.get(), stream.get()}) {
          g->ready();             // every label bound
          g->setProtectModeRE();  // written once, then only read and executed
        }
        Code c;
        c.plain = plain->template getCode<RunFn>();
        c.stream = stream->template getCode<RunFn>();
        c.holder =
            std::make_shared<std::pair<std::shared_ptr<Gen<V> >, std::shared_ptr<Gen<V> > > >(
                plain, stream);
        return c;
      } catch (const OutOfRegisters&) {
        break;
      } catch (const Xbyak::Error&) {  // the buffer was short: once more, larger
      }
    }
  }
  return Code{};
}

// What the code depends on: the level, the ops, their slots and attributes, the written
// slots and which stream.
std::string key_of(Isa level, const Run& run, const std::vector<bool>& stream_outputs) {
  std::string k = level == Isa::avx512 ? "512|" : "2|";
  auto num = [&](int v) { k += std::to_string(v) + ','; };
  for (const Op& op : run.ops) {
    k.append(op.name);
    k += ':';
    num(op.out);
    for (int v : op.in) num(v);
    for (float p : op.params) num(int(bits(p)));
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
  const Isa level = isa();
  if (level == Isa::none || run.ops.empty() || stream_outputs.size() != run.outputs.size())
    return {};
  for (const Op& op : run.ops) {
    const OpInfo* i = info(op.name);
    if (!i || op.in.size() != (i->kind == Kind::unary ? 1u : 2u) || op.params.size() != i->params())
      return {};
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
  const std::string key = key_of(level, run, stream_outputs);
  std::lock_guard lock(mu);
  auto it = cache.find(key);
  if (it != cache.end())
    if (std::shared_ptr<const void> held = it->second.holder.lock())
      return {it->second.plain, it->second.stream, std::move(held)};
  Code c = level == Isa::avx512 ? generate<Xbyak::Zmm>(run, stream_outputs)
                                : generate<Xbyak::Ymm>(run, stream_outputs);
  if (c.plain) {
    if (cache.size() > 4096)
      std::erase_if(cache, [](const auto& e) { return e.second.holder.expired(); });
    cache[key] = {c.plain, c.stream, c.holder};
  }
  return c;
}

#endif

}  // namespace rlx::cpu::jit
