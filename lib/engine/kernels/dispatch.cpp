// Run-time ISA selection (cpuid + xgetbv) and the matmul dispatch. The
// default ISA is the best the CPU supports; EPYCTUNE_KERNEL_ISA (scalar, avx2,
// avx512, avx512vnni) or set_isa() lowers it, which tests use to compare ISAs.
#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/kernels/blocks.hpp"
#include "engine/kernels/convert_matmul.hpp"
#include "engine/kernels/kernel_table.hpp"

namespace epyctune::engine::kernels {

namespace detail {
bool g_stream_nta = default_stream_hint() == StreamHint::nta;
}  // namespace detail

namespace {

using detail::MatmulTable;

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

Isa detect() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::scalar;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12),
             f16c = c & (1u << 29);
  if (!osxsave || !avx || !fma || !f16c) return Isa::scalar;
  const uint64_t xcr0 = xgetbv0();
  if ((xcr0 & 0x6) != 0x6) return Isa::scalar;  // OS saves SSE + AVX state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::scalar;
  if (!(b & (1u << 5))) return Isa::scalar;  // AVX2
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) &&
                      (b & (1u << 17)) && (xcr0 & 0xe6) == 0xe6;  // F, BW, VL, DQ + ZMM state
  if (!avx512) return Isa::avx2;
  return (c & (1u << 11)) ? Isa::avx512vnni : Isa::avx512;
}

Isa parse_isa(std::string_view s, bool& ok) {
  ok = true;
  if (s == "scalar") return Isa::scalar;
  if (s == "avx2") return Isa::avx2;
  if (s == "avx512") return Isa::avx512;
  if (s == "avx512vnni") return Isa::avx512vnni;
  ok = false;
  return Isa::scalar;
}

Isa initial_isa() {
  const Isa best = best_isa();
  if (const char* env = std::getenv("EPYCTUNE_KERNEL_ISA")) {
    bool ok = false;
    const Isa want = parse_isa(env, ok);
    if (ok && static_cast<int>(want) <= static_cast<int>(best)) return want;
  }
  return best;
}

std::atomic<int>& active() {
  static std::atomic<int> a{static_cast<int>(initial_isa())};
  return a;
}

// Tables per ISA; a null entry falls back to the next lower ISA's kernel
// (identical results by construction).
struct Tables {
  MatmulTable t[4];
  Tables() {
    detail::fill_scalar_table(t[0]);
    t[1] = t[0];
    detail::fill_avx2_table_qx_0(t[1]);
    detail::fill_avx2_table_q6_k(t[1]);
    detail::fill_avx2_table_q4_k(t[1]);
    detail::fill_avx2_table_float(t[1]);
    t[2] = t[1];
    detail::fill_avx512_table_qx_0(t[2]);
    detail::fill_avx512_table_q4_k(t[2]);
    detail::fill_avx512_table_float(t[2]);
    detail::fill_avx512_table_packed(t[2]);
    t[3] = t[2];
    detail::fill_avx512vnni_table_qx_0(t[3]);
    detail::fill_avx512vnni_table_q4_k(t[3]);
    detail::fill_avx512vnni_table_packed(t[3]);
    for (int i = 1; i < 4; ++i) {
      MatmulTable& c = t[i];
      const MatmulTable& p = t[i - 1];
      for (auto [cur, prev] : {std::pair{&c.f32, &p.f32},
                               {&c.f16, &p.f16},
                               {&c.bf16, &p.bf16},
                               {&c.q4_0, &p.q4_0},
                               {&c.q8_0, &p.q8_0},
                               {&c.q4_k, &p.q4_k},
                               {&c.q6_k, &p.q6_k},
                               {&c.q4_0_p16, &p.q4_0_p16},
                               {&c.q8_0_p16, &p.q8_0_p16},
                               {&c.q4_k_p16, &p.q4_k_p16}}) {
        if (*cur == nullptr) *cur = *prev;
      }
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
    case Isa::avx512vnni:
      return "avx512vnni";
  }
  return "unknown";
}

Isa best_isa() {
  static const Isa best = detect();
  return best;
}

const char* stream_hint_name(StreamHint h) {
  return h == StreamHint::nta ? "nta" : "t0";
}

StreamHint default_stream_hint() {
  uint32_t a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return StreamHint::t0;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return std::string_view(vendor) == "AuthenticAMD" ? StreamHint::nta : StreamHint::t0;
}

StreamHint stream_hint() {
  return detail::g_stream_nta ? StreamHint::nta : StreamHint::t0;
}

// Kernels read it while they run: set it between matmuls, as set_isa.
void set_stream_hint(StreamHint h) {
  detail::g_stream_nta = h == StreamHint::nta;
}

Isa active_isa() {
  return static_cast<Isa>(active().load(std::memory_order_relaxed));
}

void set_isa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(best_isa())) {
    throw std::runtime_error(std::string("set_isa: this CPU does not support ") + isa_name(isa) +
                             " (best: " + isa_name(best_isa()) + ")");
  }
  active().store(static_cast<int>(isa), std::memory_order_relaxed);
}

namespace {

detail::MatmulFn pick(const MatmulTable& t, GgmlType wtype, WeightLayout layout) {
  if (layout == WeightLayout::packed16) {
    if (wtype == GgmlType::Q4_0) return t.q4_0_p16;
    if (wtype == GgmlType::Q8_0) return t.q8_0_p16;
    if (wtype == GgmlType::Q4_K) return t.q4_k_p16;
    return nullptr;
  }
  switch (wtype) {
    case GgmlType::F32:
      return t.f32;
    case GgmlType::F16:
      return t.f16;
    case GgmlType::BF16:
      return t.bf16;
    case GgmlType::Q4_0:
      return t.q4_0;
    case GgmlType::Q8_0:
      return t.q8_0;
    case GgmlType::Q4_K:
      return t.q4_k;
    case GgmlType::Q6_K:
      return t.q6_k;
    default:  // Q8_K; the rewritten types (matmul_converted)
      break;
  }
  return nullptr;
}

// Packed rows on an ISA without a packed kernel: unpack 16 rows (a panel)
// at a time into a scratch copy and run the ggml-layout kernel on it.
void matmul_unpacking(detail::MatmulFn fn, GgmlType wtype, const uint8_t* w, size_t row_bytes,
                      const Acts& acts, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  constexpr int64_t kRows = detail::kPanelRows;
  for (int64_t r = r0; r < r1; r += kRows) {
    const int64_t n = std::min(kRows, r1 - r);
    fn(detail::unpacked_copy(wtype, w + static_cast<size_t>(r) * row_bytes, row_bytes, n, acts.k),
       row_bytes, acts, y + r, ldy, 0, n);
  }
}

}  // namespace

bool packed_layout_pays(GgmlType t) {
  return has_packed_layout(t) &&
         pick(tables().t[static_cast<int>(active_isa())], t, WeightLayout::packed16) != nullptr;
}

void matmul_rows(GgmlType wtype, WeightLayout layout, const void* w, size_t w_row_bytes,
                 const Acts& acts, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (acts.weight_type != wtype) {
    throw std::invalid_argument("matmul_rows: activations were prepared for type " +
                                std::to_string(static_cast<uint32_t>(acts.weight_type)) +
                                ", weights are type " +
                                std::to_string(static_cast<uint32_t>(wtype)));
  }
  if (layout == WeightLayout::packed16 && !has_packed_layout(wtype)) {
    throw std::invalid_argument("matmul_rows: weight type " +
                                std::to_string(static_cast<uint32_t>(wtype)) +
                                " has no packed16 layout");
  }
  if (r1 <= r0 || acts.n_tokens == 0) return;
  if (layout == WeightLayout::packed16 && r0 % detail::kPanelRows != 0) {
    throw std::invalid_argument("matmul_rows: packed16 rows are 16-row panels; row " +
                                std::to_string(r0) + " does not start one");
  }
  const MatmulTable& t = tables().t[static_cast<int>(active_isa())];
  const auto* wb = static_cast<const uint8_t*>(w);
  if (detail::is_converted_type(wtype))
    return detail::matmul_converted(wtype, {t.q8_0, t.q4_k}, wb, w_row_bytes, acts, y, ldy, r0, r1);
  if (detail::MatmulFn fn = pick(t, wtype, layout))
    return fn(wb, w_row_bytes, acts, y, ldy, r0, r1);
  detail::MatmulFn fn = pick(t, wtype, WeightLayout::ggml);
  if (fn == nullptr) {
    throw std::invalid_argument("matmul_rows: no kernel for weight type " +
                                std::to_string(static_cast<uint32_t>(wtype)));
  }
  if (layout == WeightLayout::packed16)
    return matmul_unpacking(fn, wtype, wb, w_row_bytes, acts, y, ldy, r0, r1);
  fn(wb, w_row_bytes, acts, y, ldy, r0, r1);
}

void matmul_rows(GgmlType wtype, const void* w, size_t w_row_bytes, const Acts& acts, float* y,
                 int64_t ldy, int64_t r0, int64_t r1) {
  matmul_rows(wtype, WeightLayout::ggml, w, w_row_bytes, acts, y, ldy, r0, r1);
}

}  // namespace epyctune::engine::kernels
