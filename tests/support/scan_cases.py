"""The scans (CumsumFwdOp, CumprodFwdOp, LogCumSumExpFwdOp) as one table, shared by the CPU and GPU
tests: each op's operators (functional and out=), its torch function, the x dtypes the manifest lists,
whether it takes dtype= (and the choices), and inputs whose products stay finite."""
import torch

X_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
            torch.float16, torch.bfloat16, torch.float32, torch.float64)
DTYPE_CHOICES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                 torch.float16, torch.bfloat16, torch.float32, torch.float64)


FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class Scan:
    def __init__(self, stem, ref, dtypes=X_DTYPES, takes_dtype=True):
        self.stem, self.ref, self.dtypes, self.takes_dtype = stem, ref, dtypes, takes_dtype
        self.name = f"reduction_{stem}_fwd"

    @property
    def op(self):
        return getattr(torch.ops.tileops, self.name)

    @property
    def op_out(self):
        return getattr(torch.ops.tileops, self.name + "_out")

    def __repr__(self):
        return self.stem


CUMS = [Scan("cumsum", torch.cumsum), Scan("cumprod", torch.cumprod)]  # dtype= and int64 promotion
LOGCUMSUMEXP = Scan("log_cum_sum_exp", torch.logcumsumexp, FLOATS, takes_dtype=False)
SCANS = CUMS + [LOGCUMSUMEXP]


def sample(scan, shape, dtype, device="cpu"):
    """x of both signs with some zeros; cumprod's values stay near 1 so long products stay finite."""
    if dtype == torch.bool:
        return torch.rand(shape, device=device) > 0.2
    if not dtype.is_floating_point:
        lo = 0 if dtype == torch.uint8 else -3
        if scan.stem == "cumprod":  # products of -1, 0, 1 (0, 1, 2 unsigned) stay within every dtype= range
            lo, hi = (0, 3) if dtype == torch.uint8 else (-1, 2)
            return torch.randint(lo, hi, shape, device=device, dtype=dtype)
        return torch.randint(lo, 4, shape, device=device, dtype=dtype)
    if scan.stem == "cumprod":
        x = 1 + (torch.rand(shape, device=device, dtype=torch.float64) - 0.5) / 128
        return x.to(dtype)
    x = torch.randn(shape, device=device, dtype=torch.float64) * 3
    x[torch.rand(shape, device=device) < 0.1] = 0
    return x.to(dtype)
