"""tileops.patch on tiny random Hugging Face models (no network: built from config classes).

For each architecture: the patched model gives HF's logits (float32 within 1e-5, bfloat16 as close to
the float32 result as HF's own bfloat16), HF's loss and gradients in training mode, HF's greedy tokens
from generate() with a KV cache, and the same logits under torch.compile(fullgraph=True) with one
tileops node per replaced call. Then the mechanics: exact unpatch, independence of two models, the
per-architecture forms, what is left alone, the log line and the autograd pairing switch.
"""
import copy
import logging
import os
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

import tileops  # noqa: E402
import tileops.hf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYERS = 2
COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
              eos_token_id=2, tie_word_embeddings=False)
ARCHS = {
    "llama": (transformers.LlamaConfig, {}),
    "mistral": (transformers.MistralConfig, {}),
    "qwen2": (transformers.Qwen2Config, {}),
    "qwen3": (transformers.Qwen3Config, {}),
    "gemma": (transformers.GemmaConfig, {}),
    "gemma2": (transformers.Gemma2Config, {}),
    # Phi-3's partial rotary form: half of each head rotated, the rest passed through.
    "phi3": (transformers.Phi3Config, {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                           "partial_rotary_factor": 0.5}}),
}
# RMSNorms a forward calls: two a layer and the final one; Qwen3 adds q/k norms, Gemma2 the feed-forward pair.
NORMS = {"qwen3": 4 * LAYERS + 1, "gemma2": 4 * LAYERS + 1}
GATED_OP = {"gemma": "GeluTanhAndMulFwdOp", "gemma2": "GeluTanhAndMulFwdOp"}


def make_model(arch, seed=0, **overrides):
    cls, extra = ARCHS[arch]
    config = cls(**{**COMMON, **extra, **overrides})
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    # HF's init (std 0.02, norm weights 1 or 0) would leave every op near its identity; these make the
    # activations O(1) and every norm weight matter.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0 if arch not in ("gemma", "gemma2") else 0.0, 0.5)
            else:
                p.normal_(0.0, 0.25)
    return model.eval()


@pytest.fixture(autouse=True)
def _pairing_restored():
    """patch turns the process-wide autograd pairing on; other tests in this worker expect it as it was."""
    before = tileops.autograd_enabled()
    yield
    tileops.enable_autograd(before)


def tileops_calls(fn):
    """How many tileops operator calls fn() makes (a dispatch mode sees each one)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == "tileops":
                Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        out = fn()
    return out, Count.n


INPUT = torch.tensor([[5, 17, 33, 2, 71, 40, 9, 88, 64, 12, 3, 50], [7, 7, 90, 21, 1, 36, 60, 14, 29, 81, 44, 6]])


@pytest.fixture(scope="module", params=list(ARCHS))
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def model(arch):
    return make_model(arch)


# --- equality, per architecture ----------------------------------------------------------------------

def expected_counts(arch):
    p = tileops.hf._CLASS_PREFIX[arch]
    norm_op = "GemmaRMSNormFwdOp" if arch in ("gemma", "gemma2") else "RMSNormFwdOp"
    return {f"{p}RMSNorm -> {norm_op}": NORMS.get(arch, 2 * LAYERS + 1),
            f"{p}MLP -> {GATED_OP.get(arch, 'SiluAndMulFwdOp')}": LAYERS,
            f"{p}Attention rotary -> RopeNeoxCachedFwdOp": LAYERS}


def test_summary_names_every_replacement(arch, model):
    with tileops.patched(model) as summary:
        assert summary.counts == expected_counts(arch)
        assert summary.calls_per_forward == sum(expected_counts(arch).values())
        assert summary.skipped == []
        assert "attention" in " ".join(summary.untouched)
    assert not any("forward" in m.__dict__ for m in model.modules())


def test_float32_logits(arch, model):
    with torch.no_grad():
        want = model(INPUT).logits
        with tileops.patched(model) as summary:
            got, calls = tileops_calls(lambda: model(INPUT).logits)
    assert calls == summary.calls_per_forward  # every replaced module ran its op, once
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_bfloat16_logits(arch, model):
    ref = model.to(torch.float32)
    low = copy.deepcopy(model).to(torch.bfloat16)
    with torch.no_grad():
        exact = ref(INPUT).logits
        hf = low(INPUT).logits.float()
        with tileops.patched(low):
            got, calls = tileops_calls(lambda: low(INPUT).logits.float())
    assert calls > 0

    def rms(a):
        return (a - exact).pow(2).mean().sqrt().item()

    # The ops round once where HF rounds at each step, so the two bfloat16 runs differ by rounding
    # (measured: RMS error vs float32 0.017-0.067 for HF, within 5% of it for tileops, over 7
    # architectures and two seeds; max |tileops - HF| up to 8% of the largest logit). A wrong op
    # is off by the logits' own size.
    assert rms(got) <= 1.25 * rms(hf)
    assert (got - hf).abs().max().item() <= 0.1 * exact.abs().max().item()


def test_training_loss_and_gradients(arch, model):
    def step():
        model.zero_grad(set_to_none=True)
        loss = model(INPUT, labels=INPUT).loss
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    model.train()
    try:
        want_loss, want = step()
        with tileops.patched(model) as summary:
            (got_loss, got), calls = tileops_calls(step)
    finally:
        model.zero_grad(set_to_none=True)
        model.eval()
    # The forward's calls, then each norm's paired backward op and each layer's inverse rotation.
    assert calls == summary.calls_per_forward + NORMS.get(arch, 2 * LAYERS + 1) + LAYERS
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=1e-6)
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-5, msg=name)


def test_greedy_generate_with_kv_cache(arch, model):
    kwargs = dict(max_new_tokens=6, do_sample=False, use_cache=True, pad_token_id=0)
    want = model.generate(INPUT, **kwargs)
    with tileops.patched(model):
        got, calls = tileops_calls(lambda: model.generate(INPUT, **kwargs))
    # One prefill and five cached decode steps, each calling every replaced op.
    assert calls == 6 * sum(expected_counts(arch).values())
    assert torch.equal(got, want)


def test_compile_fullgraph_one_node_per_call(arch, model):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        # aot_eager functionalises the graph (RoPE's in-place op) as inductor would, without codegen.
        from torch._dynamo.backends.debugging import aot_eager
        return aot_eager(gm, example_inputs)

    with torch.no_grad():
        want = model(INPUT).logits
        with tileops.patched(model) as summary:
            torch._dynamo.reset()
            compiled = torch.compile(model, backend=backend, fullgraph=True)
            got = compiled(INPUT).logits
            compiled(INPUT)  # the first call's guards hold: no second graph
    torch._dynamo.reset()
    assert len(graphs) == 1
    nodes = [n for n in graphs[0].graph.nodes
             if n.op == "call_function" and getattr(n.target, "namespace", None) == "tileops"]
    assert len(nodes) == summary.calls_per_forward
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# --- the mechanics (one architecture) ----------------------------------------------------------------

@pytest.mark.parametrize("arch", ["qwen3", "phi3"])
def test_rope_attention_globals_are_a_registered_module(arch):
    # The compiler resolves an inlined function's globals through sys.modules[__name__]; a bare dict
    # copy sends its guards to the original module, whose apply_rotary_pos_emb is not ours.
    model = make_model(arch)
    with tileops.patched(model):
        patched = [m for m in model.modules() if type(m).__name__.endswith("Attention") and "forward" in m.__dict__]
        assert patched
        for m in patched:
            g = m.forward.__func__.__globals__
            assert sys.modules[g["__name__"]].__dict__ is g
            assert g["apply_rotary_pos_emb"] is not sys.modules[type(m).__module__].apply_rotary_pos_emb

def test_unpatch_restores_the_model_exactly():
    model = make_model("qwen3")
    params = {n: (p, p.data_ptr(), p.detach().clone()) for n, p in model.named_parameters()}
    classes = {n: type(m) for n, m in model.named_modules()}
    with torch.no_grad():
        before = model(INPUT).logits
        summary = tileops.patch(model)
        patched_forwards = sum("forward" in m.__dict__ for m in model.modules())
        assert patched_forwards == summary.calls_per_forward
        assert tileops.unpatch(model) == patched_forwards
        after, calls = tileops_calls(lambda: model(INPUT).logits)
    assert calls == 0
    assert not any("forward" in m.__dict__ for m in model.modules())
    assert {n: type(m) for n, m in model.named_modules()} == classes
    for n, p in model.named_parameters():
        obj, ptr, value = params[n]
        assert p is obj and p.data_ptr() == ptr and torch.equal(p, value)
    assert torch.equal(after, before)


def test_context_manager_restores_on_error():
    model = make_model("llama")
    with pytest.raises(RuntimeError, match="boom"):
        with tileops.patched(model):
            assert any("forward" in m.__dict__ for m in model.modules())
            raise RuntimeError("boom")
    assert not any("forward" in m.__dict__ for m in model.modules())


def test_two_models_are_independent():
    a, b = make_model("llama", seed=1), make_model("llama", seed=2)
    with torch.no_grad():
        want_b = b(INPUT).logits
        tileops.patch(a)
        try:
            got_b, calls = tileops_calls(lambda: b(INPUT).logits)
            assert calls == 0 and not any("forward" in m.__dict__ for m in b.modules())
            assert torch.equal(got_b, want_b)
            # A deep copy of a patched model runs on its own weights, not the original's.
            c = copy.deepcopy(a)
            for p in c.parameters():
                p.mul_(0.5)
            got_c = c(INPUT).logits
            tileops.unpatch(c)
            torch.testing.assert_close(got_c, c(INPUT).logits, rtol=1e-5, atol=1e-5)
        finally:
            tileops.unpatch(a)


def test_patch_twice_is_patch_once():
    model = make_model("llama")
    first = tileops.patch(model)
    second = tileops.patch(model)
    assert first.calls_per_forward > 0 and second.counts == {}
    assert tileops.unpatch(model) == first.calls_per_forward


def test_per_architecture_forms():
    llama, qwen2 = make_model("llama"), make_model("qwen2")
    with pytest.raises(ValueError, match="no llama modules"):
        tileops.hf.apply_to_llama(qwen2)
    summary = tileops.hf.apply_to_llama(llama, rope=False)
    try:
        assert summary.counts == {"LlamaRMSNorm -> RMSNormFwdOp": 2 * LAYERS + 1, "LlamaMLP -> SiluAndMulFwdOp": LAYERS}
    finally:
        tileops.unpatch(llama)
    for arch in tileops.hf.ARCHITECTURES:
        assert callable(getattr(tileops.hf, f"apply_to_{arch}"))


def test_unrecognised_modules_are_left_alone():
    # GPT-2: nn.LayerNorm (served), a gelu_new MLP and attention without RoPE (not served).
    config = transformers.GPT2Config(vocab_size=96, n_embd=64, n_layer=LAYERS, n_head=4, n_positions=64,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") else 0.0, 0.25)
        want = model(INPUT).logits
        with tileops.patched(model) as summary:
            got, calls = tileops_calls(lambda: model(INPUT).logits)
            untouched = [n for n, m in model.named_modules() if n and "forward" not in m.__dict__]
    assert summary.counts == {"LayerNorm -> LayerNormFwdOp": 2 * LAYERS + 1}
    assert calls == 2 * LAYERS + 1
    assert "transformer.h.0.mlp" in untouched and "transformer.h.0.attn" in untouched
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # LayerNorm trains through its paired backward op.
    model.train()
    model.zero_grad()
    model(INPUT, labels=INPUT).loss.backward()
    want_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    with tileops.patched(model):
        model(INPUT, labels=INPUT).loss.backward()
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want_grads[n], rtol=1e-4, atol=1e-5, msg=n)


def test_an_activation_without_a_gated_op_is_skipped():
    model = make_model("llama", hidden_act="gelu_new")  # tanh GELU written out: not the op's function
    with tileops.patched(model) as summary:
        assert "LlamaMLP -> SiluAndMulFwdOp" not in summary.counts
        assert [r for _, r in summary.skipped] == ["its activation has no gated tileops op"] * LAYERS
    model = make_model("llama", hidden_act="gelu")  # exact GELU: GeluAndMulFwdOp
    with torch.no_grad():
        want = model(INPUT).logits
        with tileops.patched(model) as summary:
            got = model(INPUT).logits
    assert summary.counts["LlamaMLP -> GeluAndMulFwdOp"] == LAYERS
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_forward_someone_else_replaced_is_skipped():
    model = make_model("llama")
    norm = model.model.norm
    norm.forward = lambda x: x  # another tool's instance patch: not ours to take over or undo
    with tileops.patched(model) as summary:
        assert summary.skipped == [("model.norm", "its forward was already replaced by someone else")]
    assert norm.__dict__["forward"](3) == 3


def test_inputs_the_ops_do_not_take_run_hf_code():
    model = make_model("llama").to(torch.float64)
    with torch.no_grad():
        want = model(INPUT).logits
        with tileops.patched(model):
            got, calls = tileops_calls(lambda: model(INPUT).logits)
    assert calls == 0
    assert torch.equal(got, want)


def test_patch_logs_its_summary(caplog):
    model = make_model("mistral")
    with caplog.at_level(logging.INFO, logger="tileops.hf"):
        with tileops.patched(model) as summary:
            pass
    assert [r.getMessage() for r in caplog.records if r.name == "tileops.hf"] == [str(summary)]
    assert str(summary).startswith("tileops.patch(MistralForCausalLM): ")
    assert "5 x MistralRMSNorm -> RMSNormFwdOp" in str(summary) and "untouched: attention" in str(summary)


def test_autograd_pairing_on_while_patched():
    tileops.enable_autograd(False)
    model = make_model("llama")
    summary = tileops.patch(model)
    assert summary.autograd_pairing and tileops.autograd_enabled()
    tileops.unpatch(model)
    assert not tileops.autograd_enabled()  # it was off: the last unpatch turns it off again


def test_import_tileops_does_not_import_transformers():
    # tileops.hf too (reached as an attribute), until a patch needs transformers' classes.
    code = ("import sys, tileops, tileops.norm; tileops.load(); assert tileops.hf.ARCHITECTURES; "
            "assert 'transformers' not in sys.modules, 'imported'; print('ok')")
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_rope_matches_hf_and_leaves_its_inputs_alone():
    from transformers.models.llama import modeling_llama as L
    from transformers.models.phi3 import modeling_phi3 as P
    torch.manual_seed(0)
    b, s = 2, 5
    # As HF makes them: [b, heads, s, d] views of token-major projections.
    q, k = torch.randn(b, s, 4, 16).transpose(1, 2), torch.randn(b, s, 2, 16).transpose(1, 2)
    q0, k0 = q.clone(), k.clone()
    emb = L.LlamaRotaryEmbedding(make_model("llama").config)
    for position_ids in (torch.arange(s)[None], torch.tensor([[0, 0, 1, 2, 3], [0, 1, 2, 3, 4]])):
        cos, sin = emb(q, position_ids)  # a batch of 1 broadcast, then one row a sequence (left padding)
        rope = tileops.hf._make_rope(L.apply_rotary_pos_emb, partial=False)
        got, calls = tileops_calls(lambda: rope(q, k, cos, sin))
        assert calls == 1
        for g, w in zip(got, L.apply_rotary_pos_emb(q, k, cos, sin)):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
        assert torch.equal(q, q0) and torch.equal(k, k0)
    # Phi-3 rotates the first cos.shape[-1] dims and passes the rest; Llama's form does not take that.
    half_cos, half_sin = make_model("phi3").model.rotary_emb(q, position_ids)  # 8 of 16 dims
    assert half_cos.shape[-1] == 8
    partial = tileops.hf._make_rope(P.apply_rotary_pos_emb, partial=True)
    for g, w in zip(partial(q, k, half_cos, half_sin), P.apply_rotary_pos_emb(q, k, half_cos, half_sin)):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
    full = tileops.hf._make_rope(lambda *a: "hf", partial=False)
    assert full(q, k, half_cos, half_sin) == "hf"


def test_torch_norm_modules():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.RMSNorm(32), torch.nn.LayerNorm(32, bias=False),
                              torch.nn.Unflatten(1, (4, 8)), torch.nn.RMSNorm([4, 8], eps=1e-3))
    x = torch.randn(3, 8)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.5, 0.5)
        want = net(x)
        with tileops.patched(net) as summary:
            got, calls = tileops_calls(lambda: net(x))
    assert summary.counts == {"RMSNorm -> RMSNormFwdOp": 2, "LayerNorm -> LayerNormFwdOp": 1}
    assert calls == 3
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_weight_of_another_dtype_runs_hf_code():
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    norm = LlamaRMSNorm(16)  # float32 weight beside a bfloat16 x: HF's result is float32, the op's would not be
    x = torch.randn(3, 16, dtype=torch.bfloat16)
    with torch.no_grad():
        want = norm(x)
        with tileops.patched(norm):
            got, calls = tileops_calls(lambda: norm(x))
            assert tileops_calls(lambda: norm(x.float()))[1] == 1
    assert calls == 0 and got.dtype == want.dtype == torch.float32 and torch.equal(got, want)


def test_a_class_patched_by_another_tool_is_skipped(monkeypatch):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    def other_forward(self, x):  # e.g. a kernel library's class-wide replacement
        return x

    monkeypatch.setattr(LlamaRMSNorm, "forward", other_forward)
    model = make_model("llama")
    with tileops.patched(model) as summary:
        assert not any(k.startswith("LlamaRMSNorm") for k in summary.counts)
        assert len(summary.skipped) == 2 * LAYERS + 1
        assert "replaced class-wide" in summary.skipped[0][1]


def test_rope_left_alone_when_the_rotary_embedding_is_not_hfs():
    model = make_model("llama")
    model.model.rotary_emb.forward = lambda x, position_ids: (None, None)  # rows of unknown layout
    with tileops.patched(model) as summary:
        assert "LlamaAttention rotary -> RopeNeoxCachedFwdOp" not in summary.counts
        assert summary.skipped[0][1] == "its rotary embedding is not HF's own (cos/sin rows unknown)"


def test_compiled_training_step():
    model = make_model("llama").train()
    try:
        model.zero_grad(set_to_none=True)
        model(INPUT, labels=INPUT).loss.backward()
        want = {n: p.grad.clone() for n, p in model.named_parameters()}
        model.zero_grad(set_to_none=True)
        with tileops.patched(model):
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
            compiled(INPUT, labels=INPUT).loss.backward()
        torch._dynamo.reset()
        for n, p in model.named_parameters():
            torch.testing.assert_close(p.grad, want[n], rtol=1e-4, atol=1e-5, msg=n)
    finally:
        model.eval()
