// The autograd pairing switch from C++ (include/tileops/autograd.h) and one backward through it.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "tileops/autograd.h"

namespace {

using RmsNormFn = at::Tensor(const at::Tensor&, const std::optional<at::Tensor>&, c10::SymIntArrayRef,
                             std::optional<double>, std::optional<c10::string_view>);

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tileops::norm_rms_norm_fwd", "").typed<RmsNormFn>();
  const std::vector<c10::SymInt> ns{c10::SymInt(x.size(-1))};
  return op.call(x, w, ns, std::nullopt, std::nullopt);
}

// Restores the process-wide switch whatever the test does.
struct Restore {
  bool was = tileops::autograd_pairing();
  ~Restore() { tileops::set_autograd_pairing(was); }
};

TEST(AutogradPairing, SwitchReturnsThePreviousState) {
  Restore r;
  tileops::set_autograd_pairing(false);
  EXPECT_FALSE(tileops::set_autograd_pairing(true));
  EXPECT_TRUE(tileops::autograd_pairing());
  EXPECT_TRUE(tileops::set_autograd_pairing(false));
  EXPECT_FALSE(tileops::autograd_pairing());
}

TEST(AutogradPairing, OffRefusesOnGivesTheGradientsOfAtRmsNorm) {
  Restore r;
  const at::Tensor x = at::randn({4, 16}).requires_grad_();
  const at::Tensor w = at::randn({16}).requires_grad_();
  const at::Tensor dy = at::randn({4, 16});
  tileops::set_autograd_pairing(false);
  EXPECT_THROW(rms_norm(x, w), c10::Error);

  tileops::set_autograd_pairing(true);
  const auto got = torch::autograd::grad({rms_norm(x, w)}, {x, w}, {dy});
  const auto want = torch::autograd::grad({at::rms_norm(x, {16}, w, std::nullopt)}, {x, w}, {dy});
  EXPECT_TRUE(at::allclose(got[0], want[0], 1e-4, 1e-5));
  EXPECT_TRUE(at::allclose(got[1], want[1], 1e-4, 1e-5));
}

}  // namespace
