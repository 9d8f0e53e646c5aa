"""Cold-compile contract entries of the elementwise family (see tests/compile_contract.py): every
entry of manifests/elementwise.yaml, with broadcast inputs (tests/support/elementwise_cases.py)."""
from support.elementwise_cases import CASES, sample


def _make(name):
    def make(device):
        import torch
        import tileops.elementwise as ew
        case = CASES[name]
        dtype = torch.bfloat16 if device == "cuda" and torch.bfloat16 in case.dtypes else case.dtypes[-1]
        return getattr(ew, name)(**case.params), tuple(sample(case, dtype, device))
    return make


CONTRACT = {name: _make(name) for name in CASES}
