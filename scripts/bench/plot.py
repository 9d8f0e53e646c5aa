"""Plot benchmark JSON (what scripts/bench/bench_*.py --json writes) as one PNG.

    python3 scripts/bench/plot.py --out docs/perf.png docs/measurements/h100_bench_{norm,reduction,activation,position}_2*.json

For each op x workload x dtype: grouped bars of the achieved fraction of copy bandwidth,
copy_us / time_us, for ours, torch eager and torch.compile, with a line at 1.0 (as fast as a device
copy of the same bytes; higher is better). matplotlib is a development tool here, not a dependency of
the library: install it into the venv that runs this (pip install matplotlib). Torch-free.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

# Bar label -> the row key holding its median µs per call (harness.measure's names).
SERIES = (("ours", "ours_us"), ("torch eager", "eager_us"), ("torch.compile", "compile_us"))
COLORS = {"ours": "#1f77b4", "torch eager": "#ff7f0e", "torch.compile": "#2ca02c"}


class PlotError(ValueError):
    """A benchmark file this script cannot use, or matplotlib missing; the message says which and why."""


def _family_of(path: str) -> str:
    """bench_<family>... in the file name names the rows' op when they carry none (older runs)."""
    m = re.search(r"bench_([a-z]+)", os.path.basename(path))
    return m.group(1) if m else os.path.splitext(os.path.basename(path))[0]


def _time(row: dict, key: str, where: str) -> float | None:
    if key not in row:
        return None
    v = row[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise PlotError(f"{where}: '{key}' must be a positive number of µs, got {v!r}")
    return float(v)


def load_rows(paths: list[str]) -> tuple[list[dict], list[str]]:
    """(rows, headers): one row per op x workload x dtype with its copy fraction per series, and a
    'device, torch' line per distinct file header. Raises PlotError naming the file and the entry."""
    rows, headers = [], []
    for path in paths:
        try:
            with open(path) as f:
                report = json.load(f)
        except OSError as e:
            raise PlotError(f"{path}: cannot read: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise PlotError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
        kernels = report.get("kernels") if isinstance(report, dict) else None
        if isinstance(kernels, dict):  # {op class: [rows]}
            groups = [(op, rs) for op, rs in kernels.items()]
        elif isinstance(kernels, list):  # [rows], each with its own 'op' (or the file's family)
            groups = [(None, kernels)]
        else:
            raise PlotError(f"{path}: expected an object with a 'kernels' list (or op -> list) as "
                            "scripts/bench/bench_*.py --json writes, got "
                            f"{type(kernels).__name__ if isinstance(report, dict) else type(report).__name__}")
        header = ", ".join(f"{prefix}{report[k]}" for k, prefix in (("device", ""), ("torch", "torch ")) if k in report)
        if header and header not in headers:
            headers.append(header)
        for op, entries in groups:
            if not isinstance(entries, list):
                raise PlotError(f"{path}: kernels['{op}'] must be a list of rows, got {type(entries).__name__}")
            for i, row in enumerate(entries):
                where = f"{path}: kernels{'' if op is None else f'[{op!r}]'}[{i}]"
                if not isinstance(row, dict):
                    raise PlotError(f"{where}: a row must be an object, got {type(row).__name__}")
                for key in ("workload", "dtype", "ours_us", "copy_us"):
                    if key not in row:
                        raise PlotError(f"{where}: missing '{key}' (rows need workload, dtype, ours_us, copy_us)")
                copy = _time(row, "copy_us", where)
                fractions = {}
                for label, key in SERIES:
                    t = _time(row, key, where)
                    if t is not None:
                        fractions[label] = copy / t
                rows.append({"op": row.get("op") or op or _family_of(path), "workload": str(row["workload"]),
                             "dtype": str(row["dtype"]), "fractions": fractions})
    if not rows:
        raise PlotError(f"no benchmark rows in {', '.join(paths)}")
    return rows, headers


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlotError("matplotlib is not installed; it is only needed to draw benchmark plots: "
                        f"{sys.executable} -m pip install matplotlib") from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def plot(rows: list[dict], out: str, title: str = "") -> None:
    """Horizontal grouped bars, one group per row (top to bottom in file order), written to `out`."""
    plt = _pyplot()
    n = len(rows)
    bar_h = 0.8 / len(SERIES)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.42 * n))
    for s, (label, _) in enumerate(SERIES):
        ys, xs = [], []
        for r, row in enumerate(rows):
            if label in row["fractions"]:
                ys.append(r + (s - (len(SERIES) - 1) / 2) * bar_h)
                xs.append(row["fractions"][label])
        ax.barh(ys, xs, height=bar_h, color=COLORS[label], label=label)
        if label == "ours":
            for y, x in zip(ys, xs):
                ax.text(x, y, f" {x:.2f}", va="center", fontsize=7)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    # A faint rule between ops.
    for r in range(1, n):
        if rows[r]["op"] != rows[r - 1]["op"]:
            ax.axhline(r - 0.5, color="0.8", linewidth=0.8)
    ax.set_yticks(range(n))
    ax.set_yticklabels([f"{row['op']} · {row['workload']} · {row['dtype']}" for row in rows], fontsize=8)
    ax.set_ylim(n - 0.5, -0.5)  # first row on top
    top = max(max(row["fractions"].values()) for row in rows)
    ax.set_xlim(0, max(1.1, top * 1.12))
    ax.set_xlabel("fraction of device-copy bandwidth (copy time / op time; 1.0 = copy speed, higher is better)")
    ax.set_title(title or "tileops vs torch eager vs torch.compile", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", color="0.9")
    ax.set_axisbelow(True)
    fig.tight_layout()
    folder = os.path.dirname(os.path.abspath(out))
    os.makedirs(folder, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", help="benchmark JSON files (bench_*.py --json)")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--title", default="")
    args = ap.parse_args(argv)
    try:
        rows, headers = load_rows(args.json)
        plot(rows, args.out, args.title or "; ".join(headers))
    except PlotError as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        return 1
    print(f"plot.py: {len(rows)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
