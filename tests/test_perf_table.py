"""scripts/bench/perf_table.py: docs/PERF.md's tables from benchmark JSON. The repository's PERF.md
must match its measurement files; the newest run wins per row; files it cannot use are clear errors.
Needs no GPU."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "bench"))

import perf_table  # noqa: E402

OPS = {"RMSNormFwdOp": ("norm", 0), "SoftmaxFwdOp": ("reduction", 1)}


def row(workload, ours=10.0, eager=20.0, compile_=15.0, copy=9.0, **extra):
    return {"workload": workload, "shape": "4x8", "dtype": "bfloat16", "ours_us": ours, "eager_us": eager,
            "compile_us": compile_, "copy_us": copy, **extra}


def run(tmp_path, name, kernels, date="2026-11-30", **extra):
    report = {"date": date, "commit": "abc1234", "command": f"python3 bench {name}", "device": "GPU",
              "torch": "2.14", "kernels": kernels, **extra}
    path = tmp_path / name
    path.write_text(json.dumps(report))
    return str(path)


def table_rows(text):
    return [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "Op |" in line]


def test_repository_perf_md_matches_its_measurements():
    assert perf_table.main(["--check", os.path.join(ROOT, "docs", "PERF.md")]) == 0


def test_newest_run_wins_per_row_and_ratios(tmp_path):
    old = run(tmp_path, "a.json", [row("w", ours=20.0, op="RMSNormFwdOp"), row("v", ours=9.0, op="RMSNormFwdOp")],
              date="2026-11-29")
    new = run(tmp_path, "b.json", {"SoftmaxFwdOp": [row("s", ours=30.0)]}, date="2026-11-30")
    partial = run(tmp_path, "c.json", [row("w", ours=10.0, eager=8.0, op="RMSNormFwdOp")], date="2026-11-30")
    text = perf_table.render(perf_table.load_runs([partial, new, old]), OPS, root=str(tmp_path))
    rows = table_rows(text)
    # w from the newest file (c), v kept from the older one (a); ops in manifest order.
    assert [(r[0], r[1], r[4]) for r in rows] == [("| RMSNormFwdOp", "w", "10.0"), ("| RMSNormFwdOp", "v", "9.00"),
                                                 ("| SoftmaxFwdOp", "s", "30.0")]
    w, v, s = rows
    assert w[8] == "1.111" and w[9] == "**0.80×**"  # 10/9 of copy time; eager's 8 beats ours: bold
    assert v[8] == "1.000" and v[9] == "1.67×"
    assert [w[10], v[10], s[10]] == ["1 |", "2 |", "3 |"]
    assert "1. `c.json`: 2026-11-30, commit abc1234, GPU, torch 2.14: `python3 bench c.json`" in text
    assert "### norm" in text and "### reduction" in text


def test_host_times_from_the_newest_run_that_has_them(tmp_path):
    a = run(tmp_path, "a.json", [row("w", op="RMSNormFwdOp")], host_us={"torch.add": 5.0, "op": 6.0})
    # a newer run whose host figures are not beside torch.add (bench_gemm's) leaves the table alone
    b = run(tmp_path, "b.json", [row("w2", op="RMSNormFwdOp")], date="2026-12-01",
            host_us={"torch.matmul": 12.0, "tileops.gemm_fwd": 11.0})
    text = perf_table.render(perf_table.load_runs([a, b]), OPS, root=str(tmp_path))
    assert "| op | 6.00 | 1.20× |" in text and "torch.matmul" not in text


def test_first_calls_that_compiled_are_summarised_per_family(tmp_path):
    a = run(tmp_path, "a.json", [row("w", op="RMSNormFwdOp", first_call_ms=120.0),
                                 row("v", op="RMSNormFwdOp", first_call_ms=300.0), row("u", op="RMSNormFwdOp"),
                                 row("s", op="SoftmaxFwdOp", first_call_ms=90.0)])
    text = perf_table.render(perf_table.load_runs([a]), OPS, root=str(tmp_path))
    assert "| norm | 2 | 210 | 300 | RMSNormFwdOp v bfloat16 | 1 |" in text
    assert "| reduction | 1 | 90 | 90 | SoftmaxFwdOp s bfloat16 | 1 |" in text
    plain = perf_table.render(perf_table.load_runs([run(tmp_path, "b.json", [row("w", op="RMSNormFwdOp")])]), OPS,
                              root=str(tmp_path))
    assert "first call" not in plain


@pytest.mark.parametrize("report, message", [
    ({"kernels": []}, "missing date, commit, command"),
    ({"date": "d", "commit": "c", "command": "x", "kernels": [row("w")]}, "kernels[0]: the row names no 'op'"),
    ({"date": "d", "commit": "c", "command": "x", "kernels": [row("w", op="X", copy=0)]}, "'copy_us' must be a positive"),
    ({"date": "d", "commit": "c", "command": "x"}, "expected an object with 'kernels'"),
])
def test_unusable_files_are_errors_naming_the_file(tmp_path, report, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(report))
    with pytest.raises(perf_table.TableError, match="bad.json: .*" + message.replace("[", r"\[").replace("]", r"\]")):
        perf_table.load_runs([str(path)])


def test_write_replaces_only_between_the_markers_and_check_sees_staleness(tmp_path, capsys):
    data = run(tmp_path, "a.json", [row("w", op="RMSNormFwdOp")])
    md = tmp_path / "PERF.md"
    md.write_text(f"intro\n{perf_table.BEGIN}\nold table\n{perf_table.END}\noutro\n")
    assert perf_table.main(["--check", str(md), data]) == 1
    assert "is out of date" in capsys.readouterr().err
    assert perf_table.main(["--write", str(md), data]) == 0
    text = md.read_text()
    assert text.startswith(f"intro\n{perf_table.BEGIN}\n### ") and text.endswith(f"{perf_table.END}\noutro\n")
    assert "old table" not in text and "| RMSNormFwdOp | w |" in text
    assert perf_table.main(["--check", str(md), data]) == 0
    md.write_text("no markers\n")
    assert perf_table.main(["--write", str(md), data]) == 1
    assert "needs one" in capsys.readouterr().err


def test_harness_records_when_and_how_a_report_was_measured(tmp_path):
    import harness  # imports torch; no GPU needed for write_json
    out = tmp_path / "r.json"
    harness.write_json(str(out), {"kernels": []})
    report = json.loads(out.read_text())
    assert set(report) == {"date", "commit", "command", "kernels"}
    assert report["date"].endswith("Z") and report["command"].startswith("python3 ")


def test_peer_library_columns_only_where_a_row_has_them_and_count_in_vs_best(tmp_path):
    a = run(tmp_path, "a.json", [row("w", ours=10.0, op="RMSNormFwdOp", flashinfer_us=12.0, liger_us=8.0),
                                 row("v", ours=10.0, op="RMSNormFwdOp", liger_us=None),
                                 row("s", op="SoftmaxFwdOp")])
    text = perf_table.render(perf_table.load_runs([a]), OPS, root=str(tmp_path))
    assert "| ours µs | eager µs | compile µs | flashinfer µs | Liger µs | copy µs |" in text
    w, v, s = table_rows(text)
    assert (w[7], w[8], w[11]) == ("12.0", "8.00", "**0.80×**")  # Liger's 8 beats ours: bold
    assert (v[7], v[8], v[11]) == ("–", "–", "1.50×")  # no peer in this row: best of eager and compile
    assert len(s) == 11  # the reduction table has no peer columns


def test_a_torch_call_that_could_not_be_timed_leaves_its_cell_empty(tmp_path):
    # torch eager's masked_fill with a 0-dim CUDA value synchronises: it cannot be captured, so no cell.
    a = run(tmp_path, "a.json", [row("w", ours=10.0, eager=None, compile_=12.0, op="SoftmaxFwdOp"),
                                 row("v", ours=10.0, eager=None, compile_=None, op="SoftmaxFwdOp")])
    w, v = table_rows(perf_table.render(perf_table.load_runs([a]), OPS, root=str(tmp_path)))
    assert (w[5], w[6], w[9]) == ("–", "12.0", "1.20×")
    assert (v[5], v[6], v[9]) == ("–", "–", "–")
    with pytest.raises(perf_table.TableError, match="ours_us"):
        perf_table.load_runs([run(tmp_path, "b.json", [row("w", ours=None, op="SoftmaxFwdOp")])])


def test_a_peer_time_that_is_not_a_positive_number_is_an_error(tmp_path):
    a = run(tmp_path, "a.json", [row("w", op="RMSNormFwdOp", liger_us="fast")])
    with pytest.raises(perf_table.TableError, match="liger_us"):
        perf_table.load_runs([a])


def test_harness_records_the_peer_versions_only_when_a_row_timed_a_peer(tmp_path, monkeypatch):
    import harness
    import peers
    monkeypatch.setattr(peers, "versions", lambda: {"liger-kernel": "0.8.5"})
    out = tmp_path / "r.json"
    harness.write_json(str(out), {"kernels": {"SoftmaxFwdOp": [row("s", liger_us=3.0)]}})
    assert json.loads(out.read_text())["peers"] == {"liger-kernel": "0.8.5"}
    harness.write_json(str(out), {"kernels": [row("s")]})
    assert "peers" not in json.loads(out.read_text())


def test_harness_compiled_keeps_compiling_past_dynamos_recompile_limit():
    import torch
    import harness
    compiles = []

    def backend(gm, example_inputs):
        compiles.append(1)
        return gm.forward

    def twelve_rows(compile_fn):
        # One closure per row over the same code object, as the benchmarks build them.
        compiles.clear()
        torch._dynamo.reset()
        for n in range(12):
            compile_fn(lambda x: x * n + 1, backend=backend)(torch.ones(2))
        return len(compiles)

    assert twelve_rows(torch.compile) < 12  # plain torch.compile falls back to eager past the limit
    assert twelve_rows(harness.compiled) == 12


def test_a_workload_labelled_with_its_op_shows_the_workload_alone(tmp_path):
    # bench_norm.py prints several ops in one table, so its rows say "<op> <workload>"
    a = run(tmp_path, "a.json", [row("RMSNormFwdOp llama-decode", op="RMSNormFwdOp"),
                                 row("RMSNormFwdOpX other", op="RMSNormFwdOp")])
    rows = table_rows(perf_table.render(perf_table.load_runs([a]), OPS, root=str(tmp_path)))
    assert [r[1] for r in rows] == ["llama-decode", "RMSNormFwdOpX other"]
