// The one family of argument-check helpers the generated code calls. Every failure is a c10::Error
// naming the operator, the argument and the manifest rule it broke, e.g.
//   tileops::norm_rms_norm_fwd: 'weight' must have shape [*normalized_shape] (normalized_shape=[4096]), got [4095]
// Checks are SymInt-aware so the same code runs in the Meta kernel under dynamic shapes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/SmallVector.h>
#include <ATen/core/DimVector.h>

#include "tileops/op_call.h"

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

namespace tileops::check {

inline bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

template <size_t N>
bool all_empty(const std::array<at::Tensor, N>& outs) {
  for (const auto& t : outs)
    if (t.defined() && t.sym_numel() != 0) return false;
  return true;
}

// The most bytes one output or one contiguous copy of an input may take (docs/DESIGN.md, "Refusals before any work"):
// far above every workload in the manifests, and low enough that a mistyped size is refused at once
// instead of taking a quarter of an H200 or the host's memory. Larger work: split the call.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 35;  // 32 GiB

c10::SymInt sym_prod(c10::SymIntArrayRef dims);
// Manifest is_pow2(x) / ilog2(x): 1 or 0, and floor(log2(x)) (0 below 1). The value is guarded
// (a symbolic size is specialised: a power-of-two rule is not an affine guard).
c10::SymInt sym_is_pow2(const c10::SymInt& x);
c10::SymInt sym_ilog2(const c10::SymInt& x);
c10::ScalarType promote_int_to_float(c10::ScalarType t);
// torch.sum/cumsum's result dtype without dtype=: integer and bool inputs accumulate into int64.
c10::ScalarType promote_int_to_long(c10::ScalarType t);
// torch.result_type of the tensors (0-dim tensors count only where they raise the category).
c10::ScalarType promote(std::initializer_list<const at::Tensor*> tensors);
// torch.broadcast_shapes of the named inputs' shapes, or an error naming the two that do not broadcast.
c10::SymDimVector broadcast_shapes(const char* op, std::initializer_list<const char*> names,
                                   std::initializer_list<c10::SymIntArrayRef> shapes);
// In place: the broadcast result must have the written input's shape, and its dtype must cast into it.
void require_broadcast_into(const char* op, const char* arg, const at::Tensor& t, c10::SymIntArrayRef shape);
void require_can_cast(const char* op, const char* arg, const at::Tensor& t, c10::ScalarType result);
// A Scalar param as the caller passed it: an Int, Real or Bool param value.
ParamValue scalar_value(const at::Scalar& v);

// An op's result type `result` (an output's promote(...) rule `rule`) must be one of `allowed`.
void require_result_dtype(const char* op, const char* output, c10::ScalarType result,
                          std::initializer_list<c10::ScalarType> allowed, const char* rule);
// along(<input>, dim): `t` is 0-dim or 1-D with 1 element or ref.size(dim) elements.
void require_along(const char* op, const char* arg, const at::Tensor& t, const char* ref_name, const at::Tensor& ref,
                   int64_t dim);
// The same elements viewed so that they broadcast along `dim` of a tensor of rank `ref_ndim` (one
// element: 0-dim; else [n, 1, ..., 1] with ref_ndim - 1 - dim trailing ones).
at::Tensor along_view(const at::Tensor& t, int64_t ref_ndim, int64_t dim);

// t with each dim in `mask` that it broadcasts (stride 0, more than one element) viewed as one element:
// for a reduction that repeats cannot change (all, any, amax, amin), so a broadcast input is not copied
// out whole before it is reduced (manifest `reduced_once`).
at::Tensor broadcast_reduced_once(const at::Tensor& t, uint64_t mask);

std::string describe(const char* name, c10::SymIntArrayRef dims);
std::string describe(const char* name, const c10::SymInt& v);

// The dims of a tensor of rank `ndim` that `dims` reduces, as a bit mask (bit d: dim d), checked like
// torch's: each in [-max(ndim, 1), max(ndim, 1)) (an IndexError otherwise) and none named twice. None
// reduces every dim; so does an empty list unless `listed` (torch.all/any: then none).
uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, std::optional<c10::IntArrayRef> dims, bool listed);
uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, int64_t dim, bool listed);
uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, std::optional<int64_t> dim, bool listed);
uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, c10::SymIntArrayRef dims, bool listed);
uint64_t reduce_mask(const char* op, const char* arg, int64_t ndim, at::OptionalSymIntArrayRef dims, bool listed);
// `sizes` without the dims in `mask`, or with them as 1 when keepdim.
c10::SmallVector<c10::SymInt, 8> reduced_shape(c10::SymIntArrayRef sizes, uint64_t mask, bool keepdim);

// An int[N] param as SymInts; a value c10 cannot hold as one (below -2^62) is refused naming the op.
c10::SymIntArrayRef sym_ints(const char* op, const char* arg, c10::IntArrayRef v);

// A pool(...) output shape (torch.nn.functional.{avg,max}_pool{1,2,3}d): the input's leading dims, then
// per spatial dim (L + 2p - d(k - 1) - 1 + (s - 1 if ceil_mode)) // s + 1, less one when ceil_mode
// starts the last window past the input and its left padding. `lists`: kernel_size, stride (empty:
// kernel_size), padding, dilation (empty with names[3] == nullptr: the op has none, 1); one element
// stands for every dim. Refuses, as torch does (RuntimeError naming op and argument): lists of
// another length, an input of neither rank + 1 nor rank + 2 dims or with an empty dim other than a
// batch, kernel_size/stride/dilation < 1, padding < 0 or > kernel_size / 2, an output dim < 1.
c10::SymDimVector pool_shape(const char* op, const char* input, c10::SymIntArrayRef sizes, int64_t rank,
                             std::array<const char*, 4> names, std::array<c10::SymIntArrayRef, 4> lists,
                             bool ceil_mode);
// An adaptive_pool(...) output shape: the input's leading dims, then output_size (each >= 0, `rank` of
// them). The input has rank + 1 or rank + 2 dims, its spatial dims non-empty.
c10::SymDimVector adaptive_pool_shape(const char* op, const char* input, c10::SymIntArrayRef sizes, int64_t rank,
                                      const char* output_size_name, c10::SymIntArrayRef output_size);

// A conv(...) output shape (torch.nn.functional.conv{1,2,3}d): the input's batch dim (none when it is
// unbatched, rank + 1 dims), weight.size(0), then per spatial dim (L + 2p - d(k - 1) - 1) // s + 1 with
// k = weight.size(2 + j), or L with padding_str 'same'. `lists`: stride, padding, dilation; one element
// stands for every dim. Refuses (RuntimeError naming op and argument) what torch refuses: lists of
// another length, an input of neither rank + 1 nor rank + 2 dims, stride or dilation < 1, padding < 0,
// a dilated kernel d(k - 1) + 1 larger than the padded input L + 2p, 'same' with a stride other than 1;
// and, where torch fails without a message or answers inconsistently, an empty spatial dim, a kernel dim
// < 1, params from 2^31, a padding other than 0 beside padding_str.
c10::SymDimVector conv_shape(const char* op, const char* input, c10::SymIntArrayRef sizes, const char* weight,
                             c10::SymIntArrayRef weight_sizes, int64_t rank, std::array<const char*, 3> names,
                             std::array<c10::SymIntArrayRef, 3> lists, const char* padding_str_name,
                             std::optional<c10::string_view> padding_str);

void require_strided(const char* op, const char* arg, const at::Tensor& t);
void require_dtype(const char* op, const char* arg, const at::Tensor& t, std::initializer_list<c10::ScalarType> allowed,
                   const char* rule);
void require_same_dtype(const char* op, const char* arg, const at::Tensor& t, const char* ref_name, const at::Tensor& ref);
void require_same_device(const char* op, const char* arg, const at::Tensor& t, const char* ref_name, const at::Tensor& ref);
void require_choice(const char* op, const char* arg, int64_t v, std::initializer_list<int64_t> allowed, const char* rule);
void require_choice(const char* op, const char* arg, c10::string_view v, std::initializer_list<const char*> allowed,
                    const char* rule);
void require_choice(const char* op, const char* arg, c10::ScalarType v, std::initializer_list<c10::ScalarType> allowed,
                    const char* rule);
// `out` must have exactly the shape/dtype the manifest gives the output and live on ref's device.
void require_out_like(const char* op, const at::Tensor& out, const at::Tensor& ref, c10::SymIntArrayRef shape,
                      c10::ScalarType dtype);

// A tensor with memory behind it: not meta, fake, functional or of symbolic shape (a trace).
bool is_real(const at::Tensor& t);

// Checks the boundary runs on real tensors before it copies, allocates or computes anything.
// A written tensor (written input or out) whose elements share memory (an expanded view).
void require_no_internal_overlap(const char* op, const char* arg, const at::Tensor& t);
// A written tensor `arg` must not share memory with another argument `other_name`.
void require_no_overlap(const char* op, const char* arg, const at::Tensor& t, const char* other_name,
                        const at::Tensor& other);
// An output of `shape` and `dtype` (what: "output 'y'") must fit kMaxTensorBytes.
void require_alloc_fits(const char* op, const char* what, c10::SymIntArrayRef shape, c10::ScalarType dtype);
// A non-contiguous input is copied to a contiguous one: that copy must fit kMaxTensorBytes.
void require_copy_fits(const char* op, const char* arg, const at::Tensor& t);
// A Device param must name a device this process has (device='cuda' on a machine without CUDA).
void require_device_available(const char* op, const char* arg, const c10::Device& d);

// Called inside a catch block: rethrows the c10::Error in flight with its message prefixed by `op`
// (unless it already starts with it), keeping its Python type (TypeError, ValueError, IndexError,
// OutOfMemoryError...); std::bad_alloc becomes an OutOfMemoryError naming `op`; anything else (a
// Python exception crossing C++) is rethrown untouched.
[[noreturn]] void rethrow_naming(const char* op);

[[noreturn]] void fail_shape(const char* op, const char* arg, const char* spec, const std::string& where,
                             c10::SymIntArrayRef got);
[[noreturn]] void fail_same_shape(const char* op, const char* arg, const at::Tensor& t, const char* ref_name,
                                  const at::Tensor& ref);
// `values`: the int params and dims the rule names ("C=6, num_groups=4"), or empty.
[[noreturn]] void fail_rule(const char* op, const char* rule, const c10::SymInt& lhs, const c10::SymInt& rhs,
                            const std::string& values);
// A rule over params (given(min) or given(max)) that the call breaks; `names`: the params it reads,
// `values`: their values as the call gave them (describe_param).
[[noreturn]] void fail_param_rule(const char* op, const char* names, const char* rule, const std::string& values);
std::string describe_param(const char* name, const std::optional<at::Scalar>& v);
std::string describe_param(const char* name, const std::optional<double>& v);
std::string describe_param(const char* name, double v);
std::string describe_param(const char* name, const std::optional<c10::string_view>& v);
std::string describe_param(const char* name, const c10::SymInt& v);
std::string describe_param(const char* name, int64_t v);
std::string describe_param(const char* name, bool v);
std::string describe_param(const char* name, const std::optional<int64_t>& v);
// A rule over arguments that include optional inputs (given(running_mean)) or dims of the shapes;
// as fail_param_rule, with describe_input for an input: "running_mean=None" or "running_mean=Tensor[4]".
[[noreturn]] void fail_argument_rule(const char* op, const char* names, const char* rule, const std::string& values);
std::string describe_input(const char* name, const std::optional<at::Tensor>& t);
std::string describe_input(const char* name, const at::Tensor& t);
// The inputs `names` ("q, cos_sin_cache") have dtypes `got` (Undefined: an absent optional input),
// which match none of the manifest's dtype_combos `allowed` ("(float16, float16), (float16, float32)").
[[noreturn]] void fail_dtype_combo(const char* op, const char* names, const char* allowed,
                                   std::initializer_list<c10::ScalarType> got);

}  // namespace tileops::check
