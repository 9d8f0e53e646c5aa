"""The compile-contract registry: every implemented op with a compile boundary, and how to call it.

Each family keeps its entries in tests/contracts/<family>.py as CONTRACT = {op class: make(device)},
where make returns (op instance, example inputs). tests/test_compile_contract.py compiles each one
cold with fullgraph=True and checks the graph holds only the op's own operators;
scripts/validate_manifest.py keeps this registry equal to the set of ops that have a boundary.
"""
import importlib
import os
import pkgutil

_HERE = os.path.dirname(os.path.abspath(__file__))

CONTRACT = {}
for _mod in pkgutil.iter_modules([os.path.join(_HERE, "contracts")]):
    _entries = importlib.import_module(f"contracts.{_mod.name}").CONTRACT
    _clash = set(_entries) & set(CONTRACT)
    if _clash:
        raise RuntimeError(f"tests/contracts/{_mod.name}.py registers {sorted(_clash)} again")
    CONTRACT.update(_entries)
