import pytest
import torch

from ppo.algorithms.advantages import estimate_advantages, policy_lambda
from ppo.algorithms.estimators import GAE, GRPO, RLOO, RawReward, ReinforcePlusPlus, make_advantage_estimator
from ppo.algorithms.gae import length_adaptive_lambda
from ppo.algorithms.masked import masked_mean, masked_var
from ppo.algorithms.rewards import token_level_rewards
from tests.algorithms import reference as ref


def call(estimator, batch):
    token_rewards = token_level_rewards(batch["sequence_rewards"], batch["mask"])
    return estimate_advantages(
        estimator,
        token_rewards=token_rewards,
        mask=batch["mask"],
        values=batch["values"],
        sequence_rewards=batch["sequence_rewards"],
        group_ids=batch["group_ids"],
    )


def lists(batch, *keys):
    return [ref.to_lists(batch[k]) for k in keys]


def test_gae_estimator_plain_equals_reference(batch):
    adv, ret = call(GAE(gamma=0.99, lam=0.9, whiten_advantages=False), batch)
    r = ref.to_lists(token_level_rewards(batch["sequence_rewards"], batch["mask"]))
    v, m = lists(batch, "values", "mask")
    adv_ref, ret_ref = ref.gae(r, v, m, 0.99, [0.9] * len(r))
    torch.testing.assert_close(adv, torch.tensor(adv_ref, dtype=torch.float64))
    torch.testing.assert_close(ret, torch.tensor(ret_ref, dtype=torch.float64))


def test_vapo_decoupled_returns_from_value_lambda_advantages_from_length_adaptive(batch):
    est = GAE(gamma=1.0, lam=0.95, lam_value=1.0, length_adaptive_alpha=0.05, whiten_advantages=False)
    adv, ret = call(est, batch)
    r = ref.to_lists(token_level_rewards(batch["sequence_rewards"], batch["mask"]))
    v, m = lists(batch, "values", "mask")
    _, ret_ref = ref.gae(r, v, m, 1.0, [1.0] * len(r))
    lams = [max(0.0, min(1.0, 1 - 1 / max(0.05 * sum(row), 1.0))) for row in m]
    adv_ref, _ = ref.gae(r, v, m, 1.0, lams)
    torch.testing.assert_close(ret, torch.tensor(ret_ref, dtype=torch.float64))
    torch.testing.assert_close(adv, torch.tensor(adv_ref, dtype=torch.float64))
    torch.testing.assert_close(policy_lambda(est, batch["mask"]), length_adaptive_lambda(batch["mask"].sum(-1), 0.05))


def test_lambda_priority():
    mask = torch.ones(2, 4)
    assert policy_lambda(GAE(lam=0.9), mask) == 0.9 and not GAE(lam=0.9).decoupled
    assert policy_lambda(GAE(lam=0.9, lam_policy=0.5), mask) == 0.5
    assert policy_lambda(GAE(lam=0.9, lam_policy=0.5, length_adaptive_alpha=0.5), mask).tolist() == [0.5, 0.5]
    assert GAE(lam_value=1.0).decoupled


def test_advantage_whitening_gives_zero_mean_unit_variance_on_mask(batch):
    adv, _ = call(GAE(gamma=1.0, lam=0.95, whiten_advantages=True), batch)
    assert masked_mean(adv, batch["mask"]).abs().item() < 1e-10
    assert masked_var(adv, batch["mask"]).item() == pytest.approx(1.0, abs=1e-6)
    assert (adv[batch["mask"] == 0] == 0).all()


def test_grpo_and_rloo_equal_reference(batch):
    R, ids = batch["sequence_rewards"].tolist(), batch["group_ids"].tolist()
    adv, ret = call(GRPO(), batch)
    assert ret is None
    torch.testing.assert_close(adv, torch.tensor(ref.grpo(R, ids), dtype=torch.float64)[:, None] * batch["mask"])
    adv, _ = call(RLOO(), batch)
    torch.testing.assert_close(adv, torch.tensor(ref.rloo(R, ids), dtype=torch.float64)[:, None] * batch["mask"])
    adv, _ = call(GRPO(normalize_std=False), batch)
    means = {g: sum(r for r, i in zip(R, ids) if i == g) / ids.count(g) for g in set(ids)}
    expected = torch.tensor([r - means[i] for r, i in zip(R, ids)], dtype=torch.float64)
    torch.testing.assert_close(adv, expected[:, None] * batch["mask"])


def test_rloo_refuses_groups_of_one(batch):
    batch = dict(batch, group_ids=torch.arange(6))
    with pytest.raises(ValueError, match="at least 2 samples per prompt"):
        call(RLOO(), batch)


def test_grpo_and_reinforce_baseline_give_a_prompt_of_one_sample_advantage_zero(batch):
    """The documented convention (docs/ppo.md §4): a group of one is its own mean, with no spread to learn from."""
    batch = dict(batch, group_ids=torch.arange(len(batch["sequence_rewards"])))
    for estimator in (GRPO(), GRPO(normalize_std=False)):
        advantages, _ = call(estimator, batch)
        assert advantages.abs().max() == 0
    advantages, _ = call(ReinforcePlusPlus(baseline=True), batch)  # no KL-in-reward here: nothing left to learn
    assert advantages.abs().max() == 0


def test_raw_reward_broadcasts(batch):
    adv, ret = call(RawReward(), batch)
    assert ret is None and not RawReward.needs_critic
    torch.testing.assert_close(adv, batch["sequence_rewards"][:, None] * batch["mask"])


@pytest.mark.parametrize("baseline", [False, True])
def test_reinforce_plus_plus_equals_reference(batch, baseline):
    R, ids = batch["sequence_rewards"].tolist(), batch["group_ids"].tolist()
    kl = batch["logprobs"] - batch["ref_logprobs"]
    token_rewards = token_level_rewards(batch["sequence_rewards"], batch["mask"], kl=kl, kl_coef=0.1)
    adv, _ = estimate_advantages(
        ReinforcePlusPlus(gamma=0.9, baseline=baseline),
        token_rewards=token_rewards, mask=batch["mask"], sequence_rewards=batch["sequence_rewards"],
        group_ids=batch["group_ids"],
    )
    r = ref.to_lists(token_rewards)
    m = ref.to_lists(batch["mask"])
    if baseline:
        g = ref.groups(R, ids)
        for b, row in enumerate(m):
            last = max(t for t, mt in enumerate(row) if mt)
            r[b][last] -= sum(g[ids[b]]) / len(g[ids[b]])
    expected = ref.whiten(ref.return_to_go(r, m, 0.9), m)
    torch.testing.assert_close(adv, torch.tensor(expected, dtype=torch.float64))


def test_factory_builds_every_estimator_and_suggests_on_typos():
    for name in ["gae", "raw_reward", "grpo", "rloo", "reinforce++", "reinforce++_baseline"]:
        assert type(make_advantage_estimator(name)) in estimate_advantages.registry
    assert make_advantage_estimator("reinforce++_baseline").baseline
    assert make_advantage_estimator("gae", lam=0.5).lam == 0.5
    with pytest.raises(ValueError, match="did you mean 'grpo'"):
        make_advantage_estimator("gpro")


@pytest.mark.parametrize("kwargs", [{"lam": 1.5}, {"gamma": -0.1}, {"lam_value": 2.0}, {"length_adaptive_alpha": -1}])
def test_gae_rejects_out_of_range(kwargs):
    with pytest.raises(ValueError):
        GAE(**kwargs)
