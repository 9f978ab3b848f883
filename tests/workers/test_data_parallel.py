"""Data parallelism inside a worker group: two gloo replicas, each on half the rows, train exactly like one process
(each sent only its half of the batch, as the trainer sends it).

The losses are normalised by counts over the whole minibatch and Megatron's DDP sums the replicas' gradients
(``calculate_per_token_loss``), so the gradient (its norm is logged) and the update must equal the single-process
ones up to float32 summation order; the logged metrics are reduced over every replica's micro-batches.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_local():
    import ray

    from ppo.cluster.ray_runtime import init_local_ray

    init_local_ray(num_cpus=2)
    yield
    ray.shutdown()


def ppo_batch(model_dir, tokenizer, seed: int = 0):
    from ppo.rollout.batch import build_rollout_batch
    from ppo.rollout.settings import Sample

    g = torch.Generator().manual_seed(seed)
    pairs = torch.randint(100, (12, 2), generator=g).tolist()
    prompts = [tokenizer(f"{a:02d}+{b:02d}=")["input_ids"] for a, b in pairs]
    samples = []
    for _ in prompts:
        length = int(torch.randint(1, 5, (1,), generator=g))
        ids = torch.randint(3, 13, (length,), generator=g).tolist()
        samples.append([Sample(ids, [-1.0] * length, "stop")])
    batch = build_rollout_batch(prompts, samples, pad_id=tokenizer.pad_token_id, ground_truths=["0"] * len(prompts))
    mask = batch.response_mask
    batch.advantages = torch.randn(mask.shape, generator=g) * mask
    batch.rewards = torch.randint(2, (len(prompts),), generator=g).float()
    return batch


def test_two_data_parallel_replicas_train_like_one_process(ray_local, tmp_path):
    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.optim import OptimizerSettings
    from ppo.models.tiny import create_tiny_model
    from ppo.workers.group import WorkerGroup
    from ppo.workers.policy import PolicyWorker
    from ppo.workers.specs import MegatronPolicy
    from ppo.workers.traffic import Shipper

    tokenizer = build_arithmetic_tokenizer()
    model_dir = create_tiny_model(tmp_path / "model", tokenizer, seed=3)
    batch = ppo_batch(model_dir, tokenizer)
    results = {}
    for replicas in (1, 2):
        spec = MegatronPolicy(data_parallel=replicas, num_threads=1,
                              optimizer=OptimizerSettings(lr=1e-3, clip_grad=1.0))
        group = WorkerGroup(PolicyWorker, spec, str(model_dir), world_size=spec.world_size, seed=0)
        # as the trainer sends batches: each replica gets only its half, the replicas rebuild the whole batch
        group.shipper = Shipper(pieces=replicas)
        batch.logp_old = group.call(PolicyWorker.logprobs, batch)
        batch.logp_gen = batch.logp_old.clone()
        steps = group.call(PolicyWorker.train, batch, num_minibatches=2, seed=7)
        results[replicas] = (batch.logp_old, steps, group.call(PolicyWorker.export))
        group.kill()

    (logp_1, steps_1, weights_1), (logp_2, steps_2, weights_2) = results[1], results[2]
    torch.testing.assert_close(logp_2, logp_1, rtol=0, atol=1e-6)
    assert len(steps_1) == len(steps_2) == 2
    for one, two in zip(steps_1, steps_2):
        assert one.keys() == two.keys()
        for key in ("loss", "policy_loss", "grad_norm", "global_valid_toks", "probs_ratio_clamped_max"):
            assert two[key] == pytest.approx(one[key], rel=1e-5, abs=1e-7), key
    # Adam's first steps move each weight by about lr = 1e-3; summing the two halves' gradients in another order
    # leaves float32 noise of a few 1e-6 after Adam's normalisation, far below what a lost or doubled half would do.
    for name, tensor in weights_1.items():
        torch.testing.assert_close(weights_2[name], tensor, rtol=0, atol=2e-5, msg=name)
