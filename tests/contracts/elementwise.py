"""Cold-compile contract entries of the elementwise family (see tests/compile_contract.py): every
entry of manifests/elementwise.yaml, with broadcast inputs (tests/support/elementwise_cases.py)."""
from support.elementwise_cases import CASES, sample


def _make(name):
    def make(device):
        import torch
        import tileops.elementwise as ew
        case = CASES[name]
        dtype = torch.bfloat16 if device == "cuda" and torch.bfloat16 in case.dtypes else case.dtypes[-1]
        # finite positive values: the contract test compares results without equal_nan (log, rsqrt, pow)
        args = [torch.nan_to_num(a, posinf=50.0, neginf=-50.0).abs() + 0.5 if a.is_floating_point() else a for a in sample(case, dtype, device)]
        return getattr(ew, name)(**case.params_for(dtype)), tuple(args)
    return make


CONTRACT = {name: _make(name) for name in CASES}
