"""scripts/debug/sass_diff.py: reads the kernel cache's files, keeps only instructions, and reports a
kernel whose instructions changed or that one snapshot lacks. Needs no GPU and no nvdisasm."""
import os
import struct
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "debug"))

import sass_diff  # noqa: E402

LISTING = """\t.target\tsm_90a
_Z6kernelv:
        /*0000*/                   LDC R1, c[0x0][0x28] ;              /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R36, SR_TID.X ;
"""


def cache_file(image=b"\x7fELF" + b"\0" * 12, name=b"_Z6kernelv"):
    return sass_diff.HEADER.pack(b"TOPSCUBN", 2, 2, 13000, len(name), len(image)) + name + image + b"t" * 32


def test_the_image_is_the_elf_between_the_name_and_the_tag():
    assert sass_diff.cubin_image(cache_file(), "k.cubin") == b"\x7fELF" + b"\0" * 12
    with pytest.raises(ValueError, match="k.cubin: not a tileops kernel cache file"):
        sass_diff.cubin_image(b"XXXXXXXX" + cache_file()[8:], "k.cubin")
    with pytest.raises(ValueError, match="truncated or not an ELF image"):
        sass_diff.cubin_image(cache_file()[:40], "k.cubin")


def test_addresses_and_encodings_are_dropped_instructions_kept():
    text = sass_diff.normalized(LISTING)
    assert "/*0000*/" not in text and "0x00000a00ff017b82" not in text
    assert "LDC R1, c[0x0][0x28] ;" in text and "S2R R36, SR_TID.X ;" in text
    moved = LISTING.replace("/*0000*/", "/*0100*/").replace("/*0010*/", "/*0110*/")
    assert sass_diff.normalized(moved) == text


def test_kernel_names_and_global_slots_are_dropped_registers_and_params_kept():
    renamed = sass_diff.normalized(LISTING.replace("_Z6kernelv", "_ZN7tileops2ew2OpIfEEv"))
    assert renamed == sass_diff.normalized(LISTING)
    slot = "ULDC.64 UR8, c[0x4][0x18] ;\nLDC R2, c[0x0][0x210] ;\n"
    assert sass_diff.normalized(slot) == sass_diff.normalized(slot.replace("0x18", "0x98"))
    assert sass_diff.normalized(slot) != sass_diff.normalized(slot.replace("0x210", "0x218"))  # a param moved
    assert sass_diff.normalized(slot) != sass_diff.normalized(slot.replace("UR8", "UR10"))


def test_kernel_name_drops_the_disk_key():
    assert sass_diff.kernel_name("/c/rms_norm_fwd__bf16__n4096__v8__sm_90a-441fd269535789cb.cubin") == \
        "rms_norm_fwd__bf16__n4096__v8__sm_90a"


def write(folder, files):
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return str(folder)


def test_compare_passes_only_when_every_kernel_is_the_same(tmp_path, capsys):
    same = sass_diff.normalized(LISTING)
    a = write(tmp_path / "a", {"k1.sass": same, "k2.sass": same})
    assert sass_diff.compare(a, write(tmp_path / "b", {"k1.sass": same, "k2.sass": same})) == 0
    changed = write(tmp_path / "c", {"k1.sass": same, "k2.sass": same.replace("R36", "R37")})
    assert sass_diff.compare(a, changed) == 1
    assert "1 differ" in capsys.readouterr().out
    assert sass_diff.compare(a, write(tmp_path / "d", {"k1.sass": same})) == 1
    assert "only in " + a + ": k2.sass" in capsys.readouterr().out


def test_layout_variants_are_the_same_shape_transposed_broadcast_and_strided():
    import torch
    variants = list(sass_diff.layout_variants([3, 4, 5], torch.float16))
    assert [tuple(v.shape) for v in variants] == [(3, 4, 5)] * 3
    transposed, broadcast, strided = variants
    assert transposed.stride() == (20, 1, 4)  # the last two dims' strides swapped
    assert broadcast.stride() == (0, 0, 1)
    assert strided.stride() == (40, 10, 2)
    assert list(sass_diff.layout_variants([7], torch.float16)) == []  # one dim: nothing to vary
    assert list(sass_diff.layout_variants([1, 5], torch.float16)) == []


def test_layout_plans_reach_the_tiled_strided_and_vector_paths():
    import tileops  # noqa: F401  (the library, for the offline plan)
    lines = sass_diff.plan_layouts(["h200"], ["AddFwdOp"])
    kinds = {k for k in ("tiled_fwd", "strided_fwd", "strided_vec_fwd") if any(k + "<" in ln for ln in lines)}
    assert kinds == {"tiled_fwd", "strided_fwd", "strided_vec_fwd"}, lines[:3]
