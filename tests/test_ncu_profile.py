"""scripts/bench/ncu_profile.py summarize: reads ncu's raw CSV pages (header row, unit row, one row per
kernel), converts display units to the table's (us, Mbyte), ranks stall reasons, and says when a
workload profiled no kernel. Needs no GPU (the profiling itself runs in scripts/gpu_check.sh)."""
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "bench"))

import ncu_profile  # noqa: E402

STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def write_raw(path, kernels):
    """kernels: list of {metric: (value, unit)}; writes ncu's --page raw --csv layout."""
    metrics = sorted({m for k in kernels for m in k})
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name"] + metrics)
        w.writerow(["", ""] + [kernels[0].get(m, ("", ""))[1] for m in metrics])
        for i, k in enumerate(kernels):
            w.writerow([str(i), k.get("name", ("void tileops::rms_norm_fwd<bf16, 8192>(...)", ""))[0]] +
                       [k.get(m, ("", ""))[0] for m in metrics])


def test_units_are_converted_and_stalls_ranked(tmp_path, capsys):
    write_raw(tmp_path / "rms_2048x8192.csv", [{
        "gpu__time_duration.sum": ("17,216", "nsecond"),       # 17.2 us, with a thousands separator
        "dram__bytes_read.sum": ("33,582.08", "Kbyte"),         # 33.6 MB
        "launch__registers_per_thread": ("78", "register/thread"),
        STALL.format("long_scoreboard"): ("6.4", ""),
        STALL.format("barrier"): ("1.2", ""),
        STALL.format("selected"): ("9.0", ""),                  # issuing, not a stall: left out
        STALL.format("wait"): ("0.5", ""),
        STALL.format("not_selected"): ("0.3", ""),
    }])
    ncu_profile.summarize(str(tmp_path))
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("rms_2048x8192"))
    cells = row.split()
    assert "17.2" in cells and "33.6" in cells and "78.0" in cells
    # the four largest real stalls, largest first ("selected" outranks them but is not a stall)
    assert row.index("long_scoreboard=6.4") < row.index("barrier=1.2") < row.index("wait=0.5") < \
        row.index("not_selected=0.3")
    assert "selected=9.0" not in row


def test_a_workload_without_kernels_says_so(tmp_path, capsys):
    (tmp_path / "softmax_4096x4096.csv").write_text("==ERROR== Could not open report file\n")
    ncu_profile.summarize(str(tmp_path))
    assert "softmax_4096x4096   (no kernel profiled)" in capsys.readouterr().out


def test_every_workload_name_is_listed_and_callable_by_name():
    assert "ln_4096x16384" in ncu_profile.WORKLOADS and "rms_64x131072" in ncu_profile.WORKLOADS
    assert all(callable(f) for f in ncu_profile.WORKLOADS.values())
