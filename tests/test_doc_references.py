"""Every file, section and measurement that the code and the docs cite exists: a repository path
(`src/...`, `docs/...`), a section of a doc (`docs/PERF.md, "Pools"`), a contract paragraph (`§7`),
and a measurement file that docs/PERF.md names. Torch-free; reads the tracked files only."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = ("src", "include", "python", "scripts", "manifests", "plugin", "docs", "tests", "cmake")
TEXT = (".cpp", ".h", ".cuh", ".cu", ".c", ".py", ".sh", ".yaml", ".md", ".txt", ".in", ".cmake", ".toml")


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return out.stdout.split()


FILES = tracked()
PATHS = set(FILES) | {os.path.dirname(f) for f in FILES} | {
    "/".join(f.split("/")[:i]) for f in FILES for i in range(1, f.count("/") + 1)}
SOURCES = [f for f in FILES if f.endswith(TEXT) and not f.startswith("docs/measurements/")
           and (f.split("/")[0] in TOP or "/" not in f) and f != "tests/test_doc_references.py"]  # its own examples


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def headings(doc):
    return [line.lstrip("#").strip() for line in read(doc).splitlines() if line.startswith("#")]


# A repository path: a top folder, then path characters. One followed by a placeholder (`{a,b}`,
# `<name>`, `*`, `$`) or a synthetic tree that a test builds in a temporary folder is not a reference.
REPO_PATH = re.compile(r"(?<![\w./$-])((?:%s)/[\w./-]*\w)(?![\w{<*$])" % "|".join(TOP))
# A section: `docs/X.md, "Title"`, the title possibly broken over comment lines.
SECTION = re.compile(r"(docs/\w+\.md),\s*\"([^\"]+)\"")
CONTRACT_SECTION = re.compile(r"§(\d+)")
MEASUREMENT = re.compile(r"`((?:ab|ncu|sweeps|callgrind)_\d{8}[\w.-]*)(?:/[\w.-]*)?`")


GENERATED = {"docs/OPS.md", "docs/TUNING.md"}  # written by scripts/codegen under build/generated/


def synthetic(source, ref):
    # tests/codegen writes manifests/t.yaml and friends into a temporary folder
    return source.startswith("tests/") and ref.startswith("manifests/") and ref not in PATHS


def test_every_repository_path_cited_exists():
    missing = []
    for source in SOURCES:
        for m in REPO_PATH.finditer(read(source)):
            ref = m.group(1).rstrip(".")
            if ref.startswith("build/") or ref in GENERATED or synthetic(source, ref) or ref in PATHS:
                continue
            missing.append(f"{source}: {ref}")
    assert not missing, "cited paths that do not exist:\n" + "\n".join(missing)


def test_every_doc_section_cited_exists():
    missing = []
    for source in SOURCES:
        for m in SECTION.finditer(read(source)):
            doc = m.group(1)
            title = re.sub(r"\s*(?://|#)?\s*\n\s*(?://|#)?\s*", " ", m.group(2)).strip()
            if doc not in PATHS:
                missing.append(f"{source}: {doc} (no such file)")
            elif not any(title in h for h in headings(doc)):
                missing.append(f"{source}: {doc}, \"{title}\"")
    assert not missing, "cited sections with no such heading:\n" + "\n".join(missing)


def test_every_contract_paragraph_cited_exists():
    numbered = {int(h.split(".")[0]) for h in headings("docs/CONTRACT.md") if h[:1].isdigit()}
    assert numbered, "docs/CONTRACT.md has no numbered sections"
    missing = [f"{source}: §{m.group(1)}" for source in SOURCES
               for m in CONTRACT_SECTION.finditer(read(source)) if int(m.group(1)) not in numbered]
    assert not missing, "cited contract paragraphs that do not exist:\n" + "\n".join(missing)


def test_every_measurement_perf_cites_is_kept():
    have = set(os.listdir(os.path.join(ROOT, "docs", "measurements")))
    missing = [m.group(1) for doc in ("docs/PERF.md", "docs/RELIABILITY.md")
               for m in MEASUREMENT.finditer(read(doc)) if m.group(1).rstrip("/") not in have]
    assert not missing, "docs/measurements lacks:\n" + "\n".join(missing)


def test_the_checks_catch_a_dangling_reference():
    assert REPO_PATH.search("see src/targets/nvrtc/no_such_file.cpp here").group(1) == \
        "src/targets/nvrtc/no_such_file.cpp"
    assert "src/targets/nvrtc/no_such_file.cpp" not in PATHS
    m = SECTION.search('(docs/PERF.md, "Why the plans\n// choose what they choose")')
    assert re.sub(r"\s*(?://|#)?\s*\n\s*(?://|#)?\s*", " ", m.group(2)) == "Why the plans choose what they choose"
    # a placeholder cuts the path at its folder, which is checked instead
    assert REPO_PATH.search("docs/measurements/h100_bench_{norm,reduction}").group(1) == "docs/measurements"
