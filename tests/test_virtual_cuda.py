"""Tests of attnbook.core.virtual_cuda (README "Devices"): the simulated CUDA device applies CUDA's device rules
on the CPU and changes no number, and the library's device bugs found on a real GPU (issue 35: chapter 10's LRP
on CPU-built ids, MiniLM relevance, chapter 11's gate snapshots) fail under it when put back."""

from __future__ import annotations

import copy

import pytest
import torch

from attnbook.core.virtual_cuda import VirtualCudaTensor, tag, virtual_cuda


def test_a_cpu_tensor_mixed_with_a_cuda_one_raises_as_on_cuda():
    with virtual_cuda() as dev:
        x = torch.ones(3, device=dev)
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.ones(3)
        with pytest.raises(RuntimeError, match="same device"):
            torch.cat([x, torch.ones(3)])
        with pytest.raises(RuntimeError, match="same device"):  # a CPU tensor passed by keyword
            torch.add(x, other=torch.ones(3))
        with pytest.raises(RuntimeError, match="same device"):  # or in a tuple of operands
            torch.stack((torch.ones(3), x))
        with pytest.raises(RuntimeError, match="same device"):
            torch.ones(3)[torch.zeros(2, dtype=torch.long, device=dev)]  # a CUDA index into a CPU tensor
        # allowed on CUDA: 0-dim CPU tensors, Python numbers, CPU indices into a CUDA tensor, copies
        assert torch.equal((x + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))
        assert x[torch.tensor([0, 2])].device.type == "cuda"
        y = torch.empty(3, device=dev)
        y.copy_(torch.arange(3.0))
        assert y.cpu().tolist() == [0.0, 1.0, 2.0]


def test_numpy_needs_cpu_first_and_cpu_untags():
    with virtual_cuda() as dev:
        x = torch.arange(4.0, device=dev)
        assert isinstance(x, VirtualCudaTensor) and x.device == torch.device("cuda", 0) and x.is_cuda
        with pytest.raises(TypeError, match="cuda:0 device type tensor to numpy"):
            x.numpy()
        for back in (x.cpu(), x.to("cpu"), x.to(torch.device("cpu")), x.to("cpu", torch.float64)):
            assert type(back) is torch.Tensor and back.device.type == "cpu"
            assert back.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
        assert x.to("cpu", torch.float64).dtype == torch.float64
        assert type(torch.zeros_like(x, device="cpu")) is torch.Tensor
        assert isinstance(torch.zeros(2).to(dev), VirtualCudaTensor)
        assert isinstance(torch.zeros(2).cuda(), VirtualCudaTensor)
        assert x[1].item() == 1.0 and x.tolist() == [0.0, 1.0, 2.0, 3.0]  # allowed on CUDA


def test_a_cuda_copy_does_not_alias_the_cpu_tensor():
    with virtual_cuda() as dev:
        cpu = torch.zeros(2)
        on_dev = cpu.to(dev)
        on_dev += 1
        assert cpu.tolist() == [0.0, 0.0]
        back = on_dev.cpu()
        back += 1
        assert on_dev.cpu().tolist() == [1.0, 1.0]


def test_training_on_virtual_cuda_gives_the_cpu_numbers_and_tagged_parameters_and_gradients():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 1))
    twin = copy.deepcopy(model)
    x, y = torch.randn(16, 4), torch.randn(16, 1)

    def train(m, dev):
        m = m.to(dev)
        opt = torch.optim.Adam(m.parameters(), lr=1e-2)
        for _ in range(4):
            loss = ((m(x.to(dev)) - y.to(dev)) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return m, loss.item()

    _, cpu_loss = train(model, "cpu")
    with virtual_cuda() as dev:
        moved, loss = train(twin, dev)
        p = next(moved.parameters())
        assert isinstance(p, torch.nn.Parameter) and p.device.type == "cuda" and p.grad.device.type == "cuda"
        g = torch.autograd.grad(moved(x.to(dev)).sum(), p)[0]
        assert g.device.type == "cuda"
        with pytest.raises(RuntimeError, match="same device"):
            moved(x)  # forgot to move the input
    assert loss == cpu_loss


def test_tag_refuses_a_tensor_that_is_not_on_the_cpu():
    with pytest.raises(ValueError, match="only CPU tensors"):
        tag(torch.zeros(1, device="meta"))


def test_outside_the_block_cuda_means_cuda_again():
    with virtual_cuda():
        pass
    if not torch.cuda.is_available():
        with pytest.raises((RuntimeError, AssertionError)):
            torch.zeros(1, device="cuda")


# --- the library's device bugs found on a real GPU (issue 35), each caught here when put back -----------------


def test_translation_lrp_runs_on_the_model_s_device_and_returns_cpu_records():
    from test_lrp import SRC, TGT, small_model
    from attnbook.heads import lrp

    want = lrp.sentence_relevance(small_model(), SRC, TGT)
    with virtual_cuda() as dev:
        got = lrp.sentence_relevance(small_model().to(dev), SRC, TGT)
    for k in want[0]:
        assert type(got[0][k]) is torch.Tensor
        torch.testing.assert_close(got[0][k], want[0][k])
    for w, g in zip(want[1:], got[1:]):
        assert type(g) is torch.Tensor
        torch.testing.assert_close(g, w)


def test_minilm_relevance_runs_on_the_model_s_device_and_returns_cpu_records():
    pytest.importorskip("transformers")
    from test_hf_relevance import IDS, tiny_bert
    from attnbook.hf import relevance

    want = relevance.sentence_head_relevance(tiny_bert(), IDS)
    with virtual_cuda() as dev:
        got = relevance.sentence_head_relevance(tiny_bert().to(dev), IDS)
    for w, g in zip(want, got):
        assert type(g) is torch.Tensor
        torch.testing.assert_close(g, w)


def test_gate_training_records_its_snapshots_on_the_cpu():
    from attnbook.core.attention import MultiHeadSelfAttention
    from attnbook.heads import gate_training, gates

    def task(model, batch, head_gates):
        return (model(batch)[0] ** 2).mean()

    kw = dict(lam=0.5, steps=2, lr=1e-4, gate_lr=0.05, schedule="constant", warmup=0, clip=None,
              progress=False, seed=0, record_every=1)
    torch.manual_seed(0)
    attn, x = MultiHeadSelfAttention(8, 2), torch.randn(4, 5, 8)
    want = gate_training.train_gates(copy.deepcopy(attn), gates.HeadGates((1, 2)), task, [x], device="cpu", **kw)
    with virtual_cuda() as dev:
        hist = gate_training.train_gates(attn.to(dev), gates.HeadGates((1, 2)).to(dev), task, [x.to(dev)],
                                         device=dev, **kw)
    for snap, ref in zip(hist["snapshots"], want["snapshots"]):
        for k, t in snap["p_open"].items():
            assert type(t) is torch.Tensor, "a record must come back on the CPU (chapter 11 calls .numpy())"
            torch.testing.assert_close(t, ref["p_open"][k])
        assert all(type(t) is torch.Tensor for t in snap["gates"].values())


def test_the_relevance_script_runs_its_model_on_the_device_it_is_given(tmp_path, monkeypatch):
    """scripts/head_relevance.py once loaded its model on the CPU whatever the machine: ``--device cuda`` now
    puts the translation model there, and the records it writes equal the CPU's."""
    import json

    from test_scripts import run_main, script

    mod = script("head_relevance")
    cpu, cuda = tmp_path / "cpu.json", tmp_path / "cuda.json"
    run_main(mod, ["--verses", "2", "--live", "1", "--out", str(cpu)], monkeypatch)
    with virtual_cuda():
        run_main(mod, ["--verses", "2", "--live", "1", "--device", "cuda", "--out", str(cuda)], monkeypatch)
    a, b = json.loads(cpu.read_text()), json.loads(cuda.read_text())
    assert a["relevance"] == b["relevance"] and a["first_verses"] == b["first_verses"]


def test_a_model_on_the_virtual_device_deep_copies_with_its_parameters_tagged():
    with virtual_cuda() as dev:
        model = torch.nn.Linear(3, 2).to(dev)
        twin = copy.deepcopy(model)
        p = twin.weight
        assert isinstance(p, torch.nn.Parameter) and p.device.type == "cuda" and p.requires_grad
        assert p is not model.weight and torch.equal(p.cpu(), model.weight.cpu())
        with torch.no_grad():
            p.add_(1)
        assert not torch.equal(p.cpu(), model.weight.cpu())


def test_autograd_crosses_devices_as_on_cuda():
    with virtual_cuda() as dev:
        mask = torch.ones(3, requires_grad=True)  # a CPU mask moved into a GPU computation
        w = torch.arange(3.0, device=dev, requires_grad=True)
        loss = (w * mask.to(dev)).sum()
        g_mask, g_w = torch.autograd.grad(loss, [mask, w])
        assert type(g_mask) is torch.Tensor and g_mask.tolist() == [0.0, 1.0, 2.0]
        assert g_w.device.type == "cuda"


def test_torch_func_transforms_run_on_the_virtual_device_without_false_alarms():
    """``torch.func`` drops the tag inside its transforms (module docstring): a tagged input mixed with a
    transformed tensor is not taken for a device error; the result equals the CPU's."""
    from torch.func import jacrev

    x = torch.randn(4, 3, dtype=torch.float64)
    w = torch.randn(3, 2, dtype=torch.float64)
    want = jacrev(lambda m: (x @ m).tanh())(w)
    with virtual_cuda() as dev:
        xd = x.to(dev)
        got = jacrev(lambda m: (xd @ m).tanh())(w.to(dev))
    torch.testing.assert_close(got.cpu() if got.device.type == "cuda" else got, want)


def test_make_nbval_puts_every_chapter_on_the_virtual_device_once():
    """book/conftest.py's split: the native run takes the odd chapters, the second run the even ones."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("book_conftest", root / "book" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    chapters = sorted(p.name for p in (root / "book").glob("part*/*.ipynb"))
    assert len(chapters) >= 11
    for name in chapters:
        assert conftest.on_virtual_cuda(name, "odd") != conftest.on_virtual_cuda(name, "even"), name
        assert not conftest.on_virtual_cuda(name, None)
    assert conftest.on_virtual_cuda("06_circle_task.ipynb", "even")
    assert not conftest.on_virtual_cuda("reproduction.ipynb", "odd")
    with pytest.raises(ValueError, match="odd' or 'even"):
        conftest.on_virtual_cuda("01_a.ipynb", "all")
    assert "ATTNBOOK_VIRTUAL_CUDA_CHAPTERS=odd" in (root / "Makefile").read_text()
    assert "ATTNBOOK_VIRTUAL_CUDA_CHAPTERS=even" in (root / "Makefile").read_text()
