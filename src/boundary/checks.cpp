#include "boundary/checks.h"

#include "boundary/overlap.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/TypeProperties.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <exception>
#include <new>
#include <sstream>
#include <string>

namespace tileops::check {
namespace {

// Manifest spelling of a dtype, so messages use the words the manifest uses.
const char* dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::ComplexFloat: return "complex64";
    case c10::ScalarType::ComplexDouble: return "complex128";
    case c10::ScalarType::Float8_e4m3fn: return "float8_e4m3fn";
    case c10::ScalarType::Float8_e5m2: return "float8_e5m2";  // torch's names for dtypes no manifest takes
    case c10::ScalarType::Float8_e4m3fnuz: return "float8_e4m3fnuz";
    case c10::ScalarType::Float8_e5m2fnuz: return "float8_e5m2fnuz";
    default: return c10::toString(t);
  }
}

// A SymInt as text: its value when it has one, else its expression.
std::string sym_str(const c10::SymInt& v) {
  if (auto i = v.maybe_as_int()) return std::to_string(*i);
  return v.toSymNodeImplUnowned()->str();
}

std::string dims_str(c10::SymIntArrayRef dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + sym_str(dims[i]);
  return out + "]";
}

std::string bytes_str(int64_t b) {
  return std::to_string(b) + " bytes (" + std::to_string(b >> 20) + " MiB)";
}

// Bytes of `dims` elements of `elem` bytes; -1 when the product does not fit in int64.
int64_t checked_bytes(c10::SymIntArrayRef dims, int64_t elem) {
  int64_t n = elem;
  for (const auto& d : dims) {
    const auto v = d.maybe_as_int();
    if (!v) return 0;  // symbolic: only the Meta kernel sees those, and it allocates nothing
    if (__builtin_mul_overflow(n, *v, &n)) return -1;
  }
  return n;
}

[[noreturn]] void fail_too_big(const char* op, const std::string& what, c10::SymIntArrayRef dims,
                               c10::ScalarType dtype, int64_t bytes) {
  TORCH_CHECK_VALUE(false, op, ": ", what, " of shape ", dims_str(dims), " and dtype ", dtype_name(dtype), " would take ",
                    bytes < 0 ? std::string("more than 2^63 bytes") : bytes_str(bytes), ", over the limit of ",
                    bytes_str(kMaxTensorBytes), " for one tensor (tileops::check::kMaxTensorBytes); split the call");
}

}  // namespace

uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, std::optional<c10::IntArrayRef> dims, bool listed) {
  TORCH_CHECK_INDEX(ndim <= 64, op, ": '", arg, "' reduces a tensor of ", ndim, " dims; at most 64 are supported");
  const uint64_t all = ndim == 64 ? ~uint64_t{0} : (uint64_t{1} << ndim) - 1;
  if (!dims.has_value() || (dims->empty() && !listed)) return all;
  const int64_t range = std::max<int64_t>(ndim, 1);  // a 0-dim tensor takes dim 0 or -1, as in torch
  uint64_t mask = 0;
  for (int64_t d : *dims) {
    TORCH_CHECK_INDEX(d >= -range && d < range, op, ": '", arg, "' dim ", d, " is out of range [", -range, ", ",
                      range - 1, "] for a tensor of ", ndim, " dims");
    const int64_t w = d < 0 ? d + range : d;
    const uint64_t bit = ndim == 0 ? 0 : uint64_t{1} << w;
    TORCH_CHECK_VALUE(ndim == 0 || !(mask & bit), op, ": '", arg, "' names dim ", w, " more than once");
    mask |= bit;
  }
  return mask;
}

uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, int64_t dim, bool listed) {
  return reduce_mask(op, arg, ndim, std::optional<c10::IntArrayRef>(c10::IntArrayRef(dim)), listed);
}

uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, std::optional<int64_t> dim, bool listed) {
  if (!dim.has_value()) return reduce_mask(op, arg, ndim, std::optional<c10::IntArrayRef>(), listed);
  return reduce_mask(op, arg, ndim, *dim, listed);
}

uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, c10::SymIntArrayRef dims, bool listed) {
  // Dims are graph constants; a trace under dynamic shapes may still hand them over as symbols.
  c10::SmallVector<int64_t, 8> ints;
  for (const c10::SymInt& d : dims) ints.push_back(d.guard_int(__FILE__, __LINE__));
  return reduce_mask(op, arg, ndim, std::optional<c10::IntArrayRef>(c10::IntArrayRef(ints)), listed);
}

uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, at::OptionalSymIntArrayRef dims, bool listed) {
  if (!dims.has_value()) return reduce_mask(op, arg, ndim, std::optional<c10::IntArrayRef>(), listed);
  return reduce_mask(op, arg, ndim, *dims, listed);
}

c10::SmallVector<c10::SymInt, 8> reduced_shape(c10::SymIntArrayRef sizes, uint64_t mask, bool keepdim) {
  c10::SmallVector<c10::SymInt, 8> out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!(mask >> d & 1)) out.push_back(sizes[d]);
    else if (keepdim) out.push_back(c10::SymInt(1));
  }
  return out;
}

c10::SymInt sym_prod(c10::SymIntArrayRef dims) {
  c10::SymInt p = 1;
  for (const auto& d : dims) p = p * d;
  return p;
}

c10::SymInt sym_is_pow2(const c10::SymInt& x) {
  const int64_t v = x.guard_int(__FILE__, __LINE__);
  return c10::SymInt(int64_t{v > 0 && (v & (v - 1)) == 0});
}

c10::SymInt sym_ilog2(const c10::SymInt& x) {
  int64_t v = x.guard_int(__FILE__, __LINE__), r = 0;
  while (v > 1) {
    v >>= 1;
    ++r;
  }
  return c10::SymInt(r);
}

c10::ScalarType promote_int_to_float(c10::ScalarType t) {
  return c10::isFloatingType(t) ? t : c10::ScalarType::Float;
}

c10::ScalarType promote_int_to_long(c10::ScalarType t) {
  return c10::isIntegralType(t, /*includeBool=*/true) ? c10::ScalarType::Long : t;
}

c10::ScalarType promote(std::initializer_list<const at::Tensor*> tensors) {
  at::native::ResultTypeState state;
  for (const at::Tensor* t : tensors) state = at::native::update_result_type_state(*t, state);
  return at::native::result_type(state);
}

c10::SymDimVector broadcast_shapes(const char* op, std::initializer_list<const char*> names,
                                   std::initializer_list<c10::SymIntArrayRef> shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  c10::SymDimVector out(rank, c10::SymInt(1));
  std::vector<const char*> owner(rank, nullptr);  // the input that set each dim (for the message)
  auto name = names.begin();
  for (const auto& s : shapes) {
    for (size_t k = 0; k < s.size(); ++k) {
      const size_t d = rank - s.size() + k;
      if (s[k] == 1) continue;
      if (out[d] == 1) {
        out[d] = s[k];
        owner[d] = *name;
      } else if (out[d] != s[k]) {
        TORCH_CHECK_VALUE(false, op, ": '", owner[d], "' and '", *name, "' do not broadcast: dim ",
                          static_cast<int64_t>(d) - static_cast<int64_t>(rank), " is ", sym_str(out[d]), " vs ",
                          sym_str(s[k]), " (shapes must be equal or 1 in each dim, aligned from the last)");
      }
    }
    ++name;
  }
  return out;
}

void require_broadcast_into(const char* op, const char* arg, const at::Tensor& t, c10::SymIntArrayRef shape) {
  TORCH_CHECK_VALUE(t.sym_sizes() == shape, op, ": '", arg, "' is written in place, so the broadcast of the inputs ",
                    dims_str(shape), " must have its shape ", dims_str(t.sym_sizes()),
                    "; use the out-of-place op");
}

void require_can_cast(const char* op, const char* arg, const at::Tensor& t, c10::ScalarType result) {
  TORCH_CHECK_TYPE(at::canCast(result, t.scalar_type()), op, ": '", arg, "' is written in place, but the result ",
                   "type ", dtype_name(result), " cannot be cast to its dtype ", dtype_name(t.scalar_type()),
                   "; use the out-of-place op");
}

ParamValue scalar_value(const at::Scalar& v) {
  if (v.isBoolean()) return ParamValue::boolean(v.toBool());
  if (v.isIntegral(false)) return ParamValue::integer(v.toLong());
  TORCH_CHECK_TYPE(v.isFloatingPoint(), "tileops: complex and symbolic numbers are not supported as Scalar params");
  return ParamValue::real(v.toDouble());
}

void require_result_dtype(const char* op, const char* output, c10::ScalarType result,
                          std::initializer_list<c10::ScalarType> allowed, const char* rule) {
  for (auto a : allowed)
    if (a == result) return;
  TORCH_CHECK_TYPE(false, op, ": output '", output, "' would have dtype ", dtype_name(result), ", but its rule ", rule,
                   " allows only those dtypes");
}

void require_along(const char* op, const char* arg, const at::Tensor& t, const char* ref_name, const at::Tensor& ref,
                   int64_t dim) {
  TORCH_CHECK_VALUE(t.dim() <= 1, op, ": '", arg, "' must be a 0-dim or 1-D tensor broadcast along dim ", dim, " of '",
                    ref_name, "' (along(", ref_name, ", ", dim, ")), got shape ", dims_str(t.sym_sizes()));
  if (t.sym_numel() == 1) return;
  TORCH_CHECK_VALUE(ref.dim() > dim, op, ": '", arg, "' has ", sym_str(t.sym_numel()), " elements, but '", ref_name,
                    "' of shape ", dims_str(ref.sym_sizes()), " has no dim ", dim,
                    " to broadcast along: give it 1 element (along(", ref_name, ", ", dim, "))");
  TORCH_CHECK_VALUE(t.sym_numel() == ref.sym_size(dim), op, ": '", arg, "' must have 1 element or ", ref_name,
                    ".size(", dim, ") = ", sym_str(ref.sym_size(dim)), " elements (along(", ref_name, ", ", dim,
                    ")), got ", sym_str(t.sym_numel()));
}

at::Tensor along_view(const at::Tensor& t, int64_t ref_ndim, int64_t dim) {
  if (t.numel() == 1) return t.reshape({});
  at::Tensor v = t.reshape({-1});  // a view: t has at most one dim
  for (int64_t k = dim + 1; k < ref_ndim; ++k) v = v.unsqueeze(-1);
  return v;
}

at::Tensor broadcast_reduced_once(const at::Tensor& t, uint64_t mask) {
  c10::SmallVector<int64_t, 8> sizes(t.sizes().begin(), t.sizes().end());
  bool any = false;
  for (size_t d = 0; d < sizes.size() && d < 64; ++d) {
    if ((mask >> d & 1) && t.stride(static_cast<int64_t>(d)) == 0 && sizes[d] > 1) {
      sizes[d] = 1;
      any = true;
    }
  }
  return any ? t.as_strided(sizes, t.strides(), t.storage_offset()) : t;
}

std::string describe(const char* name, c10::SymIntArrayRef dims) {
  return std::string(" (") + name + "=" + dims_str(dims) + ")";
}

std::string describe(const char* name, const c10::SymInt& v) {
  return std::string(" (") + name + "=" + sym_str(v) + ")";
}

void require_strided(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK(t.defined(), op, ": '", arg, "' is required, got an undefined tensor");
  TORCH_CHECK(t.layout() == c10::kStrided, op, ": '", arg, "' must be a strided (dense) tensor, got layout ",
              t.layout());
}

void require_dtype(const char* op, const char* arg, const at::Tensor& t, std::initializer_list<c10::ScalarType> allowed,
                   const char* rule) {
  const auto dt = t.scalar_type();
  for (auto a : allowed)
    if (a == dt) return;
  TORCH_CHECK_TYPE(false, op, ": '", arg, "' must have dtype ", rule, ", got ", dtype_name(dt));
}

void require_same_dtype(const char* op, const char* arg, const at::Tensor& t, const char* ref_name, const at::Tensor& ref) {
  TORCH_CHECK_TYPE(t.scalar_type() == ref.scalar_type(), op, ": '", arg, "' must have the dtype of '", ref_name,
                   "' (same_as(", ref_name, ") = ", dtype_name(ref.scalar_type()), "), got ", dtype_name(t.scalar_type()));
}

void require_same_device(const char* op, const char* arg, const at::Tensor& t, const char* ref_name, const at::Tensor& ref) {
  TORCH_CHECK(t.device() == ref.device(), op, ": '", arg, "' must be on the device of '", ref_name, "' (",
              ref.device(), "), got ", t.device());
}

void require_choice(const char* op, const char* arg, int64_t v, std::initializer_list<int64_t> allowed, const char* rule) {
  for (auto a : allowed)
    if (a == v) return;
  TORCH_CHECK_VALUE(false, op, ": '", arg, "' must be one of ", rule, ", got ", v);
}

void require_choice(const char* op, const char* arg, c10::string_view v, std::initializer_list<const char*> allowed,
                    const char* rule) {
  for (auto a : allowed)
    if (v == a) return;
  TORCH_CHECK_VALUE(false, op, ": '", arg, "' must be one of ", rule, ", got '", std::string(v), "'");
}

void require_choice(const char* op, const char* arg, c10::ScalarType v, std::initializer_list<c10::ScalarType> allowed,
                    const char* rule) {
  for (auto a : allowed)
    if (a == v) return;
  TORCH_CHECK_VALUE(false, op, ": '", arg, "' must be one of ", rule, ", got ", dtype_name(v));
}

void require_out_like(const char* op, const at::Tensor& out, const at::Tensor& ref, c10::SymIntArrayRef shape,
                      c10::ScalarType dtype) {
  require_strided(op, "out", out);
  TORCH_CHECK(out.device() == ref.device(), op, ": 'out' must be on ", ref.device(), ", got ", out.device());
  TORCH_CHECK_TYPE(out.scalar_type() == dtype, op, ": 'out' must have dtype ", dtype_name(dtype), ", got ",
                   dtype_name(out.scalar_type()));
  TORCH_CHECK(out.sym_sizes() == shape, op, ": 'out' must have shape ", dims_str(shape), ", got ",
              dims_str(out.sym_sizes()));
}

bool is_real(const at::Tensor& t) {
  constexpr c10::DispatchKeySet kTracing({c10::DispatchKey::Python, c10::DispatchKey::Functionalize,
                                          c10::DispatchKey::PythonTLSSnapshot});
  return !t.is_meta() && !t.key_set().has_any(kTracing) && !t.unsafeGetTensorImpl()->has_symbolic_sizes_strides();
}

namespace {

overlap::Layout layout_of(const at::Tensor& t) {
  const int64_t item = static_cast<int64_t>(t.element_size());
  overlap::Layout l{t.storage_offset() * item, t.sizes().vec(), t.strides().vec(), item};
  for (auto& s : l.strides) s *= item;
  return l;
}

}  // namespace

void require_no_internal_overlap(const char* op, const char* arg, const at::Tensor& t) {
  // ATen decides dense views and expanded ones; any other layout is searched (overlap.h), and one
  // the search cannot settle counts as overlapping: a write through it could be silently wrong.
  const auto quick = at::has_internal_overlap(t);
  const auto exact = quick == at::MemOverlap::Yes    ? overlap::Answer::kYes
                     : quick == at::MemOverlap::No   ? overlap::Answer::kNo
                                                     : overlap::self_overlap(layout_of(t));
  TORCH_CHECK(exact == overlap::Answer::kNo, op, ": '", arg,
              "' is written, but ", exact == overlap::Answer::kYes ? "some of its elements share" :
              "its elements cannot be shown not to share", " one memory location (an expanded or overlapping "
              "view, sizes ", t.sizes(), ", strides ", t.strides(), "); pass a tensor that owns its elements, e.g. ",
              arg, ".clone()");
}

void require_no_overlap(const char* op, const char* arg, const at::Tensor& t, const char* other_name,
                        const at::Tensor& other) {
  const auto status = at::get_overlap_status(t, other);
  bool shares = status == at::MemOverlapStatus::Full || status == at::MemOverlapStatus::Partial;
  // "Too hard" is any non-dense view (k = q[:, :2]); within one allocation search it, else no overlap.
  if (status == at::MemOverlapStatus::TooHard && t.has_storage() && other.has_storage() &&
      t.storage().is_alias_of(other.storage()))
    shares = overlap::overlap(layout_of(t), layout_of(other)) != overlap::Answer::kNo;
  TORCH_CHECK(!shares, op, ": '", arg,
              "' is written and shares memory with '", other_name,
              "' (written tensors must not overlap any other argument: the result would depend on the order "
              "of reads and writes); pass separate tensors, e.g. ", other_name, ".clone()");
}

void require_alloc_fits(const char* op, const char* what, c10::SymIntArrayRef shape, c10::ScalarType dtype) {
  const int64_t bytes = checked_bytes(shape, static_cast<int64_t>(c10::elementSize(dtype)));
  if (bytes < 0 || bytes > kMaxTensorBytes) fail_too_big(op, what, shape, dtype, bytes);
}

void require_copy_fits(const char* op, const char* arg, const at::Tensor& t) {
  if (t.is_contiguous()) return;
  const int64_t bytes = checked_bytes(t.sym_sizes(), static_cast<int64_t>(t.element_size()));
  if (bytes < 0 || bytes > kMaxTensorBytes)
    fail_too_big(op, std::string("the contiguous copy of non-contiguous '") + arg + "'", t.sym_sizes(),
                 t.scalar_type(), bytes);
}

void require_device_available(const char* op, const char* arg, const c10::Device& d) {
  if (!d.is_cuda()) return;
  const int64_t count = c10::cuda::device_count();
  TORCH_CHECK(count > 0, op, ": '", arg, "' is ", d, ", but this process sees no CUDA device (no GPU, driver or "
              "CUDA_VISIBLE_DEVICES); pass device='cpu' or 'meta'");
  TORCH_CHECK(!d.has_index() || d.index() < count, op, ": '", arg, "' is ", d, ", but this process sees ", count,
              " CUDA device", count == 1 ? "" : "s");
}

void rethrow_naming(const char* op) {
  const c10::SourceLocation here{__func__, __FILE__, static_cast<uint32_t>(__LINE__)};
  try {
    throw;
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    if (msg.rfind(op, 0) == 0) throw;
    const std::string named = std::string(op) + ": " + msg;
    if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) throw c10::OutOfMemoryError(here, named);
    if (dynamic_cast<const c10::IndexError*>(&e)) throw c10::IndexError(here, named);
    if (dynamic_cast<const c10::ValueError*>(&e)) throw c10::ValueError(here, named);
    if (dynamic_cast<const c10::TypeError*>(&e)) throw c10::TypeError(here, named);
    if (dynamic_cast<const c10::NotImplementedError*>(&e)) throw c10::NotImplementedError(here, named);
    if (auto* a = dynamic_cast<const c10::AcceleratorError*>(&e))
      throw c10::AcceleratorError(here, a->get_error_code(), named);
    throw c10::Error(here, named);
  } catch (const std::bad_alloc&) {
    throw c10::OutOfMemoryError(here, std::string(op) + ": out of host memory (std::bad_alloc)");
  }
  // Anything else (a Python exception crossing C++, e.g. from a symbolic shape) keeps its identity.
}

void fail_shape(const char* op, const char* arg, const char* spec, const std::string& where, c10::SymIntArrayRef got) {
  TORCH_CHECK(false, op, ": '", arg, "' must have shape ", spec, where, ", got ", dims_str(got));
}

void fail_same_shape(const char* op, const char* arg, const at::Tensor& t, const char* ref_name, const at::Tensor& ref) {
  TORCH_CHECK(false, op, ": '", arg, "' must have the shape of '", ref_name, "' ", dims_str(ref.sym_sizes()), ", got ",
              dims_str(t.sym_sizes()));
}

void fail_rule(const char* op, const char* rule, const c10::SymInt& lhs, const c10::SymInt& rhs,
               const std::string& values) {
  TORCH_CHECK_VALUE(false, op, ": shape rule '", rule, "' is violated (left side ", sym_str(lhs), ", right side ",
                    sym_str(rhs), ")", values.empty() ? "" : " with ", values);
}

void fail_param_rule(const char* op, const char* names, const char* rule, const std::string& values) {
  // a rule over shapes alone (ndim(input) == 3 or C > 0) names no params
  TORCH_CHECK_VALUE(*names != '\0', op, ": shape rule '", rule, "' is violated");
  TORCH_CHECK_VALUE(false, op, ": params (", names, ") break the rule '", rule, "'; got ", values);
}

std::string describe_param(const char* name, const std::optional<at::Scalar>& v) {
  if (!v.has_value()) return std::string(name) + "=None";
  if (v->isBoolean()) return std::string(name) + "=" + (v->toBool() ? "True" : "False");
  if (v->isIntegral(false)) return std::string(name) + "=" + std::to_string(v->toLong());
  std::ostringstream s;
  s << name << "=" << v->toDouble();
  return s.str();
}

std::string describe_param(const char* name, const std::optional<double>& v) {
  return std::string(name) + "=" + (v.has_value() ? std::to_string(*v) : std::string("None"));
}

std::string describe_param(const char* name, double v) { return std::string(name) + "=" + c10::str(v); }

std::string describe_param(const char* name, const std::optional<c10::string_view>& v) {
  return std::string(name) + "=" + (v.has_value() ? "'" + std::string(*v) + "'" : std::string("None"));
}

std::string describe_param(const char* name, const c10::SymInt& v) { return std::string(name) + "=" + sym_str(v); }

std::string describe_param(const char* name, int64_t v) { return std::string(name) + "=" + std::to_string(v); }
std::string describe_param(const char* name, const std::optional<int64_t>& v) {
  return v.has_value() ? describe_param(name, *v) : std::string(name) + "=None";
}

namespace {
constexpr int64_t kMaxPoolParam = (int64_t{1} << 31) - 1;
// Pooling params are graph constants: a symbolic one is specialised, as torch's own pooling does.
int64_t pool_int(c10::SymIntArrayRef v, int64_t j) {
  return v[v.size() == 1 ? 0 : static_cast<size_t>(j)].guard_int(__FILE__, __LINE__);
}

void require_pool_input(const char* op, const char* input, c10::SymIntArrayRef sizes, int64_t rank,
                        int64_t first_nonempty) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  TORCH_CHECK(ndim == rank + 1 || ndim == rank + 2, op, ": '", input, "' must have ", rank + 1, " dims (unbatched) or ",
              rank + 2, " (batched), got ", dims_str(sizes));
  for (int64_t d = std::max<int64_t>(first_nonempty, ndim == rank + 2 ? 1 : 0); d < ndim; ++d)
    TORCH_CHECK(sizes[d] != 0, op, ": '", input, "' must not be empty in dim ", d,
                " (only a batched input's first dim may be 0), got ", dims_str(sizes));
}
}  // namespace

c10::SymIntArrayRef sym_ints(const char* op, const char* arg, c10::IntArrayRef v) {
  for (const int64_t i : v)
    TORCH_CHECK(c10::SymInt::check_range(i), op, ": argument '", arg, "' must hold ints above -2^62, got ", v);
  return c10::fromIntArrayRefSlow(v);
}

c10::SymDimVector pool_shape(const char* op, const char* input, c10::SymIntArrayRef sizes, int64_t rank,
                             std::array<const char*, 4> names, std::array<c10::SymIntArrayRef, 4> lists,
                             bool ceil_mode) {
  for (size_t i = 0; i < lists.size(); ++i) {
    if (names[i] == nullptr) continue;
    const size_t n = lists[i].size();
    const bool ok = n == 1 || n == static_cast<size_t>(rank) || (i == 1 && n == 0);  // stride None or []: kernel_size
    TORCH_CHECK(ok, op, ": argument '", names[i], "' must be a single int", rank > 1 ? " or " : "",
                rank > 1 ? std::to_string(rank) + " ints" : std::string(), i == 1 ? " (or None)" : "", ", got ",
                dims_str(lists[i]));
  }
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  require_pool_input(op, input, sizes, rank, 0);
  c10::SymDimVector out(sizes.begin(), sizes.end() - rank);
  for (int64_t j = 0; j < rank; ++j) {
    const int64_t k = pool_int(lists[0], j);
    const int64_t s = lists[1].empty() ? k : pool_int(lists[1], j);
    const int64_t p = pool_int(lists[2], j);
    const int64_t d = names[3] == nullptr ? 1 : pool_int(lists[3], j);
    TORCH_CHECK(k > 0, op, ": argument '", names[0], "' must be positive, got ", dims_str(lists[0]));
    TORCH_CHECK(s > 0, op, ": argument '", names[1], "' must be positive (None: kernel_size), got ", dims_str(lists[1]));
    TORCH_CHECK(p >= 0, op, ": argument '", names[2], "' must be non-negative, got ", dims_str(lists[2]));
    if (names[3] != nullptr)
      TORCH_CHECK(d > 0, op, ": argument '", names[3], "' must be positive, got ", dims_str(lists[3]));
    // Below 2^31, as torch's pooling takes them (int), so d(k-1) + s stays in int64 (2^63-1 wrapped).
    const std::array<int64_t, 4> values{k, s, p, d};  // an absent stride is k, an absent dilation 1
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] != nullptr)
        TORCH_CHECK(values[i] <= kMaxPoolParam, op, ": argument '", names[i], "' must be below 2^31, got ",
                    dims_str(lists[i]));
    TORCH_CHECK(p <= k / 2, op, ": argument '", names[2], "' must be at most half of '", names[0], "' (padding <= ",
                "kernel_size // 2), got ", names[2], "=", dims_str(lists[2]), ", ", names[0], "=", dims_str(lists[0]));
    const c10::SymInt& L = sizes[ndim - rank + j];
    // (L + 2p - d(k-1) - 1 + (s-1 if ceil)) // s + 1; a negative numerator gives an output below 1.
    const c10::SymInt num = L + (2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0));
    c10::SymInt o = num < 0 ? c10::SymInt(0) : num / s + 1;
    // torch: the last window starts inside the input or its left padding.
    if (ceil_mode && o > 0 && (o - 1) * s >= L + p) o = o - 1;
    TORCH_CHECK(o >= 1, op, ": output size is too small: '", input, "' of shape ", dims_str(sizes), " with ", names[0],
                "=", dims_str(lists[0]), ", ", names[1], "=", dims_str(lists[1]), ", ", names[2], "=",
                dims_str(lists[2]), names[3] ? std::string(", ") + names[3] + "=" + dims_str(lists[3]) : std::string(),
                " gives ", sym_str(o), " in spatial dim ", j, " (each output dim must be >= 1)");
    out.push_back(o);
  }
  return out;
}

c10::SymDimVector adaptive_pool_shape(const char* op, const char* input, c10::SymIntArrayRef sizes, int64_t rank,
                                      const char* output_size_name, c10::SymIntArrayRef output_size) {
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == rank, op, ": argument '", output_size_name, "' must have ",
              rank, " elements, got ", dims_str(output_size));
  for (const auto& o : output_size)
    TORCH_CHECK(o >= 0, op, ": argument '", output_size_name, "' must be >= 0 in every dim, got ",
                dims_str(output_size));
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  require_pool_input(op, input, sizes, rank, ndim - rank);
  c10::SymDimVector out(sizes.begin(), sizes.end() - rank);
  out.append(output_size.begin(), output_size.end());
  return out;
}

c10::SymDimVector conv_shape(const char* op, const char* input, c10::SymIntArrayRef sizes, const char* weight,
                             c10::SymIntArrayRef weight_sizes, int64_t rank, std::array<const char*, 3> names,
                             std::array<c10::SymIntArrayRef, 3> lists, const char* padding_str_name,
                             std::optional<c10::string_view> padding_str) {
  for (size_t i = 0; i < lists.size(); ++i) {
    const size_t n = lists[i].size();
    TORCH_CHECK(n == 1 || n == static_cast<size_t>(rank), op, ": argument '", names[i], "' must be a single int",
                rank > 1 ? " or " + std::to_string(rank) + " ints" : std::string(), ", got ", dims_str(lists[i]));
  }
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  TORCH_CHECK(ndim == rank + 1 || ndim == rank + 2, op, ": '", input, "' must have ", rank + 1,
              " dims (unbatched) or ", rank + 2, " (batched), got ", dims_str(sizes));
  TORCH_CHECK(static_cast<int64_t>(weight_sizes.size()) == rank + 2, op, ": '", weight, "' must have ", rank + 2,
              " dims, got ", dims_str(weight_sizes));
  const bool same = padding_str.has_value() && *padding_str == "same";
  c10::SymDimVector out(sizes.begin(), sizes.end() - rank - 1);  // the batch dim, when there is one
  out.push_back(weight_sizes[0]);
  for (int64_t j = 0; j < rank; ++j) {
    const int64_t s = pool_int(lists[0], j), p = pool_int(lists[1], j), d = pool_int(lists[2], j);
    TORCH_CHECK(s > 0, op, ": argument '", names[0], "' must be positive, got ", dims_str(lists[0]));
    TORCH_CHECK(p >= 0, op, ": argument '", names[1], "' must be non-negative, got ", dims_str(lists[1]));
    TORCH_CHECK(d > 0, op, ": argument '", names[2], "' must be positive, got ", dims_str(lists[2]));
    // Below 2^31, so L + 2p and the output size stay far inside int64 whatever the input.
    const std::array<int64_t, 3> values{s, p, d};
    for (size_t i = 0; i < names.size(); ++i)
      TORCH_CHECK(values[i] <= kMaxPoolParam, op, ": argument '", names[i], "' must be below 2^31, got ",
                  dims_str(lists[i]));
    if (padding_str.has_value())
      TORCH_CHECK(p == 0, op, ": argument '", names[1], "' must be 0 when '", padding_str_name, "' is given (",
                  padding_str_name, "='", *padding_str, "'), got ", dims_str(lists[1]));
    if (same)
      TORCH_CHECK(s == 1, op, ": ", padding_str_name, "='same' needs '", names[0],
                  "' 1 in every dim (torch: not supported for strided convolutions), got ", dims_str(lists[0]));
    const c10::SymInt& L = sizes[ndim - rank + j];
    const c10::SymInt& k = weight_sizes[2 + j];
    TORCH_CHECK(k >= 1, op, ": '", weight, "' must have kernel dims >= 1, got ", dims_str(weight_sizes));
    TORCH_CHECK(L >= 1, op, ": '", input, "' must not be empty in spatial dim ", j, ", got ", dims_str(sizes));
    if (same) {  // torch pads d(k - 1) in all, the odd one on the right: L outputs
      out.push_back(L);
      continue;
    }
    // torch: the dilated kernel d(k - 1) + 1 fits the padded input L + 2p; written k - 1 <= (L + 2p - 1) // d,
    // so a huge kernel or dilation cannot overflow the product.
    TORCH_CHECK(k - 1 <= (L + 2 * p - 1) / d, op, ": the dilated kernel is larger than the padded input in spatial dim ",
                j, ": '", input, "' of shape ", dims_str(sizes), ", '", weight, "' of shape ", dims_str(weight_sizes),
                ", ", names[1], "=", dims_str(lists[1]), ", ", names[2], "=", dims_str(lists[2]),
                " (need dilation * (kernel - 1) + 1 <= size + 2 * padding)");
    out.push_back((L + 2 * p - d * (k - 1) - 1) / s + 1);
  }
  return out;
}

std::string describe_param(const char* name, bool v) { return std::string(name) + (v ? "=True" : "=False"); }

void fail_argument_rule(const char* op, const char* names, const char* rule, const std::string& values) {
  TORCH_CHECK_VALUE(false, op, ": arguments (", names, ") break the rule '", rule, "'; got ", values);
}

std::string describe_input(const char* name, const at::Tensor& t) {
  return std::string(name) + "=Tensor" + dims_str(t.sym_sizes());
}

std::string describe_input(const char* name, const std::optional<at::Tensor>& t) {
  return present(t) ? describe_input(name, *t) : std::string(name) + "=None";
}

void fail_dtype_combo(const char* op, const char* names, const char* allowed,
                      std::initializer_list<c10::ScalarType> got) {
  std::string dtypes;
  for (auto dt : got) {
    if (!dtypes.empty()) dtypes += ", ";
    dtypes += dt == c10::ScalarType::Undefined ? "none" : dtype_name(dt);  // none: an absent optional input
  }
  TORCH_CHECK_TYPE(false, op, ": the dtypes of (", names, ") must be one of the combinations ", allowed,
                   " (dtype_combos), got (", dtypes, ")");
}

}  // namespace tileops::check
