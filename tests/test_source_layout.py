"""The targets' files follow the one layout docs/ADDING_AN_OP.md states: the reference target is a file
per manifest family (+ its header), an nvrtc engine is `<engine>.cpp` (+ `.h`) or, split by role,
`<engine>_plan.cpp`, `<engine>_launch.cpp` (+ `.h`) and `<engine>_ops.cpp`, never a mix of the two.
Torch-free; reads the file names only."""
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.path.join(ROOT, "src", "targets")
ROLES = ("_plan.cpp", "_launch.cpp", "_launch.h", "_ops.cpp")


def families():
    out = set()
    for name in os.listdir(os.path.join(ROOT, "manifests")):
        if name.endswith(".yaml"):
            with open(os.path.join(ROOT, "manifests", name), encoding="utf-8") as f:
                out |= {e["family"] for e in yaml.safe_load(f).values() if isinstance(e, dict) and "family" in e}
    return out


def reference_misfits(names, fams):
    allowed = {f"{fam}{ext}" for fam in fams for ext in (".cpp", ".h")} | {"reference.cpp", "reference.h"}
    return sorted(n for n in names if n not in allowed)


def engine_misfits(names):
    """Engines whose files mix the one-file and the split layout, or split without all three roles."""
    bad = []
    split = {n[: -len(r)] for n in names for r in ROLES if n.endswith(r)}
    for engine in sorted(split):
        roles = {r for r in ROLES if engine + r in names}
        if f"{engine}.cpp" in names:
            bad.append(f"{engine}: both {engine}.cpp and {sorted(roles)}")
        missing = {"_plan.cpp", "_launch.cpp", "_ops.cpp"} - roles
        if missing:
            bad.append(f"{engine}: split without {sorted(missing)}")
    for n in names:
        if n.endswith(".h") and not n.endswith("_launch.h") and n[:-2] not in split and n[:-2] + ".cpp" not in names:
            bad.append(f"{n}: a header without its engine's .cpp")
    return bad


def test_reference_target_is_one_file_per_family():
    names = os.listdir(os.path.join(TARGETS, "reference"))
    assert reference_misfits(names, families()) == []


def test_nvrtc_engines_have_one_layout():
    bad = []
    for fam in sorted(os.listdir(os.path.join(TARGETS, "nvrtc"))):
        path = os.path.join(TARGETS, "nvrtc", fam)
        if os.path.isdir(path):
            bad += [f"nvrtc/{fam}/{b}" for b in engine_misfits(set(os.listdir(path)))]
    assert bad == []


def test_the_layout_checks_can_fail():
    fams = {"norm", "position"}
    assert reference_misfits(["norm.cpp", "norm_rms_norm_fwd.cpp", "position.h"], fams) == ["norm_rms_norm_fwd.cpp"]
    assert engine_misfits({"softmax.h", "softmax_plan.cpp", "softmax_launch.cpp", "softmax_ops.cpp"}) == []
    assert engine_misfits({"softmax.cpp", "softmax_plan.cpp", "softmax_launch.cpp", "softmax_ops.cpp"})
    assert engine_misfits({"group_norm.h", "group_norm_plan.cpp", "group_norm_fwd.cpp"}) != []
    assert engine_misfits({"rope.h"}) == ["rope.h: a header without its engine's .cpp"]
