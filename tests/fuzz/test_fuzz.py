"""The fuzzer in CI: a few thousand seeded calls over every operator and rule, 0 crashes, 0 hangs,
0 wrong results, every refusal naming its operator (tests/fuzz/fuzz_ops.py; more: --calls N)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fuzz_ops  # noqa: E402
from cases import DRAWS, MUTATIONS  # noqa: E402

CALLS = int(os.environ.get("TILEOPS_FUZZ_CALLS", "8000"))


def test_fuzz_every_operator_and_rule():
    s = fuzz_ops.fuzz(seed=int(os.environ.get("TILEOPS_FUZZ_SEED", "1")), calls=CALLS, jobs=2, batch=2000,
                      timeout=240)
    assert s["ran"] == CALLS, s
    assert not s["failures"], "\n".join(str(f) for f in s["failures"])
    # The run covered what it claims: every draw's operator family and every mutation, both outcomes.
    assert len(s["by_op"]) >= len(DRAWS)
    assert set(s["mutations"]) >= {m.__name__[2:] for m, _ in MUTATIONS if m is not None} | {"valid"}
    assert s["outcomes"].get("ok", 0) > CALLS // 4 and s["outcomes"].get("refused", 0) > CALLS // 10


def test_a_crashing_call_is_counted_and_the_batch_goes_on(monkeypatch):
    monkeypatch.setenv("TILEOPS_FUZZ_ABORT_AT", "3")
    records = fuzz_ops.run_batch(seed=1, start=0, count=8, timeout=120)
    assert [r["i"] for r in records] == list(range(8))
    assert [r["outcome"] for r in records].count("crash") == 1 and records[3]["outcome"] == "crash"
    assert "exit -6" in records[3]["detail"]  # SIGABRT, in the child's own process group
