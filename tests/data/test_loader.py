from __future__ import annotations

import json

import numpy as np
import pytest

from ppo.data import PromptLoader, batched

CASES = [
    pytest.param(10, 3, True, id="tail-dropped"),
    pytest.param(9, 3, True, id="exact-epochs"),
    pytest.param(10, 3, False, id="short-last-batch"),
    pytest.param(7, 7, True, id="one-batch-per-epoch"),
    pytest.param(5, 1, True, id="batch-of-one"),
]


def reference_batches(n: int, batch: int, drop_last: bool, seed: int, epochs: int) -> list[list[int]]:
    """The documented order, written out: epoch e is default_rng([seed, e]).permutation(n) cut into batches."""
    out = []
    for epoch in range(epochs):
        order = np.random.default_rng([seed, epoch]).permutation(n).tolist()
        for start in range(0, n, batch):
            chunk = order[start : start + batch]
            if len(chunk) == batch or not drop_last:
                out.append(chunk)
    return out


@pytest.mark.parametrize("n, batch, drop_last", CASES)
def test_uninterrupted_sequence_is_the_documented_one(n, batch, drop_last):
    loader = PromptLoader(list(range(n)), batch, seed=11, drop_last=drop_last)
    epochs = 4
    expected = reference_batches(n, batch, drop_last, seed=11, epochs=epochs)
    assert len(expected) == epochs * loader.steps_per_epoch
    assert [loader.next_batch() for _ in expected] == expected
    assert (loader.epoch, loader.position, loader.step) == (epochs, 0, len(expected))


@pytest.mark.parametrize("n, batch, drop_last", CASES)
def test_resuming_anywhere_gives_the_uninterrupted_sequence(n, batch, drop_last):
    records = [f"r{i}" for i in range(n)]
    total = 4 * PromptLoader(records, batch, drop_last=drop_last).steps_per_epoch + 1
    uninterrupted = PromptLoader(records, batch, seed=5, drop_last=drop_last)
    expected = [uninterrupted.next_batch() for _ in range(total)]
    for cut in range(total + 1):
        first = PromptLoader(records, batch, seed=5, drop_last=drop_last)
        head = [first.next_batch() for _ in range(cut)]
        state = json.loads(json.dumps(first.state_dict()))
        assert state["position"] % batch == 0
        resumed = PromptLoader(records, batch, seed=5, drop_last=drop_last)
        resumed.load_state_dict(state)
        assert resumed.step == cut
        tail = [resumed.next_batch() for _ in range(total - cut)]
        assert head + tail == expected, f"resumed after {cut} batches"


def test_epoch_boundary_state_is_the_next_epoch_start():
    loader = PromptLoader(list(range(10)), 3, seed=0)
    for _ in range(2):
        loader.next_batch()
    assert (loader.epoch, loader.position) == (0, 6)
    loader.next_batch()
    assert (loader.epoch, loader.position) == (1, 0)
    exact = PromptLoader(list(range(9)), 3, seed=0)
    for _ in range(3):
        exact.next_batch()
    assert (exact.epoch, exact.position) == (1, 0)


def test_epochs_cover_the_data_and_reshuffle():
    n = 50
    loader = PromptLoader(list(range(n)), 10, seed=3, drop_last=False)
    epochs = [sum((loader.next_batch() for _ in range(loader.steps_per_epoch)), []) for _ in range(3)]
    assert all(sorted(e) == list(range(n)) for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2]
    dropping = PromptLoader(list(range(n + 3)), 10, seed=3)
    seen = sum((dropping.next_batch() for _ in range(dropping.steps_per_epoch)), [])
    assert len(seen) == len(set(seen)) == n


def test_seeds_and_no_shuffle():
    a = PromptLoader(list(range(20)), 4, seed=1)
    b = PromptLoader(list(range(20)), 4, seed=1)
    c = PromptLoader(list(range(20)), 4, seed=2)
    first = [a.next_batch() for _ in range(10)]
    assert first == [b.next_batch() for _ in range(10)]
    assert first != [c.next_batch() for _ in range(10)]
    plain = PromptLoader(list("abcdefg"), 3, shuffle=False, drop_last=False)
    assert [plain.next_batch() for _ in range(4)] == [list("abc"), list("def"), ["g"], list("abc")]


def test_iteration_is_endless_and_shares_the_position():
    loader = PromptLoader(list(range(6)), 4, seed=0)
    it = iter(loader)
    batches = [next(it) for _ in range(5)]
    assert all(len(b) == 4 for b in batches)
    assert loader.step == 5 and loader.epoch == 5


@pytest.mark.parametrize(
    "change", [{"seed": 1}, {"num_records": 11}, {"prompts_per_step": 2}, {"shuffle": False}, {"drop_last": False}]
)
def test_resuming_under_different_settings_is_refused(change):
    state = PromptLoader(list(range(10)), 3, seed=0).state_dict()
    state.update(change)
    with pytest.raises(ValueError, match=f"the checkpoint has {next(iter(change))}="):
        PromptLoader(list(range(10)), 3, seed=0).load_state_dict(state)


def test_invalid_positions_and_settings():
    loader = PromptLoader(list(range(10)), 3)
    for epoch, position in ((0, 10), (0, 4), (-1, 0)):
        with pytest.raises(ValueError, match="invalid position"):
            loader.load_state_dict({**loader.state_dict(), "epoch": epoch, "position": position})
    with pytest.raises(ValueError, match="larger than the dataset"):
        PromptLoader(list(range(3)), 4)
    assert PromptLoader(list(range(3)), 4, drop_last=False).next_batch() != []
    with pytest.raises(ValueError, match="no records"):
        PromptLoader([], 1)
    with pytest.raises(ValueError, match="prompts_per_step"):
        PromptLoader([1], 0)


def test_batched_keeps_everything_in_order():
    assert list(batched(list(range(7)), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batched([], 3)) == []
    with pytest.raises(ValueError):
        list(batched([1], 0))
