"""Render docs/PERF.md's tables from benchmark JSON (what scripts/bench/bench_*.py --json writes).

    python3 scripts/bench/perf_table.py                          # print the tables
    python3 scripts/bench/perf_table.py --write docs/PERF.md     # replace them between the markers
    python3 scripts/bench/perf_table.py --check docs/PERF.md     # exit 1 if PERF.md is out of date

Default input: docs/measurements/*.json. A row is one op x workload x dtype; when several files hold
it, the newest file wins (its 'date', then its name), so a partial run (e.g. --bwd-only) overrides
the rows it measured and keeps the rest. One table per manifest family, ops in manifest order; each
row names the run it came from (date, commit, command, device, torch). Torch-free.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BEGIN = "<!-- perf_table.py: begin (generated; edit the JSON or the script, not this table) -->"
END = "<!-- perf_table.py: end -->"
TIMES = ("ours_us", "copy_us")
# Optional: torch eager cannot be captured for a few calls (masked_fill with a 0-dim CUDA value syncs).
TORCH = ("eager_us", "compile_us")
PEERS = (("flashinfer_us", "flashinfer"), ("liger_us", "Liger"))  # optional: a library that has the op


class TableError(ValueError):
    """A benchmark file or PERF.md this script cannot use; the message names the file and the entry."""


def manifest_ops(root: str = ROOT) -> dict:
    """{op class: (family, position)} in manifest order, from manifests/*.yaml."""
    ops = {}
    for path in sorted(glob.glob(os.path.join(root, "manifests", "*.yaml"))):
        with open(path) as f:
            for cls, entry in (yaml.safe_load(f) or {}).items():
                ops[cls] = (entry.get("family", os.path.splitext(os.path.basename(path))[0]), len(ops))
    return ops


def _number(row: dict, key: str, where: str) -> float:
    v = row.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise TableError(f"{where}: '{key}' must be a positive number of µs, got {v!r}")
    return float(v)


def load_runs(paths: list[str]) -> list[dict]:
    """One run per file: its provenance and its rows (op, workload, shape, dtype, the four times)."""
    runs = []
    for path in paths:
        try:
            with open(path) as f:
                report = json.load(f)
        except OSError as e:
            raise TableError(f"{path}: cannot read: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise TableError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
        if not isinstance(report, dict) or not isinstance(report.get("kernels"), (list, dict)):
            raise TableError(f"{path}: expected an object with 'kernels' (a list of rows, or op -> rows)")
        missing = [k for k in ("date", "commit", "command") if not isinstance(report.get(k), str)]
        if missing:
            raise TableError(f"{path}: missing {', '.join(missing)} (harness.write_json records them)")
        kernels = report["kernels"]
        groups = kernels.items() if isinstance(kernels, dict) else [(None, kernels)]
        rows = []
        for op, entries in groups:
            for i, row in enumerate(entries):
                where = f"{path}: kernels{'' if op is None else f'[{op!r}]'}[{i}]"
                name = row.get("op") or op
                if not name:
                    raise TableError(f"{where}: the row names no 'op'")
                for key in ("workload", "shape", "dtype"):
                    if not isinstance(row.get(key), str):
                        raise TableError(f"{where}: missing '{key}'")
                # a printed table of several ops labels its rows "<op> <workload>"; the op has its column
                workload = row["workload"].removeprefix(name + " ")
                rows.append({"op": name, "workload": workload, "shape": row["shape"], "dtype": row["dtype"],
                             **{k: _number(row, k, where) for k in TIMES},
                             **{k: _number(row, k, where) for k in TORCH if row.get(k) is not None},
                             **{k: _number(row, k, where) for k, _ in PEERS if row.get(k) is not None},
                             **{k: _number(row, k, where) for k in ("first_call_ms",) if row.get(k) is not None}})
        runs.append({"path": path, "date": report["date"], "commit": report["commit"], "command": report["command"],
                     "device": report.get("device", "?"), "torch": report.get("torch", "?"),
                     "host_us": report.get("host_us"), "rows": rows})
    return runs


def current_rows(runs: list[dict]) -> list[tuple[dict, dict]]:
    """(row, run) per op x workload x dtype from the newest run that measured it, in first-seen order."""
    order, best = [], {}
    for run in sorted(runs, key=lambda r: (r["date"], os.path.basename(r["path"]))):
        for row in run["rows"]:
            key = (row["op"], row["workload"], row["dtype"])
            if key not in best:
                order.append(key)
            best[key] = (row, run)
    return [best[k] for k in order]


def _fmt(us: float) -> str:
    return f"{us:.1f}" if us >= 10 else f"{us:.2f}"


def cell(row: dict, key: str) -> str:
    return _fmt(row[key]) if key in row else "–"


def render(runs: list[dict], ops: dict, root: str = ROOT) -> str:
    rows = current_rows(runs)
    if not rows:
        raise TableError("no benchmark rows")
    used = []  # runs in order of first use: their index is the row's run number
    out = []
    place = {op: ops.get(op, ("other", len(ops))) for op in {r["op"] for r, _ in rows}}  # unknown ops last
    families = sorted({fam for fam, _ in place.values()},
                      key=lambda fam: min(pos for f, pos in place.values() if f == fam))
    for fam in families:
        # Ops in manifest order; rows of one op in the order their file lists them (a stable sort).
        mine = sorted(((r, run) for r, run in rows if place[r["op"]][0] == fam), key=lambda rr: place[rr[0]["op"]][1])
        # Peer-library columns only in a family where some row has one.
        peers = [(k, name) for k, name in PEERS if any(k in r for r, _ in mine)]
        head = ["op", "workload", "shape", "dtype", "ours µs", "eager µs", "compile µs",
                *[f"{name} µs" for _, name in peers], "copy µs", "ours/copy", "vs best", "run"]
        out += [f"### {fam}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r, run in mine:
            if run not in used:
                used.append(run)
            ratio = r["ours_us"] / r["copy_us"]
            # The best of every other implementation timed in the row: eager, compile and the peers.
            others = [r[k] for k in (*TORCH, *[k for k, _ in peers]) if k in r]
            vs_best = min(others) / r["ours_us"] if others else float("nan")
            vs = "–" if not others else f"{vs_best:.2f}×" if vs_best >= 1 else f"**{vs_best:.2f}×**"
            peer_cells = "".join(f"{cell(r, k)} | " for k, _ in peers)
            out.append(f"| {r['op']} | {r['workload']} | {r['shape']} | {r['dtype']} | {_fmt(r['ours_us'])} | "
                       f"{cell(r, 'eager_us')} | {cell(r, 'compile_us')} | {peer_cells}{_fmt(r['copy_us'])} | "
                       f"{ratio:.3f} | {vs} | {used.index(run) + 1} |")
        out.append("")
    # First calls that compiled their kernel (an empty cache), per family: what a new op costs once.
    first = [(r, run) for r, run in rows if "first_call_ms" in r]
    if first:
        out += ["### first call of a kernel, NVRTC compile included (empty kernel cache)", "",
                "| family | kernels | median ms | slowest ms | slowest | run |", "|---|---|---|---|---|---|"]
        for fam in families:
            mine = sorted(((r, run) for r, run in first if place[r["op"]][0] == fam), key=lambda rr: rr[0]["first_call_ms"])
            if not mine:
                continue
            med = statistics.median(r["first_call_ms"] for r, _ in mine)
            slow, slow_run = mine[-1]
            if slow_run not in used:
                used.append(slow_run)
            out.append(f"| {fam} | {len(mine)} | {med:.0f} | {slow['first_call_ms']:.0f} | {slow['op']} "
                       f"{slow['workload']} {slow['dtype']} | {used.index(slow_run) + 1} |")
        out.append("")
    # the 1x64 call beside torch.add (bench_norm's); other benches' host figures are not this table's
    host = max((run for run in runs if run["host_us"] and "torch.add" in run["host_us"]),
               key=lambda r: (r["date"], os.path.basename(r["path"])), default=None)
    if host is not None:
        if host not in used:
            used.append(host)
        base = host["host_us"].get("torch.add")
        out += [f"### host time per eager call (1×64 fp16, run {used.index(host) + 1})", "",
                "| call | µs | vs torch.add |", "|---|---|---|"]
        for call, us in host["host_us"].items():
            out.append(f"| {call} | {us:.2f} | {us / base:.2f}× |" if base else f"| {call} | {us:.2f} | – |")
        out.append("")
    out += ["Runs:", ""]
    for i, run in enumerate(used, 1):
        rel = os.path.relpath(os.path.abspath(run["path"]), root)
        out.append(f"{i}. `{rel}`: {run['date']}, commit {run['commit']}, {run['device']}, torch {run['torch']}: "
                   f"`{run['command']}`")
    return "\n".join(out) + "\n"


def splice(doc: str, table: str, where: str) -> str:
    """doc with the text between BEGIN and END replaced by table."""
    if doc.count(BEGIN) != 1 or doc.count(END) != 1 or doc.index(BEGIN) > doc.index(END):
        raise TableError(f"{where}: needs one '{BEGIN}' line and, after it, one '{END}' line")
    head, rest = doc.split(BEGIN, 1)
    return head + BEGIN + "\n" + table + END + rest.split(END, 1)[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="*", help="benchmark JSON files (default: docs/measurements/*.json)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", metavar="MD", help="replace the generated part of this Markdown file")
    mode.add_argument("--check", metavar="MD", help="exit 1 if this Markdown file's generated part differs")
    args = ap.parse_args(argv)
    paths = args.json or sorted(glob.glob(os.path.join(ROOT, "docs", "measurements", "*.json")))
    try:
        table = render(load_runs(paths), manifest_ops())
        target = args.write or args.check
        if target is None:
            sys.stdout.write(table)
            return 0
        with open(target) as f:
            doc = f.read()
        new = splice(doc, table, target)
        if args.check:
            if new != doc:
                print(f"perf_table.py: {target} is out of date; run python3 scripts/bench/perf_table.py "
                      f"--write {target}", file=sys.stderr)
                return 1
            return 0
        if new != doc:
            with open(target, "w") as f:
                f.write(new)
    except (TableError, OSError) as e:
        print(f"perf_table.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
