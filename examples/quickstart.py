"""libtileops quickstart: load the library, call RMSNorm eagerly and under torch.compile(fullgraph=True),
print the captured graph, check both against torch.nn.functional.rms_norm.

Runs on the GPU (nvrtc target) when one is present, else on CPU (reference target).
    bash scripts/demo.sh
"""
import sys

import torch

import tileops
from tileops.norm import RMSNormFwdOp


def main() -> int:
    tileops.load()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32
    m, n = (2048, 4096) if device == "cuda" else (64, 4096)
    print(f"libtileops: {tileops.library_path()}")
    print(f"targets: {tileops.target_names()}; device: {device} "
          f"(served by {'nvrtc' if device == 'cuda' else 'reference'} by default)")

    op = RMSNormFwdOp(normalized_shape=(n,))  # construct once, reuse
    print(f"{op!r}.compile_op_names = {op.compile_op_names}")
    x = torch.randn(m, n, device=device, dtype=dtype)
    w = torch.randn(n, device=device, dtype=dtype)
    ref = torch.nn.functional.rms_norm(x.float(), (n,), w.float()).to(dtype)

    y_eager = op(x, w)

    def show_graph(gm, example_inputs):
        print("\ncaptured graph (torch.compile, fullgraph=True):")
        print(gm.code.strip())
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)

    @torch.compile(fullgraph=True, backend=show_graph)
    def block(x, w):
        return op(x, w) * 2

    y_compiled = block(x, w)
    err_eager = (y_eager.float() - ref.float()).abs().max().item()
    err_compiled = (y_compiled.float() / 2 - ref.float()).abs().max().item()
    tol = 1e-2 if dtype == torch.float16 else 1e-5
    print(f"\nmax |eager - F.rms_norm|    = {err_eager:.3g}")
    print(f"max |compiled - F.rms_norm| = {err_compiled:.3g}  (tolerance {tol:g})")
    print(f"runtime counters: {tileops.counters()}")
    ok = err_eager <= tol and err_compiled <= tol
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
