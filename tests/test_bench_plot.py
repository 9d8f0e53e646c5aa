"""scripts/bench/plot.py: a PNG from benchmark JSON (both layouts bench_*.py write), clear errors for
files it cannot use and for a missing matplotlib. Needs no GPU; the PNG test skips without matplotlib."""
import json
import os
import struct
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "bench"))

import plot  # noqa: E402


def row(workload, dtype="bfloat16", ours=10.0, eager=20.0, compile_=15.0, copy=9.0, **extra):
    return {"workload": workload, "shape": "4x8", "dtype": dtype, "ours_us": ours, "eager_us": eager,
            "compile_us": compile_, "copy_us": copy, **extra}


def write(tmp_path, name, report):
    path = tmp_path / name
    path.write_text(json.dumps(report) if not isinstance(report, str) else report)
    return str(path)


def test_rows_from_both_layouts(tmp_path):
    listed = write(tmp_path, "h200_bench_activation_x.json", {"device": "GPU", "torch": "2.14", "kernels": [
        row("a", op="ReluFwdOp"), row("b", dtype="int32", op="SigmoidFwdOp")]})
    by_op = write(tmp_path, "h200_bench_reduction_x.json", {"kernels": {"SoftmaxFwdOp": [row("c")]}})
    no_op = write(tmp_path, "h200_bench_norm_x.json", {"kernels": [row("d", eager=9.0)]})
    rows, headers = plot.load_rows([listed, by_op, no_op])
    assert [(r["op"], r["workload"], r["dtype"]) for r in rows] == [
        ("ReluFwdOp", "a", "bfloat16"), ("SigmoidFwdOp", "b", "int32"), ("SoftmaxFwdOp", "c", "bfloat16"),
        ("norm", "d", "bfloat16")]  # rows without an op take the file's family
    assert rows[0]["fractions"] == {"ours": 0.9, "torch eager": 0.45, "torch.compile": 0.6}
    assert rows[3]["fractions"]["torch eager"] == 1.0
    assert headers == ["GPU, torch 2.14"]


def test_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    src = write(tmp_path, "bench.json", {"device": "GPU", "torch": "2.14", "kernels": [
        row("w1", op="ReluFwdOp"), row("w2", op="ReluFwdOp", ours=5.0), row("w3", op="SiluFwdOp")]})
    out = tmp_path / "out" / "perf.png"  # the folder is created
    assert plot.main([src, "--out", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 200 and height > 200
    assert data[-8:-4] == b"IEND"


@pytest.mark.parametrize("content,message", [
    ("{not json", r"not valid JSON \(line 1, column 2"),
    ([1, 2], r"expected an object with a 'kernels' list .*got list"),
    ({"device": "GPU"}, r"expected an object with a 'kernels' list .*got NoneType"),
    ({"kernels": [row("a", copy=None)]}, r"kernels\[0\]: 'copy_us' must be a positive number of µs, got None"),
    ({"kernels": [{"workload": "a", "dtype": "float16", "ours_us": 1.0}]}, r"kernels\[0\]: missing 'copy_us'"),
    ({"kernels": {"ReluFwdOp": [row("a", ours=0)]}}, r"kernels\['ReluFwdOp'\]\[0\]: 'ours_us' must be a positive"),
    ({"kernels": {"ReluFwdOp": "a"}}, r"kernels\['ReluFwdOp'\] must be a list of rows"),
    ({"kernels": []}, r"no benchmark rows in"),
])
def test_malformed_json_is_a_clear_error(tmp_path, capsys, content, message):
    path = write(tmp_path, "bad.json", content)
    with pytest.raises(plot.PlotError, match=message) as e:
        plot.load_rows([path])
    if "no benchmark rows" not in message:
        assert str(e.value).startswith(path)  # names the file
    assert plot.main([path, "--out", str(tmp_path / "x.png")]) == 1
    assert "plot.py: error: " in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_missing_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    src = write(tmp_path, "bench.json", {"kernels": [row("w", op="ReluFwdOp")]})
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(plot.PlotError, match=r"matplotlib is not installed.*pip install matplotlib"):
        plot.plot(plot.load_rows([src])[0], str(tmp_path / "x.png"))
