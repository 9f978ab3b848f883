"""Micro-batches padded to a multiple of their width (what Megatron's sequence parallelism needs: the sequence is split
over the TP ranks) compute what the unpadded ones do: logprobs, values, losses and gradients.

Sequence parallelism needs Transformer Engine and several GPUs, so the workers here pad without it, through the
spec's ``pad_to_multiple`` (the same path: :attr:`MegatronModelSpec.sequence_multiple` and
:func:`ppo.data.batch.pad_width`).  The rows' lengths and the batch's width are chosen not to divide by the
multiple, so every micro-batch is padded, some past the batch's width.
"""

from __future__ import annotations

import os

import pytest
import torch

from ppo.data.batch import Batch, FieldError, pad_width
from ppo.models.parallel import ParallelConfig
from ppo.workers.specs import MegatronCritic, MegatronModelSpec, MegatronPolicy, PolicyLoss

MULTIPLE = 4
# a few rows per micro-batch (several micro-batches, rows scattered back by index), and a budget that the padded
# widths must be counted against: rows of 11 and 9 tokens fit it unpadded (22), not padded to 12 (24)
TOKEN_BUDGET = 23
RESPONSES = (3, 6, 2, 8, 5, 1, 4)  # with the prompts below: rows of 5..11 tokens, a batch 11 wide


# ------------------------------------------------------------------------------------------- the pure function
def token_batch(width: int = 7, rows: int = 3, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.arange(rows) % width + 1
    lengths[0] = width
    real = (torch.arange(width) < lengths[:, None])
    return Batch(
        input_ids=torch.randint(1, 50, (rows, width), generator=g) * real,
        segment_ids=real.long(),
        response_mask=(torch.rand(rows, width, generator=g) > 0.4).float() * real,
        logp_gen=-torch.rand(rows, width, generator=g) * real,
        values=torch.randn(rows, width, generator=g) * real,
        advantages=torch.randn(rows, width, generator=g) * real,
        prompt_lengths=torch.ones(rows, dtype=torch.long),
        rewards=torch.randn(rows, generator=g),
        responses=[f"r{i}" for i in range(rows)],
        record_ids=[str(i) for i in range(rows)],
    )


@pytest.mark.parametrize("width", range(1, 10))
@pytest.mark.parametrize("multiple", range(1, 6))
def test_pad_width_pads_every_token_field_to_the_next_multiple(width, multiple):
    batch = token_batch(width)
    padded = pad_width(batch, multiple, pad_id=7)
    target = -(-width // multiple) * multiple
    assert padded.fields().keys() == batch.fields().keys()
    for key, value in batch.fields().items():
        if torch.is_tensor(value) and value.dim() == 2:
            assert padded.get(key).shape == (value.shape[0], target), key
            assert padded.get(key).dtype == value.dtype, key
            assert torch.equal(padded.get(key)[:, :width], value), key  # the original columns as they were
            new = padded.get(key)[:, width:]
            assert torch.equal(new, torch.full_like(new, 7 if key == "input_ids" else 0)), key
        else:  # per-sample tensors and lists untouched
            assert padded.get(key) is value, key
    assert padded.segment_ids[:, width:].eq(0).all()  # the new columns are padding: masked, counted nowhere
    assert torch.equal(padded.segment_ids.ne(0).sum(-1), batch.segment_ids.ne(0).sum(-1))
    assert padded.response_mask.sum() == batch.response_mask.sum()


def test_pad_width_is_a_no_op_when_the_width_divides():
    batch = token_batch(width=8)
    assert pad_width(batch, 4) is batch and pad_width(batch, 8) is batch and pad_width(batch, 1) is batch
    assert pad_width(token_batch(width=5), 4).fields().keys() == token_batch().fields().keys()


def test_pad_width_refuses_a_bad_multiple_and_the_batch_a_field_of_another_width():
    with pytest.raises(ValueError, match="multiple must be >= 1"):
        pad_width(token_batch(), 0)
    batch = token_batch(width=5)
    with pytest.raises(FieldError, match="'values' .* has 4 columns, the batch's other token fields 5"):
        batch.values = torch.zeros(3, 4)


@pytest.mark.parametrize("tensor, sequence_parallel, pad_to, multiple", [
    (1, False, None, 1), (4, False, None, 1), (4, True, None, 4), (2, True, None, 2),
    (1, False, 4, 4), (4, True, 4, 4), (4, True, 6, 12), (2, False, 3, 3), (2, True, 1, 2),
])
def test_sequence_multiple_is_what_sequence_parallelism_needs_and_the_override(tensor, sequence_parallel, pad_to,
                                                                                multiple):
    spec = MegatronModelSpec(parallel=ParallelConfig(tensor=tensor, sequence_parallel=sequence_parallel),
                             pad_to_multiple=pad_to)
    assert spec.sequence_multiple == multiple
    assert [spec.padded_length(n) for n in (1, multiple, multiple + 1)] == [multiple, multiple, 2 * multiple]


# ------------------------------------------------------------------------------- the workers, padded and not
@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """``{"plain": (policy, critic), "padded": (policy, critic)}``: the same weights, the same budget; the padded
    pair pads every micro-batch to a multiple of 4."""
    from ppo.cluster.ports import free_port
    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.tiny import create_tiny_model
    from ppo.workers.policy import PolicyWorker
    from ppo.workers.value import ValueWorker

    saved_env = dict(os.environ)
    model_dir = str(create_tiny_model(tmp_path_factory.mktemp("model"), build_arithmetic_tokenizer(), num_layers=2))
    common = dict(rank=0, world_size=1, master_addr="127.0.0.1", master_port=free_port(), seed=0)
    loss = PolicyLoss(kl_coef=0.1, nll_coef=0.1)
    pairs = {}
    for name, pad_to in [("plain", None), ("padded", MULTIPLE)]:
        policy = PolicyWorker(MegatronPolicy(micro_batch_tokens=TOKEN_BUDGET, pad_to_multiple=pad_to, loss=loss),
                              model_dir, **common)
        critic = ValueWorker(MegatronCritic(micro_batch_tokens=TOKEN_BUDGET, pad_to_multiple=pad_to), model_dir,
                             **common)
        pairs[name] = (policy, critic)
    # the tiny model's pad token (id 0) has a zero embedding (transformers zeroes the padding row), so pad positions
    # would give near-zero values; a real embedding makes what the padding computes show wherever it leaks
    loud = torch.randn(128, generator=torch.Generator().manual_seed(1)) * 0.5
    for worker in [w for pair in pairs.values() for w in pair]:
        with torch.no_grad():
            worker.updater.module.embedding.word_embeddings.weight[0] = loud
    yield pairs
    os.environ.clear()
    os.environ.update(saved_env)


def ppo_batch() -> Batch:
    """A batch as the driver sends it: rows of 5..11 tokens (a batch 11 wide), every field the losses read."""
    from ppo.rollout.batch import build_rollout_batch
    from ppo.rollout.settings import Sample

    g = torch.Generator().manual_seed(0)
    prompts = [[3 + i, 4, 5 + i % 3][: 2 + i % 2] for i in range(len(RESPONSES))]
    samples = [[Sample([3 + (i + j) % 9 for j in range(n)], [-1.0] * n, "stop")] for i, n in enumerate(RESPONSES)]
    batch = build_rollout_batch(prompts, samples, pad_id=0, ground_truths=["0"] * len(prompts))
    mask = batch.response_mask
    batch.logp_gen = -torch.rand(mask.shape, generator=g) * mask
    for name in ("logp_old", "logp_ref"):
        setattr(batch, name, batch.logp_gen + 0.1 * torch.randn(mask.shape, generator=g) * mask)
    for name in ("values", "returns", "advantages"):
        setattr(batch, name, torch.randn(mask.shape, generator=g) * mask)
    batch.rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    return batch


def test_the_batch_and_its_rows_do_not_divide_by_the_multiple():
    batch = ppo_batch()
    lengths = batch.segment_ids.ne(0).sum(-1).tolist()
    assert batch.input_ids.shape[1] % MULTIPLE and sum(n % MULTIPLE != 0 for n in lengths) >= len(lengths) - 2


def test_padded_microbatches_divide_fit_the_budget_and_cover_every_row(workers):
    batch = ppo_batch()
    for name, (policy, _) in workers.items():
        cut = policy._cut(batch)
        assert len(cut) > 1 and [mb for _, _, mb in cut] == policy.microbatches(batch)
        assert sorted(i for rows, _, _ in cut for i in rows) == list(range(len(RESPONSES)))
        widths = [mb.width for _, _, mb in cut]
        for (rows, unpadded, mb), width in zip(cut, widths):
            assert len(rows) * width <= TOKEN_BUDGET  # the budget counts the padded width
            assert unpadded == int(mb.segment_ids.ne(0).sum(-1).max())
        if name == "padded":
            assert all(w % MULTIPLE == 0 for w in widths), widths
            assert max(widths) > batch.input_ids.shape[1]  # past the batch's width: forward_rows must cut it
        else:
            assert any(w % MULTIPLE for w in widths), widths  # the comparison below is not between equal layouts


def test_padding_leaves_logprobs_and_values_unchanged(workers):
    batch = ppo_batch()
    (plain_policy, plain_critic), (padded_policy, padded_critic) = workers["plain"], workers["padded"]
    real = batch.segment_ids.ne(0)
    for compute in (lambda p, c: p.logprobs(batch), lambda p, c: p.logprobs(batch, temperature=0.7),
                    lambda p, c: c.values(batch)):
        plain, padded = compute(plain_policy, plain_critic), compute(padded_policy, padded_critic)
        assert padded.shape == plain.shape == batch.input_ids.shape
        assert plain[real].abs().sum() > 0
        # a few float32 ulps: a wider micro-batch changes the matmuls' shapes, hence their summation order
        torch.testing.assert_close(padded * real, plain * real, rtol=1e-6, atol=1e-6)


def _step_and_grads(worker, step) -> tuple[dict, dict]:
    metrics = step(worker)
    metrics = metrics[0] if isinstance(metrics, list) else metrics
    grads = {k: p.main_grad.detach().clone() for k, p in worker.updater.module.named_parameters()}
    return metrics, grads


@pytest.mark.parametrize("role, step", [
    ("policy", lambda w: w.train(ppo_batch(), num_minibatches=1, seed=0)),
    ("policy", lambda w: w.supervised_step(ppo_batch(), lr=1e-4)),
    ("critic", lambda w: w.train(ppo_batch(), num_minibatches=1, seed=0)),
], ids=["policy-train", "supervised-step", "critic-train"])
def test_padding_leaves_the_loss_and_the_gradients_unchanged(workers, role, step):
    """One optimizer step each way from the same weights: the same loss, metrics and accumulated gradients (Megatron's
    main_grad buffers; the parameters after Adam are not compared, see tests/models/test_training.py)."""
    index = 0 if role == "policy" else 1
    plain_worker, padded_worker = workers["plain"][index], workers["padded"][index]
    for name, p in plain_worker.updater.module.named_parameters():  # earlier steps moved them: start level
        dict(padded_worker.updater.module.named_parameters())[name].data.copy_(p.data)
    (plain, plain_grads), (padded, padded_grads) = (_step_and_grads(w, step) for w in (plain_worker, padded_worker))
    assert plain.keys() == padded.keys() and "loss" in plain
    for key in plain:
        assert padded[key] == pytest.approx(plain[key], rel=1e-5, abs=1e-6), key
    assert plain["grad_norm"] > 0
    for name, grad in plain_grads.items():
        torch.testing.assert_close(padded_grads[name], grad, rtol=0, atol=1e-6, msg=name)
