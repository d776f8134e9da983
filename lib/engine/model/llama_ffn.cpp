// The feed-forward block: a dense SwiGLU, or a mixture of experts (moe_ffn.hpp).
#include <algorithm>

#include "engine/kernels/kernels.hpp"
#include "engine/model/llama_impl.hpp"
#include "engine/runtime/thread_pool.hpp"

namespace epyctune::engine {

// x += w_down (silu(w_gate xn) * (w_up xn)), xn = rmsnorm(x): SwiGLU, or the
// experts' weighted sum of it.
void LlamaModel::ffn_block(int il, int B) {
  Impl& s = *impl_;
  const auto& c = cfg_;
  const auto& L = s.w.layers[il];
  const int dim = c.dim, ffn = c.ffn_dim;
  for (int t = 0; t < B; ++t)
    kernels::rmsnorm(&s.xn[size_t(t) * dim], &s.x[size_t(t) * dim], L.ffn_norm.data(), dim,
                     c.norm_eps);
  if (L.ffn_kind == FfnKind::moe) {
    s.moe.forward(L.moe, s.moe_shape, s.xn.data(), B, s.ffn_out.data(), *pool_);
    if (L.moe.gate_shexp.rows > 0) shared_experts(il, B);
    for (int t = 0; t < B; ++t)
      kernels::add(&s.x[size_t(t) * dim], &s.ffn_out[size_t(t) * dim], dim);
    return;
  }
  detail::prepare_acts(*pool_, L.w_gate.type, s.xn.data(), B, dim, s.acts_a);
  const kernels::Acts* au = &s.acts_a;
  if (L.w_up.type != L.w_gate.type) {
    detail::prepare_acts(*pool_, L.w_up.type, s.xn.data(), B, dim, s.acts_b);
    au = &s.acts_b;
  }
  detail::run_matmuls(
      *pool_, {{&L.w_gate, &s.acts_a, s.gate.data(), ffn}, {&L.w_up, au, s.up.data(), ffn}});
  {
    // An exp per element: worth spreading over the pool. Pieces of a token
    // row start at multiples of 64, and the op is elementwise, so the split
    // changes no result.
    const int64_t piece = std::max<int64_t>(64, (ffn / (2 * pool_->size()) + 63) / 64 * 64);
    const int64_t per_row = (ffn + piece - 1) / piece;
    pool_->parallel_for(B * per_row, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t item = b; item < e; ++item) {
        const int64_t from = item % per_row * piece;  // within the token's row
        const size_t at = size_t(item / per_row) * ffn + size_t(from);
        kernels::silu_mul(&s.gate[at], &s.up[at], std::min<int64_t>(piece, ffn - from));
      }
    });
  }
  detail::prepare_acts(*pool_, L.w_down.type, s.gate.data(), B, ffn, s.acts_a);
  detail::run_matmuls(*pool_, {{&L.w_down, &s.acts_a, s.ffn_out.data(), dim}});
  for (int t = 0; t < B; ++t) kernels::add(&s.x[size_t(t) * dim], &s.ffn_out[size_t(t) * dim], dim);
}

}  // namespace epyctune::engine
