"""The nvrtc plans' tuning keys (TILEOPS_TUNE) are listed by scripts/bench/sweep.py --list-tune, from
the library itself (no GPU needed); a removed knob is not among them."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_sweep_lists_the_tuning_keys():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    run = subprocess.run([sys.executable, "sweep.py", "--list-tune"], cwd=os.path.join(ROOT, "scripts", "bench"),
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    keys = [line.split()[0] for line in run.stdout.splitlines() if line.strip()]
    assert "rms_vecs_per_thread" in keys and "norm_bwd_blocks_per_sm" in keys and "act_ctas_per_sm" in keys, keys
    assert "ew_unroll" in keys and "ew_threads" in keys, keys
    assert "reduce_cols_warps" in keys and "reduce_split_vecs" in keys, keys
    assert "gn_vecs_per_thread" in keys and "gn_running_vecs_per_thread" in keys and "gn_cta_threads" in keys, keys
    assert not any("walk" in k for k in keys), keys  # the staged walk is gone, not behind a key
    assert "moe_max_rows_per_expert" in keys, keys
    assert len(keys) == len(set(keys)) == 26, keys


def test_generated_page_lists_the_librarys_keys_and_ranges():
    # build/generated/docs/TUNING.md is parsed from tuning.cpp's table; the library prints the same table
    import ctypes

    import tileops
    from codegen import emit_docs
    lib = tileops.load()
    lib.tileops_tuning_keys.restype = ctypes.c_char_p
    printed = [line.split() for line in lib.tileops_tuning_keys().decode().splitlines() if line.strip()]
    keys = emit_docs.collect_tuning_keys(os.path.join(ROOT, "src", "targets"))
    assert [(k[0], f"{k[1]}..{k[2]}") for k in keys] == [(p[0], p[1]) for p in printed]
    assert [k[4] for k in keys] == ["(powers" in p for p in printed]
    page = emit_docs.emit_tuning(keys)
    assert "| `staged_min_row_bytes` | 16..1073741824 | shortest staged row, bytes |" in page
    assert "| `ew_unroll` | 1..8 (powers of two) |" in page
