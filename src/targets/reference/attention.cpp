// Attention on the reference target: decode over a KV cache (contiguous or paged, MHA, GQA, MLA,
// DeepSeek's sparse MLA), the paged cache gathered into a per-request one, packed and paged prefill
// (FP8 operands dequantised first, the paged one appending to its cache), and the forward and
// backward over whole sequences; one float32 softmax(q k^T) v per head. The oracle for kernels to
// come, and what serves CUDA until one of them is verified.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/exp2.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/where.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "targets/builtin.h"
#include "targets/reference/attention.h"
#include "targets/reference/reference.h"
#include "targets/reference/position.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace mha = tileops::ops::attention_multi_head_attention_decode_with_kv_cache_fwd;
namespace mha_paged = tileops::ops::attention_multi_head_attention_decode_paged_with_kv_cache_fwd;
namespace gqa = tileops::ops::attention_grouped_query_attention_decode_with_kv_cache_fwd;
namespace gqa_paged = tileops::ops::attention_grouped_query_attention_decode_paged_with_kv_cache_fwd;
namespace mla = tileops::ops::attention_multi_head_latent_attention_decode_with_kv_cache_fwd;
namespace mha_fwd = tileops::ops::attention_multi_head_attention_fwd;
namespace mha_bwd = tileops::ops::attention_multi_head_attention_bwd;
namespace gqa_bwd = tileops::ops::attention_grouped_query_attention_bwd;
namespace gqa_window = tileops::ops::attention_grouped_query_attention_sliding_window_varlen_fwd;
namespace gqa_fwd = tileops::ops::attention_grouped_query_attention_fwd;
namespace gqa_window_fwd = tileops::ops::attention_grouped_query_attention_sliding_window_fwd;
namespace gqa_prefill = tileops::ops::attention_grouped_query_attention_prefill_fwd;
namespace gqa_prefill_paged = tileops::ops::attention_grouped_query_attention_prefill_paged_with_kv_cache_fwd;
namespace dsa_decode = tileops::ops::attention_deep_seek_sparse_attention_decode_with_kv_cache_fwd;

struct Scores {
  double scale;
  std::optional<double> softcap;
};

// q [B, S_q, H, Dk], k [B, N, H_kv, Dk], v [B, N, H_kv, Dv] (any dtype), `valid` [B, S_q, N] bool or
// undefined (every token): softmax(q k^T * scale) v per head in float32, [B, S_q, H, Dv]. Query head h
// reads KV head h // (H / H_kv); a query with no valid token gets zeros.
// [B, S, heads, D] of any dtype as float32 [B, H, S, D], each of its heads repeated for the H / heads
// query heads that read it (query head h reads head h // (H / heads)).
at::Tensor per_query_head(const at::Tensor& t, int64_t query_heads) {
  const at::Tensor f = t.to(at::kFloat).permute({0, 2, 1, 3});
  return t.size(2) == query_heads ? f : f.repeat_interleave(query_heads / t.size(2), 1);
}

at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Scores& sc,
                  const at::Tensor& valid) {
  const int64_t heads = q.size(2);
  const at::Tensor qf = per_query_head(q, heads);  // [B, H, S_q, Dk]
  const at::Tensor kf = per_query_head(k, heads), vf = per_query_head(v, heads);
  at::Tensor s = at::matmul(qf, kf.transpose(2, 3)).mul_(sc.scale);  // [B, H, S_q, N]
  if (sc.softcap) s = at::tanh(s / *sc.softcap).mul_(*sc.softcap);
  at::Tensor p;
  if (valid.defined()) {
    const at::Tensor keep = valid.unsqueeze(1);  // [B, 1, S_q, N]
    s.masked_fill_(keep.logical_not(), -INFINITY);
    // A row with nothing to attend is all -inf: softmax gives NaN there, zeros wanted.
    p = at::where(keep, at::softmax(s, -1), 0.0);
  } else {
    p = at::softmax(s, -1);
  }
  return at::matmul(p, vf).permute({0, 2, 1, 3});  // [B, S_q, H, Dv]
}

double default_scale(std::optional<double> sm_scale, int64_t head_dim) {
  return sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

// The paged cache of each request as a contiguous one: pool [N_kv, H_kv, D] -> [B, num_pages *
// page_size, H_kv, D], logical token j at row block_table[b, j / page_size] * page_size + j % page_size.
// Entries past a request's length are never read (they may hold -1), so they gather row 0 and are
// masked by `valid_tokens`. Lengths and the pages they read are data: checked here, by name.
struct Paged {
  at::Tensor rows;    // [B, num_pages * page_size] int64
  at::Tensor length;  // [B] int64
};

Paged page_rows(const char* op, const at::Tensor& real_seqlen_kv, const at::Tensor& block_table, int64_t page_size,
                int64_t pool_rows) {
  const int64_t pages = block_table.size(1), pool_pages = pool_rows / page_size;
  const at::Tensor length = real_seqlen_kv.to(at::kLong);
  const at::Tensor table = block_table.to(at::kLong);
  const at::Tensor j = at::arange(pages * page_size, table.options());
  const at::Tensor read = j.unsqueeze(0) < length.unsqueeze(1);  // [B, L]
  const at::Tensor page = table.index_select(1, j.div(page_size, "floor"));
  if (length.numel() > 0) {
    refuse_host_read_during_capture(op, "real_seqlen_kv", length);
    const int64_t lo = length.min().item<int64_t>(), hi = length.max().item<int64_t>();
    TORCH_CHECK_VALUE(lo >= 0 && hi <= pages * page_size, op, ": 'real_seqlen_kv' must lie in [0, num_pages * page_size] = [0, ",
                      pages * page_size, "] (block_table has ", pages, " pages of page_size ", page_size, "), got ",
                      lo < 0 ? lo : hi);
    const at::Tensor bad = read & ((page < 0) | (page >= pool_pages));
    if (bad.any().item<bool>()) {
      const int64_t first = bad.flatten().nonzero().select(0, 0).item<int64_t>();
      const int64_t b = first / (pages * page_size), e = first % (pages * page_size) / page_size;
      TORCH_CHECK_VALUE(false, op, ": 'block_table' entries a request reads must be pages of k and v, in [0, N_kv / page_size) = [0, ",
                        pool_pages, "); block_table[", b, ", ", e, "] is ", table.select(0, b).select(0, e).item<int64_t>(),
                        " and real_seqlen_kv[", b, "] = ", length.select(0, b).item<int64_t>(), " reads it");
    }
  }
  const at::Tensor rows = at::where(read, page * page_size + j.remainder(page_size), 0);
  return {rows, length};
}

// [N_kv, H_kv, D] pool rows gathered per request: [B, L, H_kv, D].
at::Tensor gather(const at::Tensor& pool, const at::Tensor& rows) {
  return pool.index_select(0, rows.flatten()).reshape({rows.size(0), rows.size(1), pool.size(1), pool.size(2)});
}

// [B, S_q, L] bool: token j is read by query i when j < length, and, causally, j <= length - S_q + i.
at::Tensor valid_tokens(const at::Tensor& length, int64_t queries, int64_t tokens, bool causal) {
  const at::Tensor j = at::arange(tokens, length.options()).view({1, 1, tokens});
  const at::Tensor len = length.view({-1, 1, 1});
  at::Tensor valid = (j < len).expand({length.size(0), queries, tokens});
  if (causal) {
    const at::Tensor i = at::arange(queries, length.options()).view({1, queries, 1});
    valid = valid & (j <= len - queries + i);
  }
  return valid;
}

class MhaDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const mha::View v(call);
    at::Tensor o = v.o();
    o.copy_(attend(v.q(), v.k(), v.v(), {default_scale(std::nullopt, v.q().size(3)), std::nullopt}, {}));
  }
};

class MhaDecodePagedReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const mha_paged::View v(call);
    const Paged paged = page_rows(call.op_name, v.real_seqlen_kv(), v.block_table(), v.page_size(), v.k().size(0));
    const at::Tensor valid = valid_tokens(paged.length, v.q().size(1), paged.rows.size(1), v.is_causal());
    at::Tensor o = v.o();
    o.copy_(attend(v.q(), gather(v.k(), paged.rows), gather(v.v(), paged.rows),
                   {default_scale(std::nullopt, v.q().size(3)), std::nullopt}, valid));
  }
};

class GqaDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gqa::View v(call);
    at::Tensor o = v.o();
    o.copy_(attend(v.q().unsqueeze(1), v.k(), v.v(), {default_scale(v.sm_scale(), v.q().size(2)), v.softcap()}, {})
                .squeeze(1));
  }
};

class GqaDecodePagedReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gqa_paged::View v(call);
    const Paged paged = page_rows(call.op_name, v.real_seqlen_kv(), v.block_table(), v.page_size(), v.k().size(0));
    const at::Tensor valid = valid_tokens(paged.length, 1, paged.rows.size(1), false);
    at::Tensor o = v.o();
    o.copy_(attend(v.q().unsqueeze(1), gather(v.k(), paged.rows), gather(v.v(), paged.rows),
                   {default_scale(v.sm_scale(), v.q().size(2)), v.softcap()}, valid)
                .squeeze(1));
  }
};

class MlaDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override { mla_decode_aten(call); }
};

// [S, S] bool, token i attends j <= i: a causal mask broadcast over batch and heads, or undefined.
at::Tensor causal_mask(int64_t tokens, bool causal, const at::Tensor& like) {
  if (!causal) return {};
  return at::ones({tokens, tokens}, like.options().dtype(at::kBool)).tril();
}

// Whole-sequence attention, [B, S, H | H_kv, D], scale 1 / sqrt(D), into o.
void attention_fwd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, at::Tensor o) {
  const at::Tensor mask = causal_mask(q.size(1), causal, q);
  o.copy_(attend(q, k, v, {default_scale(std::nullopt, q.size(3)), std::nullopt},
                 mask.defined() ? mask.unsqueeze(0) : mask));
}

class MhaFwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const mha_fwd::View v(call);
    attention_fwd(v.q(), v.k(), v.v(), v.is_causal(), v.o());
  }
};

class GqaFwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gqa_fwd::View v(call);
    attention_fwd(v.q(), v.k(), v.v(), v.is_causal(), v.o());
  }
};

// [S_q, S_k] bool: query i (at key position i + offset) attends key j under causality and a window
// of left / right keys (-1: that side open).
at::Tensor window_mask(int64_t queries, int64_t keys, int64_t offset, bool causal, int64_t left, int64_t right,
                       const at::Tensor& like) {
  const at::Tensor pos = at::arange(queries, like.options().dtype(at::kLong)).add_(offset).unsqueeze(1);
  const at::Tensor j = at::arange(keys, pos.options()).unsqueeze(0);
  at::Tensor valid = (j < keys).expand({queries, keys});
  if (causal) valid = valid & (j <= pos);
  if (left >= 0) valid = valid & (j >= pos - left);
  if (right >= 0) valid = valid & (j <= pos + right);
  return valid;
}

class GqaSlidingWindowReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gqa_window_fwd::View v(call);
    const int64_t tokens = v.q().size(1);
    const at::Tensor valid =
        window_mask(tokens, tokens, 0, v.is_causal(), v.window_size_left(), v.window_size_right(), v.q());
    at::Tensor o = v.o();
    o.copy_(attend(v.q(), v.k(), v.v(), {default_scale(std::nullopt, v.q().size(3)), std::nullopt},
                   valid.unsqueeze(0)));
  }
};

// The gradients of attention from the forward's o and base-2 log-sum-exp (flash-attn's backward,
// in float32): P from the scores and lse, dV = P^T dO, dS = P (dO V^T - rowsum(dO o)),
// dQ = dS K scale, dK = dS^T Q scale; a KV head's dK, dV sum its query heads'.
void attention_bwd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& o,
                   const at::Tensor& dout, const at::Tensor& lse, bool causal, at::Tensor dq, at::Tensor dk,
                   at::Tensor dv) {
  const int64_t batch = q.size(0), tokens = q.size(1), heads = q.size(2), kv_heads = k.size(2), dim = q.size(3);
  const int64_t group = heads / kv_heads;
  const double scale = default_scale(std::nullopt, dim);
  const at::Tensor qf = per_query_head(q, heads), of = per_query_head(o, heads), dof = per_query_head(dout, heads);
  const at::Tensor kf = per_query_head(k, heads), vf = per_query_head(v, heads);
  at::Tensor s = at::matmul(qf, kf.transpose(2, 3)).mul_(scale * M_LOG2E);  // [B, H, S, S], base 2
  if (causal) s.masked_fill_(causal_mask(tokens, true, q).logical_not(), -INFINITY);
  const at::Tensor p = at::exp2(s - lse.unsqueeze(-1));
  const at::Tensor delta = (dof * of).sum(-1, true);
  const at::Tensor ds = p * (at::matmul(dof, vf.transpose(2, 3)) - delta);
  at::Tensor dkf = at::matmul(ds.transpose(2, 3), qf).mul_(scale);
  at::Tensor dvf = at::matmul(p.transpose(2, 3), dof);
  if (group != 1) {
    dkf = dkf.view({batch, kv_heads, group, tokens, dim}).sum(2);
    dvf = dvf.view({batch, kv_heads, group, tokens, dim}).sum(2);
  }
  dq.copy_(at::matmul(ds, kf).mul_(scale).permute({0, 2, 1, 3}));
  dk.copy_(dkf.permute({0, 2, 1, 3}));
  dv.copy_(dvf.permute({0, 2, 1, 3}));
}

class MhaBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const mha_bwd::View v(call);
    attention_bwd(v.q(), v.k(), v.v(), v.o(), v.dout(), v.lse(), v.is_causal(), v.dq(), v.dk(), v.dv());
  }
};

class GqaBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gqa_bwd::View v(call);
    attention_bwd(v.q(), v.k(), v.v(), v.o(), v.dout(), v.lse(), v.is_causal(), v.dq(), v.dk(), v.dv());
  }
};

// Request offsets of a packed batch, read on the host and checked: 0 first, never decreasing, the
// packed length last.
std::vector<int64_t> offsets(const char* op, const char* name, const at::Tensor& cu, int64_t total) {
  const std::vector<int64_t> out = host_values(op, name, cu);
  TORCH_CHECK_VALUE(out.front() == 0, op, ": '", name, "' must start at 0, got ", out.front());
  for (size_t i = 1; i < out.size(); ++i)
    TORCH_CHECK_VALUE(out[i] >= out[i - 1], op, ": '", name, "' must never decrease, got ", out[i - 1], " then ",
                      out[i], " at ", i);
  TORCH_CHECK_VALUE(out.back() == total, op, ": '", name, "' must end at the packed length ", total, ", got ",
                    out.back());
  return out;
}

// A [B, H_kv] float32 scale of a packed operand, request b's row as [1, 1, heads, 1] for that request's
// [1, len, heads, D] slice (column g repeated for the heads h with h // (heads / H_kv) == g), or undefined
// when the scale is absent (1).
at::Tensor request_scale(const at::Tensor* scale, int64_t b, int64_t heads) {
  if (scale == nullptr) return {};
  at::Tensor row = scale->select(0, b);
  if (row.size(0) != heads) row = row.repeat_interleave(heads / row.size(0));
  return row.view({1, 1, heads, 1});
}

// x in float32, times its scale when there is one (an FP8 operand's dequantisation).
at::Tensor scaled(const at::Tensor& x, const at::Tensor& scale) {
  const at::Tensor f = x.to(at::kFloat);
  return scale.defined() ? f * scale : f;
}

// Attention over packed requests ([total, heads, D] rows cu[b] .. cu[b + 1]) into o: query i of request b
// at key position i + len_k - len_q, causal and windowed as window_mask says; operands dequantised by
// their optional [B, H_kv] scales. The offsets are read on the host and checked, by name.
struct Packed {
  const at::Tensor *q_scale = nullptr, *k_scale = nullptr, *v_scale = nullptr;
  std::optional<int64_t> max_seqlen_kv;  // checked when given
};

void packed_attention(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& cu_seqlens_q, const at::Tensor& cu_seqlens_k, const char* k_name,
                      int64_t max_seqlen_q, bool causal, int64_t left, int64_t right, const Scores& sc,
                      const Packed& packed, at::Tensor o) {
  const auto cu_q = offsets(op, "cu_seqlens_q", cu_seqlens_q, q.size(0));
  const auto cu_k = offsets(op, k_name, cu_seqlens_k, k.size(0));
  TORCH_CHECK_VALUE(cu_q.size() == cu_k.size(), op, ": 'cu_seqlens_q' and '", k_name, "' must have one size, got ",
                    cu_q.size(), " and ", cu_k.size());
  for (size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const int64_t len_q = cu_q[b + 1] - cu_q[b], len_k = cu_k[b + 1] - cu_k[b];
    TORCH_CHECK_VALUE(len_q <= max_seqlen_q, op, ": request ", b, " has ", len_q, " queries, more than max_seqlen_q = ",
                      max_seqlen_q);
    TORCH_CHECK_VALUE(!packed.max_seqlen_kv || len_k <= *packed.max_seqlen_kv, op, ": request ", b, " has ", len_k,
                      " keys, more than max_seqlen_kv = ", packed.max_seqlen_kv.value_or(0));
    if (len_q == 0) continue;
    const at::Tensor valid = window_mask(len_q, len_k, len_k - len_q, causal, left, right, q);
    const int64_t i = static_cast<int64_t>(b);
    const at::Tensor qb = scaled(q.narrow(0, cu_q[b], len_q).unsqueeze(0), request_scale(packed.q_scale, i, q.size(1)));
    const at::Tensor kb = scaled(k.narrow(0, cu_k[b], len_k).unsqueeze(0), request_scale(packed.k_scale, i, k.size(1)));
    const at::Tensor vb = scaled(v.narrow(0, cu_k[b], len_k).unsqueeze(0), request_scale(packed.v_scale, i, v.size(1)));
    o.narrow(0, cu_q[b], len_q).copy_(attend(qb, kb, vb, sc, valid.unsqueeze(0)).squeeze(0));
  }
}

class GqaSlidingWindowVarlenReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gqa_window::View v(call);
    packed_attention(call.op_name, v.q(), v.k(), v.v(), v.cu_seqlens_q(), v.cu_seqlens_k(), "cu_seqlens_k",
                     v.max_seqlen_q(), v.is_causal(), v.window_size_left(), v.window_size_right(),
                     {default_scale(std::nullopt, v.q().size(2)), std::nullopt}, {}, v.o());
  }
};

class GqaPrefillReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gqa_prefill::View v(call);
    packed_attention(call.op_name, v.q(), v.k(), v.v(), v.cu_seqlens_q(), v.cu_seqlens_kv(), "cu_seqlens_kv",
                     v.max_seqlen_q(), v.is_causal(), v.window_size_left(), v.window_size_right(),
                     {default_scale(v.sm_scale(), v.q().size(2)), v.softcap()},
                     {v.q_scale(), v.k_scale(), v.v_scale(), v.max_seqlen_kv()}, v.o());
  }
};

// Host int64 values as a tensor on `like`'s device (a copy: the vector may go).
at::Tensor long_tensor(const std::vector<int64_t>& values, const at::Tensor& like) {
  return at::from_blob(const_cast<int64_t*>(values.data()), {static_cast<int64_t>(values.size())},
                       at::TensorOptions().dtype(at::kLong))
      .clone()
      .to(like.device());
}

// A per-tensor cache scale [1] read on the host: 1 when absent, else finite and positive (refused by name).
double cache_scale(const char* op, const char* name, const at::Tensor* t) {
  if (t == nullptr) return 1.0;
  refuse_host_read_during_capture(op, name, *t);
  const double s = t->to(at::kCPU).to(at::kDouble).item<double>();
  TORCH_CHECK_VALUE(std::isfinite(s) && s > 0, op, ": '", name, "' must be finite and positive, got ", s);
  return s;
}

// GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp: per request, the pool rows of its logical tokens
// (old then new) from block_table, checked; queries attend [old read from the pool as it was, new as
// given]; then the new keys and values are written at their rows, divided by the scales and rounded
// to the pool's dtype (an FP8 pool clamped to its range first).
class GqaPrefillPagedReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gqa_prefill_paged::View v(call);
    const char* op = call.op_name;
    const at::Tensor& q = v.q();
    at::Tensor k_pages = v.k_pages(), v_pages = v.v_pages();
    const int64_t page = v.page_size(), per_req = v.max_pages_per_req(), dim = q.size(2);
    const int64_t pool_pages = k_pages.size(0) / page, capacity = per_req * page;
    const auto cu = offsets(op, "cu_seqlens_q", v.cu_seqlens_q(), q.size(0));
    const std::vector<int64_t> cached = host_values(op, "cache_seqlens", v.cache_seqlens()), table = host_values(op, "block_table", v.block_table());
    const double ks = cache_scale(op, "k_scale", v.k_scale()), vs = cache_scale(op, "v_scale", v.v_scale());
    const bool fp8_pool = k_pages.scalar_type() == at::kFloat8_e4m3fn;

    // Every request's pool rows, old tokens then new, checked before anything is read or written.
    std::vector<std::vector<int64_t>> rows(cached.size());
    std::vector<int64_t> written;  // pool rows of the new tokens, to refuse one written twice
    for (size_t b = 0; b < cached.size(); ++b) {
      const int64_t len = cu[b + 1] - cu[b], n = cached[b];
      TORCH_CHECK_VALUE(len <= v.max_seqlen_q(), op, ": request ", b, " has ", len, " new tokens, more than max_seqlen_q = ",
                        v.max_seqlen_q());
      TORCH_CHECK_VALUE(n >= 0, op, ": 'cache_seqlens' must be >= 0, got cache_seqlens[", b, "] = ", n);
      TORCH_CHECK_VALUE(n + len <= capacity, op, ": request ", b, " would hold cache_seqlens[", b, "] + ", len, " = ", n + len,
                        " tokens, more than max_pages_per_req * page_size = ", capacity);
      TORCH_CHECK_VALUE(!v.fuse_rope() || n + len <= *v.max_position(), op, ": request ", b, " reaches position ",
                        n + len - 1, ", past max_position = ", v.max_position().value_or(0), " of the rotary table");
      for (int64_t p = 0; p < n + len; ++p) {
        const int64_t e = p / page, entry = table[b * per_req + e];
        TORCH_CHECK_VALUE(entry >= 0 && entry < pool_pages, op, ": 'block_table' entries a request reads or writes must ",
                          "be pages of k_pages and v_pages, in [0, N_pool / page_size) = [0, ", pool_pages, "); block_table[",
                          b, ", ", e, "] is ", entry, " and request ", b, " holds ", n + len, " tokens");
        rows[b].push_back(entry * page + p % page);
      }
      written.insert(written.end(), rows[b].begin() + n, rows[b].end());
    }
    std::vector<int64_t> sorted = written;
    std::sort(sorted.begin(), sorted.end());
    const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
    TORCH_CHECK_VALUE(twice == sorted.end(), op, ": 'block_table' places two new tokens at pool row ",
                      twice == sorted.end() ? 0 : *twice, "; each new token needs a row of its own");

    // New queries and keys, rotated at positions cache_seqlens[b] + i when RoPE is fused (rounded to q's dtype).
    at::Tensor qn = q, kn = v.k_new();
    if (v.fuse_rope()) {
      std::vector<int64_t> pos(static_cast<size_t>(q.size(0)));
      for (size_t b = 0; b < cached.size(); ++b)
        for (int64_t i = cu[b]; i < cu[b + 1]; ++i) pos[i] = cached[b] + i - cu[b];
      const at::Tensor positions = long_tensor(pos, q);
      const int64_t rot = v.rotary_dim().value_or(dim);
      qn = rope_neox_float(q, positions, v.rope_base(), rot, q.scalar_type()).to(q.scalar_type());
      kn = rope_neox_float(kn, positions, v.rope_base(), rot, q.scalar_type()).to(q.scalar_type());
    }
    const at::Tensor& vn = v.v_new();

    at::Tensor o = v.o();
    const Scores sc{default_scale(v.sm_scale(), dim), v.softcap()};
    for (size_t b = 0; b < cached.size(); ++b) {
      const int64_t len = cu[b + 1] - cu[b], n = cached[b];
      if (len == 0) continue;
      // Old tokens as the attention reads them: pool value * scale, rounded to q's dtype.
      const at::Tensor old_rows = long_tensor(std::vector<int64_t>(rows[b].begin(), rows[b].begin() + n), q);
      const at::Tensor k_old = k_pages.index_select(0, old_rows).to(at::kFloat).mul_(ks).to(q.scalar_type());
      const at::Tensor v_old = v_pages.index_select(0, old_rows).to(at::kFloat).mul_(vs).to(q.scalar_type());
      const at::Tensor kb = at::cat({k_old, kn.narrow(0, cu[b], len)}).unsqueeze(0);
      const at::Tensor vb = at::cat({v_old, vn.narrow(0, cu[b], len)}).unsqueeze(0);
      const at::Tensor valid = window_mask(len, n + len, n, v.is_causal(), -1, -1, q);
      o.narrow(0, cu[b], len).copy_(attend(qn.narrow(0, cu[b], len).unsqueeze(0), kb, vb, sc, valid.unsqueeze(0)).squeeze(0));
    }

    // The append, after every read: the pool as the call found it is what the queries attended.
    if (written.empty()) return;
    std::vector<int64_t> sources;  // the packed row of each written token, in `written` order
    for (size_t b = 0; b < cached.size(); ++b)
      for (int64_t i = cu[b]; i < cu[b + 1]; ++i) sources.push_back(i);
    const at::Tensor dst = long_tensor(written, q);
    const at::Tensor src = long_tensor(sources, q);
    auto store = [&](const at::Tensor& x, double scale, at::Tensor& pool) {
      at::Tensor f = x.index_select(0, src).to(at::kFloat).div_(scale);
      if (!fp8_pool) {
        pool.index_copy_(0, dst, f.to(pool.scalar_type()));
        return;
      }
      // ATen's CPU index_copy_ takes no float8: the same bytes through a uint8 view.
      pool.view(at::kByte).index_copy_(0, dst, f.clamp_(-448.0, 448.0).to(pool.scalar_type()).view(at::kByte));
    };
    store(kn, ks, k_pages);
    store(vn, vs, v_pages);
  }
};

// DeepSeekSparseAttentionDecodeWithKVCacheFwdOp: query s of request b and KV group g read the cache
// entries indices[b, s, g, :] that lie in [0, S_kv) and, causally, are complete at position
// q_start_index_s + s; scores over all D dims, values the first D - dim_tail. The selected entries are
// gathered a chunk of queries at a time (a few hundred MB at most).
class DsaDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const dsa_decode::View v(call);
    const at::Tensor& q = v.q();    // [B, S, H, D]
    const at::Tensor& kv = v.kv();  // [B, N, G, D]
    at::Tensor o = v.o();           // [B, S, H, Dv]
    const int64_t batch = q.size(0), queries = q.size(1), heads = q.size(2), dim = q.size(3);
    const int64_t entries = kv.size(1), groups = kv.size(2), topk = v.topk(), dv = dim - v.dim_tail();
    if (o.numel() == 0) return;
    const double scale = default_scale(v.sm_scale(), dim);
    const at::Tensor idx = v.indices().to(at::kLong);  // [B, S, G, K]
    const at::Tensor pos = at::arange(queries, idx.options()).add_(v.q_start_index_s()).view({1, queries, 1, 1});
    at::Tensor valid = (idx >= 0) & (idx < entries);
    if (v.is_causal()) valid = valid & ((idx + 1) * v.stride_kv() - 1 <= pos);
    // Rows of kv viewed as [B * G * N, D]: entry idx of (b, g) is row (b * G + g) * N + idx.
    const at::Tensor table = kv.permute({0, 2, 1, 3}).reshape({batch * groups * entries, dim});
    const at::Tensor base = (at::arange(batch, idx.options()).view({batch, 1, 1, 1}) * groups +
                             at::arange(groups, idx.options()).view({1, 1, groups, 1})) * entries;
    const at::Tensor rows = at::where(valid, idx, 0) + base;  // [B, S, G, K]
    const int64_t per_query = std::max<int64_t>(1, batch * groups * topk * dim * 4);
    const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 28) / per_query);
    for (int64_t s0 = 0; s0 < queries; s0 += chunk) {
      const int64_t n = std::min(chunk, queries - s0);
      const at::Tensor r = rows.narrow(1, s0, n).permute({0, 2, 1, 3});        // [B, G, n, K]
      const at::Tensor keep = valid.narrow(1, s0, n).permute({0, 2, 1, 3}).unsqueeze(3);  // [B, G, n, 1, K]
      const at::Tensor sel = table.index_select(0, r.reshape({-1})).to(at::kFloat).view({batch, groups, n, topk, dim});
      const at::Tensor qf = q.narrow(1, s0, n).to(at::kFloat).view({batch, n, groups, heads / groups, dim})
                                .permute({0, 2, 1, 3, 4});                      // [B, G, n, Hg, D]
      at::Tensor s = at::matmul(qf, sel.transpose(3, 4)).mul_(scale);           // [B, G, n, Hg, K]
      s.masked_fill_(keep.logical_not(), -INFINITY);
      const at::Tensor p = at::where(keep, at::softmax(s, -1), 0.0);            // a query with none read: zeros
      const at::Tensor out = at::matmul(p, sel.narrow(4, 0, dv));               // [B, G, n, Hg, Dv]
      o.narrow(1, s0, n).copy_(out.permute({0, 2, 1, 3, 4}).reshape({batch, n, heads, dv}));
    }
  }
};

KernelBuilder mha_decode_builder() { return stateless_builder<MhaDecodeReference>("mha_decode (ATen)"); }
KernelBuilder mha_decode_paged_builder() { return stateless_builder<MhaDecodePagedReference>("mha_decode_paged (ATen)"); }
KernelBuilder gqa_decode_builder() { return stateless_builder<GqaDecodeReference>("gqa_decode (ATen)"); }
KernelBuilder gqa_decode_paged_builder() { return stateless_builder<GqaDecodePagedReference>("gqa_decode_paged (ATen)"); }
KernelBuilder mla_decode_builder() { return stateless_builder<MlaDecodeReference>("mla_decode (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, MultiHeadAttentionDecodeWithKVCacheFwdOp, mha_decode_builder);
TILEOPS_BUILTIN_KERNEL(reference, MultiHeadAttentionDecodePagedWithKVCacheFwdOp, mha_decode_paged_builder);
TILEOPS_BUILTIN_KERNEL(reference, GroupedQueryAttentionDecodeWithKVCacheFwdOp, gqa_decode_builder);
TILEOPS_BUILTIN_KERNEL(reference, GroupedQueryAttentionDecodePagedWithKVCacheFwdOp, gqa_decode_paged_builder);
TILEOPS_BUILTIN_KERNEL(reference, MultiHeadLatentAttentionDecodeWithKVCacheFwdOp, mla_decode_builder);
KernelBuilder mha_fwd_builder() { return stateless_builder<MhaFwdReference>("mha_fwd (ATen)"); }
KernelBuilder mha_bwd_builder() { return stateless_builder<MhaBwdReference>("mha_bwd (ATen)"); }
KernelBuilder gqa_bwd_builder() { return stateless_builder<GqaBwdReference>("gqa_bwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, MultiHeadAttentionFwdOp, mha_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, MultiHeadAttentionBwdOp, mha_bwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GroupedQueryAttentionBwdOp, gqa_bwd_builder);
KernelBuilder gqa_window_builder() { return stateless_builder<GqaSlidingWindowVarlenReference>("gqa_sliding_window_varlen (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GroupedQueryAttentionSlidingWindowVarlenFwdOp, gqa_window_builder);
KernelBuilder gqa_fwd_builder() { return stateless_builder<GqaFwdReference>("gqa_fwd (ATen)"); }
KernelBuilder gqa_window_fwd_builder() { return stateless_builder<GqaSlidingWindowReference>("gqa_sliding_window (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GroupedQueryAttentionFwdOp, gqa_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GroupedQueryAttentionSlidingWindowFwdOp, gqa_window_fwd_builder);
KernelBuilder gqa_prefill_builder() { return stateless_builder<GqaPrefillReference>("gqa_prefill (ATen)"); }
KernelBuilder gqa_prefill_paged_builder() { return stateless_builder<GqaPrefillPagedReference>("gqa_prefill_paged (ATen)"); }
KernelBuilder dsa_decode_builder() { return stateless_builder<DsaDecodeReference>("dsa_decode (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GroupedQueryAttentionPrefillFwdOp, gqa_prefill_builder);
TILEOPS_BUILTIN_KERNEL(reference, GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp, gqa_prefill_paged_builder);
TILEOPS_BUILTIN_KERNEL(reference, DeepSeekSparseAttentionDecodeWithKVCacheFwdOp, dsa_decode_builder);

}  // namespace
void mla_decode_aten(const OpCall& call) {
  const mla::View v(call);
  // q . k + q_pe . k_pe is one dot product of the concatenated vectors.
  const at::Tensor q = at::cat({v.q(), v.q_pe()}, -1).unsqueeze(1);  // [B, 1, H, D + pe]
  const at::Tensor k = at::cat({v.k(), v.k_pe()}, -1);              // [B, N, 1, D + pe]
  at::Tensor o = v.o();
  o.copy_(attend(q, k, v.k(), {default_scale(std::nullopt, q.size(3)), std::nullopt}, {}).squeeze(1));
}

}  // namespace tileops::reference
