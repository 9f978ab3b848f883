"""Sequence parallelism on the CPU: TP 2 with it computes what TP 1 computes, for the policy and the critic, on padded
micro-batches of rows of different lengths: logprobs, values, losses, every parameter's gradient after Megatron's
gradient finalisation, and the grad norm (``ModelUpdater``: Megatron's DDP, ``finalize_model_grads``, optimizer).

The local layer spec runs it (:class:`ppo.models.norms.SequenceParallelRMSNorm`) with Megatron's own SP collectives
on gloo, so the gradients' reductions are the ones a GPU run with Transformer Engine does around the heads: each one
once.  Before the fix of the output layer (``ppo.models.builder``), at TP 2 every gradient below the policy's head
was 2.00x TP 1's.
"""

import pytest
import torch

from tests.models.conftest import make_hf_model
from tests.models.sp_worker import compute
from tests.models.test_tensor_parallel import run_tp2

# (model, tied embeddings, activation recomputation at TP 2): q/k/v biases; q/k norms, 64-wide heads, tied embeddings.
# TP 1 recomputes nothing: recomputation under sequence parallelism reruns its gathers inside backward.
VARIANTS = (("qwen2", False, "selective"), ("qwen3", True, "full"))


@pytest.fixture(scope="module")
def results(megatron_world, tmp_path_factory):
    """``[(tp1, tp2_sp)]`` for each variant: what ``tests.models.sp_worker`` computed at TP 1 here and at TP 2 with
    sequence parallelism (and recomputation) on two gloo ranks."""
    from ppo.models.convert import save_hf_checkpoint

    root = tmp_path_factory.mktemp("sp")
    dirs = []
    for i, (variant, tied, _) in enumerate(VARIANTS):
        hf = make_hf_model(variant, tied=tied, seed=20 + i)
        state = dict(hf.state_dict())
        state["score.weight"] = torch.randn(1, hf.config.hidden_size, generator=torch.Generator().manual_seed(i)) * 0.1
        if tied:
            state.pop("lm_head.weight")
        dirs.append(save_hf_checkpoint(state, hf.config.to_dict(), root / variant))
    tp2 = run_tp2(*dirs, root / "tp2.pt", module="tests.models.sp_worker", SEQUENCE_PARALLEL="1",
                  RECOMPUTE=",".join(recompute for _, _, recompute in VARIANTS))
    return [(compute(str(d), sequence_parallel=False), sp) for d, sp in zip(dirs, tp2)]


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Largest difference against the tensor's scale: float32 sums in another order differ by ~1e-7 of it."""
    return (actual - expected).abs().max().item() / max(expected.abs().max().item(), 1e-30)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["policy", "critic"])
@pytest.mark.parametrize("variant", range(len(VARIANTS)), ids=[f"{v}-{r}-recompute" for v, _, r in VARIANTS])
def test_tp2_with_sequence_parallelism_equals_tp1(results, variant, model):
    tp1, sp = results[variant]
    for expected, actual, segments in zip(tp1[model]["outputs"], sp[model]["outputs"], tp1["segment_ids"]):
        assert actual.shape == expected.shape
        real = segments != 0  # what padding computes feeds nothing (no loss, no target)
        assert relative_error(actual[real], expected[real]) <= 1e-5
    assert sp[model]["loss"] == pytest.approx(tp1[model]["loss"], rel=1e-5)
    assert sp[model]["grad_norm"] == pytest.approx(tp1[model]["grad_norm"], rel=1e-5)
    assert sp[model]["grads"].keys() == tp1[model]["grads"].keys()
    ratios = {name: (sp[model]["grads"][name].norm() / g.norm()).item() for name, g in tp1[model]["grads"].items()}
    for name, expected in tp1[model]["grads"].items():
        assert expected.abs().max() > 0, name
        assert relative_error(sp[model]["grads"][name], expected) <= 1e-5, (name, ratios)
