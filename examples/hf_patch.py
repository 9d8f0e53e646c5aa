"""One line moves a Hugging Face model onto tileops ops: tileops.patch(model).

    PYTHONPATH=python python examples/hf_patch.py        # needs transformers (pip install tileops[hf])

On CPU: a tiny random Llama (no download), run unpatched and patched; prints what was replaced and
whether the logits and the greedy tokens agree (exit code 1 if not). On a CUDA GPU, also a larger
random Llama in bfloat16: prefill tokens/s and peak memory for eager, torch.compile, patched, patched +
torch.compile and, where liger_kernel is installed, Liger.
"""
from __future__ import annotations

import copy
import sys
import time

import torch

import tileops

try:
    import transformers
except ImportError:
    sys.exit("examples/hf_patch.py needs transformers: pip install 'tileops[hf]' (or transformers)")


def tiny_llama(**overrides):
    config = transformers.LlamaConfig(**{**dict(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2),
        **overrides})
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def check_cpu() -> bool:
    model = tiny_llama()
    ids = torch.randint(3, 128, (2, 16))
    with torch.no_grad():
        logits = model(ids).logits
        tokens = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0)
        with tileops.patched(model) as summary:
            p_logits = model(ids).logits
            p_tokens = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0)
    diff = (p_logits - logits).abs().max().item()
    same = diff <= 1e-5 and torch.equal(p_tokens, tokens)
    print(summary)
    print(f"cpu float32: max |logits - HF| = {diff:.2e}, greedy tokens {'equal' if torch.equal(p_tokens, tokens) else 'DIFFER'}"
          f" -> {'equal' if same else 'NOT EQUAL'}")
    return same


def bench_gpu() -> None:
    # A 1B-class shape with random weights: throughput does not depend on the values.
    with torch.device("cuda"):  # initialised on the GPU: seconds, not a CPU init of 1B parameters
        base = tiny_llama(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=16,
                          num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=4096)
    base = base.to(torch.bfloat16)
    ids = torch.randint(3, 32000, (4, 1024), device="cuda")

    def measure(name, model):
        with torch.no_grad():
            for _ in range(3):  # warm-up: kernel builds (NVRTC), torch.compile, autotuning
                model(ids)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            n, t0 = 10, time.perf_counter()
            for _ in range(n):
                model(ids)
            torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) / n
        gib = torch.cuda.max_memory_allocated() / 2 ** 30
        print(f"{name:24s} {ids.numel() / dt:12,.0f} tokens/s {gib:8.2f} GiB peak")

    print(f"gpu {torch.cuda.get_device_name()}: bfloat16 Llama, 16 layers, hidden 2048, prefill batch 4 x 1024")
    measure("eager (HF)", base)
    measure("torch.compile (HF)", torch.compile(base, fullgraph=True))
    patched = copy.deepcopy(base)
    tileops.patch(patched)
    measure("tileops.patch", patched)
    measure("tileops.patch + compile", torch.compile(patched, fullgraph=True))
    try:
        from liger_kernel.transformers import apply_liger_kernel_to_llama
    except ImportError:
        print("liger_kernel not installed: no Liger row")
        return
    liger = copy.deepcopy(base)
    apply_liger_kernel_to_llama(model=liger)  # Liger also swaps HF's rotary function module-wide
    measure("Liger", liger)


if __name__ == "__main__":
    ok = check_cpu()
    if torch.cuda.is_available():
        bench_gpu()
    sys.exit(0 if ok else 1)
