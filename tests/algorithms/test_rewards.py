import pytest
import torch

from ppo.algorithms.masked import masked_mean, masked_var
from ppo.algorithms.rewards import (
    answer_char_credit,
    last_trainable_index,
    overlong_penalty,
    scale_rewards,
    token_level_rewards,
    whiten_rewards,
)


def test_sequence_reward_lands_on_last_trainable_token_not_last_position():
    mask = torch.tensor([[0, 1, 1, 0, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0]], dtype=torch.float32)
    R = torch.tensor([2.0, 3.0, 5.0])
    r = token_level_rewards(R, mask)
    expected = torch.zeros(3, 7)
    expected[0, 4] = 2.0
    expected[1, 6] = 3.0
    torch.testing.assert_close(r, expected)
    assert last_trainable_index(mask).tolist() == [4, 6, -1]


def test_kl_in_reward_on_every_trainable_token():
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0, 0.0]])
    kl = torch.tensor([[0.1, 9.0, 0.2, 0.3, 9.0]])
    r = token_level_rewards(torch.tensor([1.0]), mask, kl=kl, kl_coef=0.5)
    torch.testing.assert_close(r, torch.tensor([[-0.05, 0.0, -0.1, 1.0 - 0.15, 0.0]]))


def test_char_credit_lands_on_each_right_character_by_place():
    # prompt "12+3=" is 5 tokens; responses start at column 5, one token per character, <eos> after
    responses = ["15", "25", "150", "5", ""]
    credit = answer_char_credit(responses, ["15"] * 5, torch.tensor([5] * 5), 9, weight=0.8)
    expected = torch.zeros(5, 9)
    expected[0, 5:7] = 0.4  # both places right
    expected[1, 6] = 0.4  # the tens place wrong, the units right
    expected[2, 5:7] = 0.4  # a third character past the truth earns nothing (the verifier's 0 judges the whole)
    # "5" is compared with the truth's first character ("1"), not aligned at the right: nothing; "" nothing
    torch.testing.assert_close(credit, expected)
    with pytest.raises(ValueError, match="one token per character"):
        answer_char_credit(["1234567"], ["15"], torch.tensor([5]), 9, weight=1.0)


def test_placed_rewards_stay_on_their_tokens_and_the_rest_of_R_goes_last():
    mask = torch.tensor([[0, 1, 1, 1, 0], [0, 1, 1, 0, 0]], dtype=torch.float32)
    placed = torch.tensor([[0, 0.5, 0.0, 0.5, 0], [9.0, 0.5, 0.0, 0, 0]])  # 9.0 sits on the prompt: dropped
    R = torch.tensor([2.0, 0.5])  # verifier 1 + credit 1; verifier 0 + credit 0.5
    r = token_level_rewards(R, mask, placed=placed)
    torch.testing.assert_close(r, torch.tensor([[0, 0.5, 0, 1.5, 0], [0, 0.5, 0.0, 0, 0]]))
    torch.testing.assert_close(r.sum(-1), R)


def test_reward_scaling_dapo_default_and_clamp():
    torch.testing.assert_close(scale_rewards(torch.tensor([0.0, 1.0, 0.5, 7.0, -3.0])),
                               torch.tensor([-1.0, 1.0, 0.0, 1.0, -1.0]))
    torch.testing.assert_close(scale_rewards(torch.tensor([2.0]), source_min=0, source_max=4, target_min=0,
                                             target_max=10), torch.tensor([5.0]))
    with pytest.raises(ValueError):
        scale_rewards(torch.zeros(1), source_min=1, source_max=1)


def test_overlong_penalty():
    lengths = torch.tensor([100, 6144, 7168, 8192])
    p = overlong_penalty(lengths, max_response_length=8192, buffer_length=2048, penalty_factor=1.0)
    torch.testing.assert_close(p, torch.tensor([0.0, 0.0, -0.5, -1.0]))
    with pytest.raises(ValueError):
        overlong_penalty(lengths, max_response_length=100, buffer_length=0)


@pytest.mark.parametrize("shift_mean", [True, False])
def test_reward_whitening(shift_mean):
    g = torch.Generator().manual_seed(3)
    r = torch.randn(4, 9, generator=g, dtype=torch.float64) * 3 + 2
    mask = (torch.rand(4, 9, generator=g) > 0.3).double()
    w = whiten_rewards(r, mask, shift_mean=shift_mean)
    expected_mean = 0.0 if shift_mean else masked_mean(r, mask).item()
    assert masked_mean(w, mask).item() == pytest.approx(expected_mean, abs=1e-9)
    assert masked_var(w, mask).item() == pytest.approx(1.0, abs=1e-6)
    assert (w[mask == 0] == 0).all()
