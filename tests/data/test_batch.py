"""The typed batch (:mod:`ppo.data.batch`): a field read before its phase, or set with the wrong type, dtype or shape,
fails where it happens and names the field; the row operations keep every field; a batch comes back equal from
``torch.save`` (weights only) and from pickling (how Ray sends it by value)."""

from __future__ import annotations

import io
import pickle

import pytest
import torch

from ppo.data.batch import Batch, FieldError, MissingField, concat, select, trim
from ppo.rollout.batch import build_rollout_batch
from ppo.rollout.settings import Sample


def rollout(policy_version: int | None = 4) -> Batch:
    prompts = [[3, 4, 5], [6, 7]]
    samples = [[Sample([12, 13], [-0.5, -0.25], "stop", "ab"), Sample([14], [-1.0], "length", "c")],
               [Sample([15, 16, 17], [-1.0] * 3, "stop", "def")]]
    batch = build_rollout_batch(prompts, samples, pad_id=0, ground_truths=["x", "y"], record_ids=["r0", "r1"],
                                policy_version=policy_version)
    batch.scores = torch.tensor([1.0, 0.0, 1.0])
    return batch


def test_the_rollout_sets_its_fields_with_their_declared_dtypes_and_shapes():
    batch = rollout()
    assert (batch.rows, batch.width) == (3, 5)
    assert batch.policy_version.tolist() == [4, 4, 4] and batch.record_ids == ["r0", "r0", "r1"]
    for name, value in batch.fields().items():
        field = Batch.field(name)
        if field.dtype is str:
            assert isinstance(value, list) and len(value) == 3, name
        else:
            assert value.dtype == field.dtype and value.dim() == len(field.dims), name
    assert not rollout(policy_version=None).has("policy_version")  # rows no policy generated (the warm start)


def test_reading_a_field_no_phase_has_set_names_it_and_its_phase():
    batch = rollout()
    with pytest.raises(MissingField, match=r"^batch field 'advantages' is not set: the step's estimator"):
        _ = batch.advantages
    with pytest.raises(MissingField, match="'prefix_lengths' is not set: the critic's view"):
        _ = batch.prefix_lengths
    assert batch.get("values") is None and not batch.has("values")
    with pytest.raises(MissingField, match="'input_ids' is not set: the rollout"):
        _ = Batch(rewards=torch.zeros(2)).input_ids


def test_a_wrong_dtype_names_the_field():
    batch = rollout()
    with pytest.raises(FieldError, match=r"^batch field 'values' \(float32 \[B, T\]\): expected dtype torch.float32, "
                                         r"got torch.float64$"):
        batch.values = torch.zeros(3, 5, dtype=torch.float64)
    with pytest.raises(FieldError, match="'group_ids' .*expected dtype torch.int64, got torch.float32"):
        batch.group_ids = torch.zeros(3)
    with pytest.raises(FieldError, match="'responses' .*expected a list of strings, got tuple"):
        batch.responses = ("a", "b", "c")
    with pytest.raises(FieldError, match="'logp_old' .*expected a tensor, got list"):
        batch.logp_old = [[0.0] * 5] * 3
    assert not batch.has("values") and not batch.has("logp_old")  # a refused value is not kept


def test_a_wrong_shape_names_the_field():
    batch = rollout()
    with pytest.raises(FieldError, match=r"'values' \(float32 \[B, T\]\): expected 2 dimensions, got shape \(3,\)"):
        batch.values = torch.zeros(3)
    with pytest.raises(FieldError, match="'rewards' .*has 4 rows, the batch's other fields 3"):
        batch.rewards = torch.zeros(4)
    with pytest.raises(FieldError, match="'advantages' .*has 6 columns, the batch's other token fields 5"):
        batch.advantages = torch.zeros(3, 6)
    with pytest.raises(FieldError, match="'ground_truths' .*has 2 rows, the batch's other fields 3"):
        batch.ground_truths = ["x", "y"]
    with pytest.raises(FieldError, match="^a batch has no field 'logprobs_old'"):
        Batch(logprobs_old=torch.zeros(3, 5))
    batch.response_mask = torch.zeros(3, 5)  # a field replaced by a value of its own shape (the overlong filter)


def test_row_operations_keep_every_field():
    batch = rollout()
    rows = select(batch, [2, 0])
    assert rows.fields().keys() == batch.fields().keys()
    assert rows.responses == ["def", "ab"] and rows.policy_version.tolist() == [4, 4]
    assert torch.equal(rows.input_ids, batch.input_ids[[2, 0]])
    short = trim(select(batch, [1]))
    assert short.width == 4 and short.input_ids.tolist() == [[3, 4, 5, 14]]
    both = concat([short, select(batch, [2])])
    assert both.width == 5 and both == select(batch, [1, 2])
    batch.values = torch.zeros(3, 5)
    with pytest.raises(FieldError, match="concat: batches set different fields"):
        concat([batch, rollout()])


def test_a_batch_comes_back_equal_from_torch_save_and_from_pickle():
    """What a checkpoint would keep (plain tensors and lists: loadable with ``weights_only``) and what Ray sends."""
    batch = rollout()
    batch.values = torch.randn(3, 5)
    buffer = io.BytesIO()
    torch.save(batch.fields(), buffer)
    buffer.seek(0)
    loaded = Batch.from_fields(torch.load(buffer, weights_only=True))
    assert loaded == batch and loaded.policy_version.dtype == torch.long
    assert pickle.loads(pickle.dumps(batch)) == batch
    changed = Batch.from_fields(batch.fields() | {"values": batch.values + 1e-7})
    assert changed != batch  # equality is exact: a batch one ulp off is another batch
