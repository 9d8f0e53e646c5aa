// The elementwise engine on the nvrtc target: layout (dim collapsing), problem, spec, the generated
// `Op` source, launch and the registration of every `elementwise:` entry.
#include "targets/nvrtc/elementwise/elementwise.h"

#include <ATen/core/Tensor.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"

namespace tileops::nvrtc {

using elementwise::EwOp;
using elementwise::kOps;

EwLayout ew_layout(c10::ArrayRef<c10::IntArrayRef> in_sizes, c10::ArrayRef<c10::IntArrayRef> in_strides,
                   c10::IntArrayRef out_sizes) {
  const size_t n_in = in_sizes.size(), rank = out_sizes.size();
  EwLayout l;
  // Collapsed dims, innermost first while building: size, then each input's stride and the output's.
  c10::SmallVector<int64_t, 8> sizes, out_stride;
  std::array<c10::SmallVector<int64_t, 8>, elementwise::kMaxInputs> st;
  int64_t out_step = 1;
  for (size_t d = rank; d-- > 0;) {
    const int64_t size = out_sizes[d];
    l.numel *= size;
    if (size == 1) continue;
    std::array<int64_t, elementwise::kMaxInputs> s{};
    for (size_t k = 0; k < n_in; ++k) {
      const int64_t kd = static_cast<int64_t>(d) - static_cast<int64_t>(rank - in_sizes[k].size());
      s[k] = (kd < 0 || in_sizes[k][kd] == 1) ? 0 : in_strides[k][kd];
    }
    bool merge = !sizes.empty() && out_step == out_stride.back() * sizes.back();
    for (size_t k = 0; merge && k < n_in; ++k) merge = s[k] == st[k].back() * sizes.back();
    if (merge) {
      sizes.back() *= size;  // the inner dim's strides step through both
    } else {
      sizes.push_back(size);
      out_stride.push_back(out_step);
      for (size_t k = 0; k < n_in; ++k) st[k].push_back(s[k]);
    }
    out_step *= size;
  }
  l.sizes.assign(sizes.rbegin(), sizes.rend());
  for (size_t k = 0; k < n_in; ++k) {
    l.strides[k].assign(st[k].rbegin(), st[k].rend());
    int64_t reach = 0;
    bool all_zero = true;
    for (size_t d = 0; d < l.sizes.size(); ++d) {
      reach += (l.sizes[d] - 1) * l.strides[k][d];
      all_zero = all_zero && l.strides[k][d] == 0;
    }
    l.max_offset = std::max(l.max_offset, reach);
    l.one[k] = !l.sizes.empty() && all_zero;
    if (l.sizes.size() > 1 || (l.sizes.size() == 1 && l.strides[k][0] != 1 && !l.one[k])) l.contiguous = false;
  }
  if (l.numel == 0) l.sizes.clear();
  return l;
}

c10::ScalarType ew_compute_dtype(const EwOp&, c10::ArrayRef<c10::ScalarType> common_in, c10::ScalarType out) {
  // common_in: the promoted dtype of the promoted inputs, as one element.
  c10::ScalarType c = common_in.empty() ? out : common_in[0];
  if (c10::isFloatingType(out) && !c10::isFloatingType(c)) c = out;  // int -> float ops (sqrt, div)
  if (c == c10::ScalarType::Half || c == c10::ScalarType::BFloat16) c = c10::ScalarType::Float;  // opmath
  return c;
}

namespace {

const char* compute_type_name(c10::ScalarType t) { return kernel_type_name(t); }

int elem(c10::ScalarType t) { return static_cast<int>(c10::elementSize(t)); }

// A call whose absent optional inputs (undefined) stand in as its first input: the layout, dtypes
// and pointers the kernel of the call's case sees (that case's expression does not read them).
struct EwCall {
  std::array<at::Tensor, elementwise::kMaxInputs> inputs;
  OpCall call;
  explicit EwCall(const OpCall& c) : call(c) {
    const int n = static_cast<int>(c.inputs.size());
    for (int k = 0; k < n; ++k) inputs[k] = c.inputs[k].defined() ? c.inputs[k] : c.inputs[0];
    call.inputs = c10::ArrayRef<at::Tensor>(inputs.data(), static_cast<size_t>(n));
  }
};

// Bit k set: input k of the call is given.
int ew_given_mask(const EwOp& e, const OpCall& call) {
  int mask = 0;
  for (int k = 0; k < e.n_in; ++k) mask |= call.inputs[k].defined() ? 1 << k : 0;
  return mask;
}


}  // namespace

std::string EwSpec::name() const {
  const EwOp& e = kOps[op];
  std::string n = std::string(e.stem) + "__";
  for (int k = 0; k < e.n_in; ++k)
    n += std::string(short_type_name(in[k])) + (one[k] ? "s" : "") + (aligned[k] ? "a" : "") + (staged[k] ? "t" : "") +
         "_";
  n += std::string(short_type_name(out)) + "__c" + short_type_name(compute);
  n += rank == 0 ? "__v" + std::to_string(vec)
                 : "__r" + std::to_string(rank) + (vec > 1 ? "v" + std::to_string(vec) : std::string());
  if (rank == 0 && unroll != kEwUnroll) n += "u" + std::to_string(unroll);
  if (rank == 0 && cta_threads != kEwContiguousThreads) n += "t" + std::to_string(cta_threads);
  if (e.select >= 0) n += "__m" + std::string(e.case_values[variant] ? e.case_values[variant] : "none");
  if (e.case_given[variant] >= 0 && e.case_given[variant] != (1 << e.n_in) - 1)
    n += "__g" + std::to_string(e.case_given[variant]);  // the inputs given (bit k: input k)
  return n + (index64 ? "__i64" : "") + "__" + arch;
}

std::string EwSpec::describe() const {
  return "elementwise(" + std::string(kOps[op].case_exprs[variant]) + ", " + name() + ")";
}

int ew_contiguous_threads(int64_t vecs, int sms, int max_threads, int unroll) {
  const int64_t full = static_cast<int64_t>(max_threads) * unroll;
  if (sms <= 0 || (vecs + full - 1) / full >= sms) return max_threads;
  return std::clamp(next_pow2((vecs + int64_t{unroll} * sms - 1) / (int64_t{unroll} * sms)), 32, max_threads);
}

int ew_value_params(const EwOp& e) { return e.n_params - (e.select >= 0 ? 1 : 0); }

std::string ew_op_type(const EwSpec& s) {
  const EwOp& e = kOps[s.op];
  auto flag = [](bool b) { return b ? "true" : "false"; };
  std::string t = "tileops::ew::Op<tileops::ew::expr::" + std::string(e.stem) + "__" + std::to_string(s.variant) +
                  ", " + compute_type_name(s.compute) + ", " + kernel_type_name(s.out) + ", " +
                  std::to_string(ew_value_params(e));
  for (int k = 0; k < e.n_in; ++k)
    t += std::string(", tileops::ew::In<") + kernel_type_name(s.in[k]) + ", " + flag(s.one[k]) + ", " +
         flag(s.aligned[k]) + ", " + flag(s.staged[k]) + ", " + flag(e.in_fixed[k]) + ">";
  return t + ">";
}

std::vector<jit::KernelSource> EwSpec::sources() const {
  const std::string idx = index64 ? "long long" : "int", op = ew_op_type(*this);
  const bool tiled = std::find(staged.begin(), staged.end(), true) != staged.end();
  const std::string expr = rank == 0 ? "tileops::ew::contiguous_fwd<" + op + ", " + std::to_string(vec) + ", " +
                                           std::to_string(unroll) + ", " + idx + ">"
                     : tiled   ? "tileops::ew::tiled_fwd<" + op + ", " + idx + ", " + std::to_string(vec) + ">"
                     : vec > 1 ? "tileops::ew::strided_vec_fwd<" + op + ", " + std::to_string(rank) + ", " +
                                     std::to_string(vec) + ", " + idx + ">"
                               : "tileops::ew::strided_fwd<" + op + ", " + std::to_string(rank) + ", " + idx + ">";
  return {make_source(name(), "elementwise/exprs.cuh", expr, arch)};
}

namespace {

template <class T>
int64_t lowest_of() { return static_cast<int64_t>(std::numeric_limits<T>::lowest()); }
template <class T>
int64_t highest_of() { return static_cast<int64_t>(std::numeric_limits<T>::max()); }

// The range of an integer (or bool) type.
std::pair<int64_t, int64_t> int_range(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool: return {0, 1};
    case c10::ScalarType::Byte: return {lowest_of<uint8_t>(), highest_of<uint8_t>()};
    case c10::ScalarType::Char: return {lowest_of<int8_t>(), highest_of<int8_t>()};
    case c10::ScalarType::Short: return {lowest_of<int16_t>(), highest_of<int16_t>()};
    case c10::ScalarType::Int: return {lowest_of<int32_t>(), highest_of<int32_t>()};
    default: return {lowest_of<int64_t>(), highest_of<int64_t>()};
  }
}

// The largest finite value of a floating type (torch.finfo(t).max).
double finite_max(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half: return 65504.0;
    case c10::ScalarType::BFloat16: return 3.3895313892515355e38;
    case c10::ScalarType::Float: return static_cast<double>(std::numeric_limits<float>::max());
    default: return std::numeric_limits<double>::max();
  }
}

// A param value converted to the compute type's bytes (8 bytes hold every compute type). `out`: the
// output's dtype, whose limits a None param may stand for.
void put_scalar(const EwOp& e, int j, const ParamValue& v, c10::ScalarType c, c10::ScalarType out, const char* op_name,
                unsigned char* dst) {
  double d = 0;
  int64_t i = 0;
  bool is_real = false;
  const bool int_compute = !c10::isFloatingType(c);
  switch (v.kind()) {
    case ParamValue::Kind::Int: i = v.as_int(); d = static_cast<double>(i); break;
    case ParamValue::Kind::Bool: i = v.as_bool(); d = static_cast<double>(i); break;
    case ParamValue::Kind::Real: d = v.as_real(); is_real = true; break;
    case ParamValue::Kind::None: {
      using elementwise::IfNone;
      const IfNone how = e.param_none[j];
      TORCH_CHECK(how != IfNone::kRequired, op_name, ": param '", e.param_names[j], "' has no value");
      if (how == IfNone::kZero) break;
      const bool low = how == IfNone::kNegInf || how == IfNone::kMin;
      if (int_compute) {  // a bound that never binds, or the limit of the (integer) result
        const auto r = int_range(how == IfNone::kMin || how == IfNone::kMax ? out : c);
        i = low ? r.first : r.second;
        d = static_cast<double>(i);
      } else {
        const double m = how == IfNone::kMin || how == IfNone::kMax
                             ? (c10::isFloatingType(out) ? finite_max(out) : static_cast<double>(int_range(out).second))
                             : std::numeric_limits<double>::infinity();
        d = low ? (how == IfNone::kMin && !c10::isFloatingType(out) ? static_cast<double>(int_range(out).first) : -m)
                : m;
        is_real = true;
      }
      break;
    }
    default: TORCH_CHECK(false, op_name, ": param '", e.param_names[j], "' has no value");
  }
  if (is_real && int_compute && c != c10::ScalarType::Bool && e.param_float[j]) {
    // a float param that an integer compute type reads (nan_to_num's for integer inputs): saturated
    const auto r = int_range(c);
    i = d != d ? 0 : d <= static_cast<double>(r.first) ? r.first : d >= static_cast<double>(r.second) ? r.second
                                                                                                     : static_cast<int64_t>(d);
    is_real = false;
  }
  TORCH_CHECK_TYPE(!is_real || !int_compute || c == c10::ScalarType::Bool, op_name, ": '", e.param_names[j],
                   "' is a float (", d, ") but the op computes in ", c10::toString(c),
                   " for these integer inputs; pass an integer (as torch refuses a float alpha for integer tensors)");
  if (int_compute && c != c10::ScalarType::Bool && v.kind() == ParamValue::Kind::Int) {
    // A given integer that the compute type cannot hold is refused with torch's rule and words (its
    // checked Scalar conversion: uint8 takes -255..255 and wraps), before any launch.
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    const char* type = "int64_t";
    switch (c) {
      case c10::ScalarType::Byte: lo = -255, hi = 255, type = "uint8_t"; break;
      case c10::ScalarType::Char: lo = -128, hi = 127, type = "int8_t"; break;
      case c10::ScalarType::Short: lo = -32768, hi = 32767, type = "int16_t"; break;
      case c10::ScalarType::Int: lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max(), type = "int"; break;
      default: break;
    }
    TORCH_CHECK(i >= lo && i <= hi, op_name, ": '", e.param_names[j], "' = ", i, ": value cannot be converted to type ",
                type, " without overflow (the op computes in ", c10::toString(c), " for these inputs)");
  }
  switch (c) {
    case c10::ScalarType::Float: { const float f = static_cast<float>(d); std::memcpy(dst, &f, 4); break; }
    case c10::ScalarType::Double: std::memcpy(dst, &d, 8); break;
    case c10::ScalarType::Bool: { const bool b = is_real ? d != 0 : i != 0; std::memcpy(dst, &b, 1); break; }
    case c10::ScalarType::Byte: { const auto x = static_cast<uint8_t>(i); std::memcpy(dst, &x, 1); break; }
    case c10::ScalarType::Char: { const auto x = static_cast<int8_t>(i); std::memcpy(dst, &x, 1); break; }
    case c10::ScalarType::Short: { const auto x = static_cast<int16_t>(i); std::memcpy(dst, &x, 2); break; }
    case c10::ScalarType::Int: { const auto x = static_cast<int32_t>(i); std::memcpy(dst, &x, 4); break; }
    case c10::ScalarType::Long: std::memcpy(dst, &i, 8); break;
    default: TORCH_CHECK(false, op_name, ": no compute type ", c10::toString(c));
  }
}

// The layout of a call: inputs as they are, the output contiguous (allocated by the boundary, or a
// contiguous out=/written input).
EwLayout call_layout(const EwOp& e, const OpCall& call) {
  std::array<c10::IntArrayRef, elementwise::kMaxInputs> sizes, strides;
  for (int k = 0; k < e.n_in; ++k) {
    sizes[k] = call.inputs[k].sizes();
    strides[k] = call.inputs[k].strides();
  }
  return ew_layout(c10::ArrayRef<c10::IntArrayRef>(sizes.data(), e.n_in),
                   c10::ArrayRef<c10::IntArrayRef>(strides.data(), e.n_in), call.outputs[0].sizes());
}

class EwKernel final : public Kernel {
 public:
  EwKernel(LoadedKernel k, EwSpec s, int sm_count) : k_(std::move(k)), s_(std::move(s)), sm_count_(sm_count) {}

  void launch(const OpCall& given) const override {
    const EwCall filled(given);
    const OpCall& call = filled.call;
    const EwOp& e = kOps[s_.op];
    const at::Tensor& y = call.outputs[0];
    EwLayout l = call_layout(e, call);
    std::array<at::Tensor, elementwise::kMaxInputs> copies;  // only past kEwMaxRank collapsed dims
    std::array<const void*, elementwise::kMaxInputs> ptrs{};
    for (int k = 0; k < e.n_in; ++k) ptrs[k] = call.inputs[k].const_data_ptr();
    if (s_.rank == 0 && !l.contiguous) {
      for (int k = 0; k < e.n_in; ++k) {
        copies[k] = call.inputs[k].expand(y.sizes()).contiguous();
        ptrs[k] = copies[k].const_data_ptr();
      }
    }
    // The ew::Op (op.cuh): input pointers, the output pointer, then the params in the compute type.
    alignas(8) unsigned char op_bytes[8 * (elementwise::kMaxInputs + 1) + 8 * elementwise::kMaxParams] = {};
    for (int k = 0; k < e.n_in; ++k) std::memcpy(op_bytes + 8 * k, &ptrs[k], 8);
    void* yp = y.mutable_data_ptr();
    std::memcpy(op_bytes + 8 * e.n_in, &yp, 8);
    const size_t csize = c10::elementSize(s_.compute);
    for (int j = 0, slot = 0; j < e.n_params; ++j)
      if (j != e.select)
        put_scalar(e, j, call.params[j], s_.compute, s_.out, call.op_name, op_bytes + 8 * (e.n_in + 1) + slot++ * csize);
    const int64_t n = y.numel();
    if (s_.rank == 0) {
      const int threads = ew_contiguous_threads(n / s_.vec, sm_count_, s_.cta_threads, s_.unroll);
      const int64_t per_cta = static_cast<int64_t>(threads) * s_.unroll;
      const int64_t grid = std::max<int64_t>(1, (n / s_.vec + per_cta - 1) / per_cta);
      if (s_.index64) {
        long long nn = n;
        void* args[] = {op_bytes, &nn};
        nvrtc::launch(k_, static_cast<unsigned>(grid), threads, 0, args);
      } else {
        int nn = static_cast<int>(n);
        void* args[] = {op_bytes, &nn};
        nvrtc::launch(k_, static_cast<unsigned>(grid), threads, 0, args);
      }
      return;
    }
    const int rank = s_.rank;
    const int64_t steps = n / s_.vec;
    int64_t grid = std::clamp<int64_t>((steps + kEwThreads - 1) / kEwThreads, 1, int64_t{sm_count_} * 32);
    if (std::find(s_.staged.begin(), s_.staged.end(), true) != s_.staged.end()) {  // tiled: one square tile a CTA step
      const int64_t side = int64_t{kEwTile} * s_.vec;
      const int64_t tiles = ((l.sizes[0] + side - 1) / side) * ((l.sizes[1] + side - 1) / side);
      grid = std::clamp<int64_t>(tiles, 1, int64_t{sm_count_} * 32);
    }
    // Strides<RANK, kIn, IDX>: sizes, then each input's strides.
    c10::SmallVector<int64_t, 8 * (elementwise::kMaxInputs + 1)> words(l.sizes.begin(), l.sizes.end());
    for (int k = 0; k < e.n_in; ++k) words.append(l.strides[k].begin(), l.strides[k].end());
    TORCH_CHECK(static_cast<int>(l.sizes.size()) == rank, call.op_name, ": layout changed between plan and launch");
    if (s_.index64) {
      long long nn = n;
      void* args[] = {op_bytes, words.data(), &nn};
      nvrtc::launch(k_, static_cast<unsigned>(grid), kEwThreads, 0, args);
    } else {
      c10::SmallVector<int32_t, 8 * (elementwise::kMaxInputs + 1)> w32(words.begin(), words.end());
      int nn = static_cast<int>(n);
      void* args[] = {op_bytes, w32.data(), &nn};
      nvrtc::launch(k_, static_cast<unsigned>(grid), kEwThreads, 0, args);
    }
  }

 private:
  LoadedKernel k_;
  EwSpec s_;
  int sm_count_;
};

struct EwFamily {
  using Problem = EwProblem;
  using Spec = EwSpec;
  int index;

  Problem problem(const OpCall& call) const { return ew_problem(index, call); }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_elementwise(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    return std::make_shared<EwKernel>(std::move(k[0]), s, dev.sm_count);
  }
};

template <int I>
KernelBuilder ew_builder() {
  return spec_builder(EwFamily{I});
}

template <int... I>
void register_all(std::integer_sequence<int, I...>) {
  (registry::builtin_kernels().push_back({"nvrtc", kOps[I].cls, &ew_builder<I>}), ...);
}

[[maybe_unused]] const bool kRegistered = [] {
  if (kOps[0].cls != nullptr) register_all(std::make_integer_sequence<int, elementwise::kNumOps>{});
  return true;
}();

}  // namespace

namespace {

// The strided path steps vec elements of the innermost dim at a time when every input steps through
// it by 1 or 0 and the output's 16-byte stores stay aligned: the offsets are computed once a group.
void plan_strided_vec(const EwOp& e, const OpCall& call, const EwLayout& l, EwProblem& q) {
  const int r = q.rank;
  int widest = elem(q.out);
  for (int k = 0; k < e.n_in; ++k) {
    const int64_t inner = l.strides[k][r - 1];
    if (inner != 0 && inner != 1) return;  // a transposed input: one element a step
    if (inner == 1) widest = std::max(widest, elem(q.in[k]));
  }
  int v = 16 / widest;
  const auto out_bits = reinterpret_cast<uintptr_t>(call.outputs[0].const_data_ptr());
  while (v > 1 && (l.sizes[r - 1] % v != 0 || out_bits % (v * elem(q.out)) != 0)) v /= 2;
  if (v == 1) return;
  q.vec = v;
  for (int k = 0; k < e.n_in; ++k) {
    q.one[k] = l.strides[k][r - 1] == 0;
    if (q.one[k]) continue;
    bool aligned = reinterpret_cast<uintptr_t>(call.inputs[k].const_data_ptr()) % (v * elem(q.in[k])) == 0;
    for (int d = 0; d < r - 1; ++d) aligned = aligned && l.strides[k][d] % v == 0;
    q.aligned[k] = aligned;
  }
}

// Two dims where an input steps through the rows by 1 and the columns by more (a transposed
// operand): one element a step would read it 32 rows apart per warp; the tiled loop stages it. Even
// sizes and an aligned output take 2 elements a thread: a staged input then loads 2 rows at once,
// and another input 2 columns at once, as one access where its strides and start allow.
bool plan_tiled(const EwOp& e, const OpCall& call, const EwLayout& l, EwProblem& q) {
  if (q.rank != 2 || l.sizes[0] < kEwTile || l.sizes[1] < kEwTile) return false;
  bool any = false;
  for (int k = 0; k < e.n_in; ++k) {
    q.staged[k] = l.strides[k][0] == 1 && l.strides[k][1] != 0 && l.strides[k][1] != 1;
    any = any || q.staged[k];
  }
  if (!any) return false;
  const auto aligned_to = [](const at::Tensor& t, int bytes) {
    return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % bytes == 0;
  };
  if (l.sizes[0] % 2 != 0 || l.sizes[1] % 2 != 0 || !aligned_to(call.outputs[0], 2 * elem(q.out))) return true;
  q.vec = 2;
  for (int k = 0; k < e.n_in; ++k) {
    const int64_t along = q.staged[k] ? l.strides[k][1] : l.strides[k][0];  // the stride that must keep pairs aligned
    const bool unit = q.staged[k] ? l.strides[k][0] == 1 : l.strides[k][1] == 1;
    q.aligned[k] = unit && along % 2 == 0 && aligned_to(call.inputs[k], 2 * elem(q.in[k]));
  }
  return true;
}

}  // namespace

EwSpec plan_elementwise(const EwProblem& q, const DeviceFacts& dev, const Tuning& t) {
  EwSpec s = q;
  s.arch = dev.arch;
  if (s.rank == 0 && t.ew_unroll) s.unroll = t.ew_unroll;
  if (s.rank == 0 && t.ew_threads) s.cta_threads = t.ew_threads;
  return s;
}

EwProblem ew_problem(int index, const OpCall& given) {
  const EwOp& e = kOps[index];
  const EwCall filled(given);
  const OpCall& call = filled.call;
  EwProblem q;
  q.op = index;
  const at::Tensor& y = call.outputs[0];
  at::native::ResultTypeState state;
  bool any = false;
  for (int k = 0; k < e.n_in; ++k) {
    q.in[k] = call.inputs[k].scalar_type();
    if (!e.in_fixed[k]) {
      state = at::native::update_result_type_state(call.inputs[k], state);
      any = true;
    }
  }
  q.out = y.scalar_type();
  const c10::ScalarType common = any ? at::native::result_type(state) : q.out;
  q.compute = ew_compute_dtype(e, c10::ArrayRef<c10::ScalarType>(&common, 1), q.out);
  const EwLayout l = call_layout(e, call);
  q.index64 = l.numel >= kEwInt32Limit || l.max_offset >= kEwInt32Limit;
  if (l.contiguous || static_cast<int>(l.sizes.size()) > kEwMaxRank) {
    q.rank = 0;
    int widest = elem(q.out);
    for (int k = 0; k < e.n_in; ++k) {
      q.one[k] = l.contiguous && l.one[k];
      if (q.one[k]) continue;
      widest = std::max(widest, elem(q.in[k]));
    }
    q.vec = 16 / widest;
    auto aligned = [&](int v) {
      if (reinterpret_cast<uintptr_t>(y.const_data_ptr()) % (v * elem(q.out)) != 0) return false;
      for (int k = 0; k < e.n_in; ++k)
        if (!q.one[k] && l.contiguous &&
            reinterpret_cast<uintptr_t>(call.inputs[k].const_data_ptr()) % (v * elem(q.in[k])) != 0)
          return false;
      return true;
    };
    // Inputs read through contiguous copies (past kEwMaxRank) are freshly allocated: aligned.
    while (q.vec > 1 && !aligned(q.vec)) q.vec /= 2;
  } else {
    q.rank = static_cast<int>(l.sizes.size());
    q.vec = 1;
    if (!plan_tiled(e, call, l, q)) plan_strided_vec(e, call, l, q);
  }
  // Params are checked (and converted) per call: a float Scalar for an integer compute type is refused here.
  unsigned char scratch[8];
  for (int j = 0; j < e.n_params; ++j)
    if (j != e.select) put_scalar(e, j, call.params[j], q.compute, q.out, call.op_name, scratch);
  // The select param picks the expression: a kernel per case, never a branch in the kernel.
  if (e.select >= 0) {
    const ParamValue& v = call.params[e.select];
    q.variant = -1;
    for (int c = 0; c < e.n_cases; ++c)
      if (v.is_none() ? e.case_values[c] == nullptr : e.case_values[c] != nullptr && v.as_str() == e.case_values[c])
        q.variant = c;
    TORCH_CHECK(q.variant >= 0, call.op_name, ": param '", e.param_names[e.select], "' has no case in the manifest");
  }
  if (e.case_given[0] >= 0) {  // the optional inputs given pick the expression
    const int mask = ew_given_mask(e, given);
    q.variant = -1;
    for (int c = 0; c < e.n_cases; ++c)
      if (e.case_given[c] == mask) q.variant = c;
    TORCH_CHECK(q.variant >= 0, call.op_name, ": no expression in the manifest for these optional inputs left out");
  }
  return q;
}

}  // namespace tileops::nvrtc
