import pytest
import torch

from attnbook.core import presets


def test_quick_and_paper_entries_have_the_same_keys():
    for name, entry in presets.TABLE.items():
        assert set(entry) == set(presets.PRESET_NAMES), name
        assert set(entry["quick"]) == set(entry["paper"]), f"{name}: quick and paper keys differ"


def test_env_var_selects_preset(monkeypatch):
    monkeypatch.setenv(presets.ENV_VAR, "paper")
    assert presets.preset("pure_attention")["preset"] == "paper"
    monkeypatch.setenv(presets.ENV_VAR, "quick")
    sizes = presets.preset("pure_attention")
    assert sizes["preset"] == "quick" and sizes["depth"] == presets.TABLE["pure_attention"]["quick"]["depth"]


@pytest.mark.parametrize("cuda", [True, False])
def test_default_follows_cuda(monkeypatch, cuda):
    """Without ATTNBOOK_PRESET: paper on a CUDA machine, quick elsewhere (both branches, on any machine)."""
    monkeypatch.delenv(presets.ENV_VAR, raising=False)
    monkeypatch.setattr(presets.torch.cuda, "is_available", lambda: cuda)
    assert presets.active_preset() == ("paper" if cuda else "quick")
    assert presets.device().type == ("cuda" if cuda else "cpu")


def test_unknown_preset_lists_valid_ones(monkeypatch):
    monkeypatch.setenv(presets.ENV_VAR, "fast")
    with pytest.raises(ValueError, match="quick, paper"):
        presets.active_preset()
    with pytest.raises(ValueError, match="quick, paper"):
        presets.preset("pure_attention", "huge")


def test_unknown_experiment():
    with pytest.raises(ValueError, match="unknown experiment"):
        presets.preset("no_such_thing", "quick")


def test_preset_is_read_only():
    sizes = presets.preset("pure_attention", "quick")
    with pytest.raises(TypeError):
        sizes["depth"] = 3


def test_seed_everything_is_deterministic():
    presets.seed_everything(3)
    a = torch.randn(4)
    g = presets.seed_everything(3)
    assert torch.equal(a, torch.randn(4))
    assert torch.equal(torch.randn(2, generator=g), torch.randn(2, generator=torch.Generator().manual_seed(3)))
    with pytest.raises(ValueError):
        presets.seed_everything(-1)


def test_setup_prints_preset(capsys, monkeypatch):
    monkeypatch.setenv(presets.ENV_VAR, "quick")
    dev = presets.setup(seed=1)
    assert isinstance(dev, torch.device)
    assert "preset=quick" in capsys.readouterr().out


def test_cpu_threads_respects_omp_num_threads():
    from attnbook.core.presets import cpu_threads

    assert cpu_threads(2, {}) == 2
    assert cpu_threads(2, {"OMP_NUM_THREADS": "1"}) == 1
    assert cpu_threads(2, {"OMP_NUM_THREADS": "8"}) == 2
    assert cpu_threads(2, {"OMP_NUM_THREADS": " "}) == 2
    with pytest.raises(ValueError, match="not a number"):
        cpu_threads(2, {"OMP_NUM_THREADS": "two"})
    with pytest.raises(ValueError, match="positive"):
        cpu_threads(0, {})
