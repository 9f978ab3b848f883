"""The critic's view with a prefix before each row (``critic.reference_answer``), against a plain-list reference."""

from __future__ import annotations

import pytest
import torch

from ppo.data.batch import Batch
from ppo.rollout.batch import build_rollout_batch
from ppo.rollout.critic_view import with_prefixes, without_prefixes
from ppo.rollout.settings import Sample


def rollout() -> Batch:
    prompts = [[3, 4, 5], [6, 7], [8, 9, 10, 11]]
    samples = [[Sample([12, 13], [-0.5, -0.25], "stop")], [Sample([14, 15, 16, 17], [-1.0] * 4, "stop")],
               [Sample([18], [-2.0], "stop")]]
    batch = build_rollout_batch(prompts, samples, pad_id=0, ground_truths=["a", "b", "c"])
    g = torch.Generator().manual_seed(0)
    batch.values = torch.randn(batch.input_ids.shape, generator=g) * batch.response_mask
    batch.returns = torch.randn(batch.input_ids.shape, generator=g) * batch.response_mask
    return batch


def test_each_row_starts_with_its_prefix_and_its_fields_move_with_it():
    batch, prefixes = rollout(), [[20, 1], [21, 22, 23, 1], [1]]
    view = with_prefixes(batch, prefixes)
    assert set(view.fields()) == {"input_ids", "segment_ids", "response_mask", "values", "returns", "prefix_lengths"}
    assert view.prefix_lengths.tolist() == [2, 4, 1]
    for i, prefix in enumerate(prefixes):
        n = int(batch.segment_ids[i].sum())
        row = prefix + batch.input_ids[i, :n].tolist()
        assert view.input_ids[i, : len(row)].tolist() == row
        assert view.segment_ids[i].tolist() == [1] * len(row) + [0] * (view.input_ids.shape[1] - len(row))
        for key in ("response_mask", "values", "returns"):
            shifted = [0.0] * len(prefix) + batch.get(key)[i].tolist()
            assert view.get(key)[i].tolist() == pytest.approx(shifted + [0.0] * (view.width - len(shifted)))
    assert view.input_ids.shape[1] == batch.input_ids.shape[1] + 4


def test_values_on_the_view_come_back_to_the_batchs_columns():
    batch, prefixes = rollout(), [[20, 1], [21, 22, 23, 1], [1]]
    view = with_prefixes(batch, prefixes)
    back = without_prefixes(view.values, torch.tensor([len(p) for p in prefixes]), batch.input_ids.shape[1])
    assert torch.equal(back, batch.values)
    with pytest.raises(ValueError, match="^2 prefixes for 3 rows$"):
        with_prefixes(batch, prefixes[:2])
