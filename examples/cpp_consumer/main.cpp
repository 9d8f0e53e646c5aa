// A C++ application on the installed TileOPs package: it links TileOPs::tileops, which registers
// torch.ops.tileops.* at startup, then calls RMSNorm through the dispatcher like any torch operator.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <tileops/ops.h>

#include <iostream>
#include <optional>

int main() {
  const tileops::OpInfo* op = tileops::find_op("RMSNormFwdOp");
  if (op == nullptr) {
    std::cerr << "cpp_consumer: RMSNormFwdOp is not in libtileops' op table\n";
    return 1;
  }
  const auto rms_norm = c10::Dispatcher::singleton()
      .findSchemaOrThrow("tileops::norm_rms_norm_fwd", "")
      .typed<at::Tensor(const at::Tensor&, const std::optional<at::Tensor>&, c10::SymIntArrayRef,
                        std::optional<double>, std::optional<c10::string_view>)>();
  const at::Tensor x = at::randn({8, 64});
  const at::Tensor w = at::randn({64});
  const std::vector<c10::SymInt> shape{c10::SymInt(64)};
  const at::Tensor y = rms_norm.call(x, w, shape, 1e-6, std::nullopt);
  const at::Tensor ref = x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-6) * w;
  const double err = (y - ref).abs().max().item<double>();
  std::cout << op->op_class << " (" << op->manifest << ") from C++: max |y - ref| = " << err << "\n";
  return err < 1e-4 ? 0 : 1;
}
