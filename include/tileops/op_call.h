// tileops/op_call.h — what a target's kernel receives for one call.
//
// The generated boundary has already checked every argument against the manifest, made the inputs
// contiguous and allocated the outputs (contiguous, shape/dtype from the manifest). A kernel reads
// `inputs`, writes `outputs`, and reads `params`, all in manifest order:
//
//   void MyKernel::launch(const tileops::OpCall& call) const {
//     const at::Tensor& x = call.inputs[0];           // signature.inputs order
//     const at::Tensor& y = call.outputs[0];          // signature.outputs order
//     c10::IntArrayRef normalized_shape = call.params[0].as_ints();
//     std::optional<double> eps = call.params[1].as_optional_real();
//     ...
//   }
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace tileops {

// One manifest param value. Trivially copyable: building one on the call path allocates nothing.
class ParamValue {
 public:
  enum class Kind : uint8_t { None, Int, Real, Bool, Str, Ints, Device, DType };

  ParamValue() = default;  // None
  static ParamValue integer(int64_t v) { ParamValue p(Kind::Int); p.i_ = v; return p; }
  static ParamValue real(double v) { ParamValue p(Kind::Real); p.f_ = v; return p; }
  static ParamValue boolean(bool v) { ParamValue p(Kind::Bool); p.i_ = v; return p; }
  static ParamValue string(std::string_view v) { ParamValue p(Kind::Str); p.s_ = v; return p; }
  static ParamValue ints(c10::IntArrayRef v) { ParamValue p(Kind::Ints); p.l_ = v; return p; }
  static ParamValue device(c10::Device d) {
    ParamValue p(Kind::Device);
    p.i_ = (static_cast<int64_t>(d.type()) << 16) | static_cast<uint16_t>(d.index());
    return p;
  }
  static ParamValue dtype(c10::ScalarType t) { ParamValue p(Kind::DType); p.i_ = static_cast<int64_t>(t); return p; }

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  int64_t as_int() const { expect(Kind::Int); return i_; }
  double as_real() const { expect(Kind::Real); return f_; }
  bool as_bool() const { expect(Kind::Bool); return i_ != 0; }
  std::string_view as_str() const { expect(Kind::Str); return s_; }
  c10::IntArrayRef as_ints() const { expect(Kind::Ints); return l_; }
  c10::ScalarType as_dtype() const { expect(Kind::DType); return static_cast<c10::ScalarType>(i_); }
  c10::Device as_device() const {
    expect(Kind::Device);
    return c10::Device(static_cast<c10::DeviceType>(i_ >> 16), static_cast<c10::DeviceIndex>(static_cast<int16_t>(i_ & 0xffff)));
  }
  std::optional<double> as_optional_real() const { return is_none() ? std::nullopt : std::optional<double>(as_real()); }
  std::optional<int64_t> as_optional_int() const { return is_none() ? std::nullopt : std::optional<int64_t>(as_int()); }

 private:
  explicit ParamValue(Kind k) : kind_(k) {}
  void expect(Kind k) const {
    TORCH_CHECK(kind_ == k, "tileops: param holds kind ", static_cast<int>(kind_), ", read as ", static_cast<int>(k));
  }
  Kind kind_ = Kind::None;
  int64_t i_ = 0;
  double f_ = 0;
  std::string_view s_;
  c10::IntArrayRef l_;
};

// One call of one operator, as the boundary hands it to a target.
struct OpCall {
  int op_id;                             // index into tileops::op_table()
  const char* op_name;                   // "tileops::norm_rms_norm_fwd" (the branch's operator)
  c10::Device device;                    // device of the first tensor input
  c10::ArrayRef<at::Tensor> inputs;      // contiguous (an elementwise entry's unwritten inputs keep their
                                         // strides); an absent optional input is an undefined tensor
  c10::ArrayRef<at::Tensor> outputs;     // contiguous, allocated; undefined when the branch drops it
  c10::ArrayRef<ParamValue> params;
};

}  // namespace tileops
