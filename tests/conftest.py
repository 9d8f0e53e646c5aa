"""pytest setup: the Python package from python/, the library from build/ (or TILEOPS_LIBRARY)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import torch  # noqa: E402

import tileops  # noqa: E402
from support.failures_log import pytest_runtest_logreport  # noqa: E402,F401  (a hook)

tileops.load()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped cleanly without one)")
    config.addinivalue_line("markers", "unverified_gpu: a GPU test that has not yet passed on a GPU; runs only with "
                                       "TILEOPS_UNVERIFIED_GPU_TESTS=1, and loses the mark in the commit that records "
                                       "its first passing run")


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("TILEOPS_UNVERIFIED_GPU_TESTS"):
        unverified = pytest.mark.skip(reason="a GPU test not yet run on a GPU: set TILEOPS_UNVERIFIED_GPU_TESTS=1")
        for item in items:
            if "unverified_gpu" in item.keywords:
                item.add_marker(unverified)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU here; run scripts/gpu_check.sh on a machine with one")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Under pytest-xdist the workers share one GPU and the CPU's cores: each uses its share of the cores
# and gives its cached GPU memory back after every test, so that no worker starves the others.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // WORKERS))


@pytest.fixture(autouse=True)
def release_gpu_memory():
    yield
    if WORKERS > 1 and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


@pytest.fixture
def counters():
    """Counters read as deltas from the start of the test."""
    start = tileops.counters()

    def delta():
        now = tileops.counters()
        return {k: now[k] - start[k] for k in now}

    return delta


@pytest.fixture
def example_backend():
    """The out-of-tree example target, loaded once per process."""
    path = os.path.join(os.path.dirname(tileops.library_path()), "plugin", "example_backend",
                        "libtileops_example_backend.so")
    if "example_cpu" not in tileops.target_names():
        tileops.load_backend(path)
    return "example_cpu"
