#include "boundary/checks.h"

#include <c10/util/Exception.h>

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
    case c10::ScalarType::ComplexFloat: return "complex64";  // torch's names for dtypes no manifest takes
    case c10::ScalarType::ComplexDouble: return "complex128";
    default: return c10::toString(t);
  }
}

// Not `os << symint`: that operator crashed inside libc10 on torch 2.11 (seen on an H200 machine).
std::string sym_str(const c10::SymInt& v) {
  if (auto i = v.maybe_as_int()) return std::to_string(*i);
  return v.toSymNodeImplUnowned()->str();
}

std::string dims_str(c10::SymIntArrayRef dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + sym_str(dims[i]);
  return out + "]";
}

}  // namespace

c10::SymInt sym_prod(c10::SymIntArrayRef dims) {
  c10::SymInt p = 1;
  for (const auto& d : dims) p = p * d;
  return p;
}

c10::ScalarType promote_int_to_float(c10::ScalarType t) {
  return c10::isFloatingType(t) ? t : c10::ScalarType::Float;
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

void fail_shape(const char* op, const char* arg, const char* spec, const std::string& where, c10::SymIntArrayRef got) {
  TORCH_CHECK(false, op, ": '", arg, "' must have shape ", spec, where, ", got ", dims_str(got));
}

void fail_same_shape(const char* op, const char* arg, const at::Tensor& t, const char* ref_name, const at::Tensor& ref) {
  TORCH_CHECK(false, op, ": '", arg, "' must have the shape of '", ref_name, "' ", dims_str(ref.sym_sizes()), ", got ",
              dims_str(t.sym_sizes()));
}

void fail_rule(const char* op, const char* rule, const c10::SymInt& lhs, const c10::SymInt& rhs) {
  TORCH_CHECK_VALUE(false, op, ": shape rule '", rule, "' is violated (left side ", sym_str(lhs), ", right side ",
                    sym_str(rhs), ")");
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
