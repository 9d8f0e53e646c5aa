// A torch extension over flashinfer's header-only norm, activation and RoPE kernels, for the
// benchmarks only: each function launches what flashinfer's own Python API launches for that call
// (same launcher, same block shapes), on the current stream, with no checks beyond the launch.
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <flashinfer/activation.cuh>
#include <flashinfer/norm.cuh>
#include <flashinfer/pos_enc.cuh>

#include <algorithm>

namespace {

cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

void check(cudaError_t e, const char* what) { TORCH_CHECK(e == cudaSuccess, what, ": ", cudaGetErrorString(e)); }

template <class F>
void by_dtype(const at::Tensor& t, F&& f) {
  if (t.scalar_type() == at::kBFloat16) f(static_cast<__nv_bfloat16*>(nullptr));
  else if (t.scalar_type() == at::kHalf) f(static_cast<half*>(nullptr));
  else TORCH_CHECK(false, "flashinfer bench wrapper: bfloat16 or float16 only");
}

void rmsnorm(at::Tensor out, at::Tensor x, at::Tensor w, double eps, bool gemma) {
  const auto rows = static_cast<uint32_t>(x.size(0)), d = static_cast<uint32_t>(x.size(1));
  by_dtype(x, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto* xp = static_cast<T*>(x.data_ptr());
    auto* wp = static_cast<T*>(w.data_ptr());
    auto* yp = static_cast<T*>(out.data_ptr());
    const auto sx = static_cast<uint32_t>(x.stride(0)), sy = static_cast<uint32_t>(out.stride(0));
    check(gemma ? flashinfer::norm::GemmaRMSNorm(xp, wp, yp, rows, d, sx, sy, float(eps), false, stream())
                : flashinfer::norm::RMSNorm(xp, wp, yp, rows, d, sx, sy, float(eps), false, stream()),
          "flashinfer RMSNorm");
  });
}

void fused_add_rmsnorm(at::Tensor x, at::Tensor residual, at::Tensor w, double eps, bool gemma) {
  const auto rows = static_cast<uint32_t>(x.size(0)), d = static_cast<uint32_t>(x.size(1));
  by_dtype(x, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto* xp = static_cast<T*>(x.data_ptr());
    auto* rp = static_cast<T*>(residual.data_ptr());
    auto* wp = static_cast<T*>(w.data_ptr());
    const auto sx = static_cast<uint32_t>(x.stride(0)), sr = static_cast<uint32_t>(residual.stride(0));
    check(gemma ? flashinfer::norm::GemmaFusedAddRMSNorm(xp, rp, wp, rows, d, sx, sr, float(eps), false, stream())
                : flashinfer::norm::FusedAddRMSNorm(xp, rp, wp, rows, d, sx, sr, float(eps), false, stream()),
          "flashinfer FusedAddRMSNorm");
  });
}

// LayerNorm takes float32 weight and bias, as flashinfer.norm.layernorm does.
void layernorm(at::Tensor out, at::Tensor x, at::Tensor w, at::Tensor b, double eps) {
  by_dtype(x, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    check(flashinfer::norm::LayerNorm(static_cast<T*>(x.data_ptr()), w.data_ptr<float>(), b.data_ptr<float>(),
                                      static_cast<T*>(out.data_ptr()), static_cast<uint32_t>(x.size(0)),
                                      static_cast<uint32_t>(x.size(1)), float(eps), stream()),
          "flashinfer LayerNorm");
  });
}

__device__ __forceinline__ float silu(const float& v) { return v / (1.0f + __expf(-v)); }

// The launch of flashinfer's jit/activation.py: one CTA per row, at most 256 threads, widest vector
// that divides d.
void silu_and_mul(at::Tensor out, at::Tensor x) {
  const int d = static_cast<int>(x.size(-1) / 2);
  const auto rows = static_cast<unsigned>(x.numel() / x.size(-1));
  by_dtype(x, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto go = [&](auto vec_tag) {
      constexpr uint32_t vec = decltype(vec_tag)::value;
      const unsigned threads = std::min<unsigned>(d / vec, 256u);
      flashinfer::activation::act_and_mul_kernel<T, silu, vec><<<rows, threads, 0, stream()>>>(
          static_cast<T*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()), d);
    };
    constexpr uint32_t max_vec = 16 / sizeof(T);
    if (d % max_vec == 0) go(std::integral_constant<uint32_t, max_vec>{});
    else if (d % 4 == 0) go(std::integral_constant<uint32_t, 4>{});
    else if (d % 2 == 0) go(std::integral_constant<uint32_t, 2>{});
    else go(std::integral_constant<uint32_t, 1>{});
    check(cudaGetLastError(), "flashinfer act_and_mul");
  });
}

// apply_rope_with_cos_sin_cache_inplace: q [tokens, hq * head], k [tokens, hk * head], in place.
void rope_cos_sin_cache(at::Tensor positions, at::Tensor q, at::Tensor k, int64_t head, at::Tensor cos_sin,
                        bool is_neox) {
  const auto tokens = static_cast<uint32_t>(q.size(0));
  const auto hq = static_cast<uint32_t>(q.size(1) / head), hk = static_cast<uint32_t>(k.size(1) / head);
  const auto rot = static_cast<uint32_t>(cos_sin.size(1));
  TORCH_CHECK(positions.scalar_type() == at::kLong, "positions: int64");
  by_dtype(q, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto* qp = static_cast<T*>(q.data_ptr());
    auto* kp = static_cast<T*>(k.data_ptr());
    const size_t qs = q.stride(0), ks = k.stride(0), h = static_cast<size_t>(head);
    check(flashinfer::BatchQKApplyRotaryPosIdsCosSinCache(qp, kp, qp, kp, cos_sin.data_ptr<float>(),
                                                          positions.data_ptr<int64_t>(), tokens, hq, hk, rot,
                                                          static_cast<uint32_t>(head), qs, h, ks, h, qs, h, ks, h,
                                                          !is_neox, stream()),
          "flashinfer RoPE");
  });
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("rmsnorm", &rmsnorm);
  m.def("fused_add_rmsnorm", &fused_add_rmsnorm);
  m.def("layernorm", &layernorm);
  m.def("silu_and_mul", &silu_and_mul);
  m.def("rope_cos_sin_cache", &rope_cos_sin_cache);
}
