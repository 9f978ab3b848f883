import pytest
import torch

from ppo.models.forward import attention_mask_and_positions, token_logprobs
from ppo.models.packing import pack_sequences, token_budget_microbatches
from ppo.models.value import build_value_model, token_values
from tests.models.conftest import make_hf_model
from tests.models.test_hf_parity import megatron_from_hf


def test_mask_and_positions_for_a_packed_row():
    mask, pos = attention_mask_and_positions(torch.tensor([[1, 1, 2, 2, 2, 0]]))
    assert pos.tolist() == [[0, 1, 0, 1, 2, 0]]
    allowed = ~mask[0, 0]
    assert allowed[3].tolist() == [False, False, True, True, False, False]  # segment 2, causal
    assert allowed[1].tolist() == [True, True, False, False, False, False]
    assert allowed[5].tolist() == [False, False, False, False, False, True]  # padding sees itself only


def test_packing_gives_the_same_logprobs_and_values_as_padding(megatron_world):
    hf = make_hf_model("qwen2", tied=True, seed=5)
    policy, arch = megatron_from_hf(hf)
    critic = build_value_model(arch).eval()
    g = torch.Generator().manual_seed(0)
    lengths = [11, 4, 7, 9, 3]
    sequences = [torch.randint(0, arch.vocab_size, (n,), generator=g) for n in lengths]
    padded = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for i, s in enumerate(sequences):
        padded[i, : len(s)] = s
    padded_segments = (torch.arange(max(lengths)) < torch.tensor(lengths)[:, None]).long()
    packed = pack_sequences(sequences, row_length=16)
    assert packed.input_ids.shape[0] < len(lengths)
    with torch.no_grad():
        for fn, model in [(token_logprobs, policy), (token_values, critic)]:
            reference = fn(model, padded, padded_segments)
            unpacked = packed.unpack(fn(model, packed.input_ids, packed.segment_ids), lengths, max(lengths))
            torch.testing.assert_close(unpacked, reference * padded_segments, rtol=0, atol=2e-5)


def test_token_budget_microbatches():
    batches = token_budget_microbatches([5, 30, 8, 29, 7, 2], max_tokens=60)
    assert sorted(i for b in batches for i in b) == list(range(6))
    lengths = [5, 30, 8, 29, 7, 2]
    assert all(len(b) * max(lengths[i] for i in b) <= 60 for b in batches)
    assert batches[0] == [1, 3]
    with pytest.raises(ValueError, match="more than the micro-batch budget"):
        token_budget_microbatches([100], max_tokens=60)
