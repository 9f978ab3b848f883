"""TP=2 on two gloo processes computes what TP=1 computes: logits, logprobs, values and first-step gradients."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ppo.cluster.ports import free_port
from tests.models.conftest import make_hf_model
from tests.models.tp_worker import compute

ROOT = Path(__file__).resolve().parents[2]


def run_tp2(*paths, module: str = "tests.models.tp_worker", **extra_env) -> dict:
    """Run ``module`` (its arguments: ``paths``, the last one where rank 0 saves) as two gloo ranks with TP=2 and
    return what rank 0 saved."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), TP="2", OMP_NUM_THREADS="1", **extra_env)
        procs.append(subprocess.Popen([sys.executable, "-m", module, *map(str, paths)],
                                      cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(log[-3000:] for log in logs)
    return torch.load(paths[-1])


@pytest.mark.slow
@pytest.mark.parametrize("variant, tied", [("qwen2", False), ("qwen2", True), ("qwen3", False)])
def test_tp2_equals_tp1(megatron_world, tmp_path, variant, tied):
    """Qwen3: 64-wide heads (not hidden / heads) and q/k norms, replicated over TP."""
    from ppo.models.convert import save_hf_checkpoint

    hf = make_hf_model(variant, tied=tied)
    state = dict(hf.state_dict())
    state["score.weight"] = torch.randn(1, hf.config.hidden_size, generator=torch.Generator().manual_seed(3)) * 0.1
    if tied:
        state.pop("lm_head.weight")
    hf_dir = save_hf_checkpoint(state, hf.config.to_dict(), tmp_path / "hf")

    tp2 = run_tp2(hf_dir, tmp_path / "tp2.pt")
    tp1 = compute(str(hf_dir), 1, 1)

    for key in ("logits", "logprobs", "values"):
        torch.testing.assert_close(tp2[key], tp1[key], rtol=0, atol=1e-5, msg=key)
    for group in ("policy_grads", "critic_grads"):
        assert tp2[group].keys() == tp1[group].keys()
        for name in tp1[group]:
            # float32 sums in another order: compare against the tensor's scale, not element by element
            error = (tp2[group][name] - tp1[group][name]).abs().max().item()
            assert error <= 1e-5 * tp1[group][name].abs().max().item() + 1e-7, f"{group} {name}: {error}"


@pytest.mark.slow
def test_tp2_training_sums_the_qk_norm_gradients_of_every_rank(megatron_world, tmp_path):
    """Qwen3's q/k norms are replicated over TP but each rank's heads give only part of their gradient: the
    trainer's steps must leave them equal on every rank and equal to TP=1's."""
    from ppo.models.convert import save_hf_checkpoint
    from tests.models.tp_worker import train_critic

    hf = make_hf_model("qwen3", tied=False, seed=4)
    state = dict(hf.state_dict())
    state["score.weight"] = torch.randn(1, hf.config.hidden_size, generator=torch.Generator().manual_seed(5)) * 0.1
    hf_dir = save_hf_checkpoint(state, hf.config.to_dict(), tmp_path / "hf")

    tp2 = run_tp2(hf_dir, tmp_path / "tp2.pt", TRAIN_STEPS="2")
    tp1 = train_critic(str(hf_dir), 1, 2)
    norms = [name for name in tp1["ranks"][0] if name.endswith(("q_layernorm.weight", "k_layernorm.weight"))]
    assert norms
    for name in norms:
        assert torch.equal(tp2["ranks"][0][name], tp2["ranks"][1][name]), name
    assert tp2["params"].keys() == tp1["params"].keys()
    # Adam divides each gradient by its own scale, so the round-off of a gradient summed in another order moves an
    # early update by up to ~1% of the learning rate (1e-3 over these two warmup steps); a q/k norm gradient that
    # misses the other rank's heads moves it by about the whole rate
    for name, expected in tp1["params"].items():
        error = (tp2["params"][name] - expected).abs().max().item()
        assert error <= 5e-5, (name, error)
