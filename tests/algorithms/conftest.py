import pytest
import torch


def random_mask(batch: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """Rows of prompt (0) · response with interior gaps (0 runs) · padding (0), each row with ≥ 2 trainable tokens."""
    mask = torch.zeros(batch, length)
    for b in range(batch):
        start = int(torch.randint(0, length // 3, (1,), generator=generator))
        end = int(torch.randint(start + 2, length + 1, (1,), generator=generator))
        mask[b, start:end] = 1.0
        if end - start > 4:
            gap = int(torch.randint(start + 1, end - 2, (1,), generator=generator))
            mask[b, gap : gap + 2] = 0.0
    return mask


@pytest.fixture
def batch():
    """A random [6, 17] float64 batch: rewards, values, old values, logprobs and a gappy mask."""
    g = torch.Generator().manual_seed(1234)
    B, T = 6, 17
    mask = random_mask(B, T, g)
    return {
        "rewards": torch.randn(B, T, generator=g, dtype=torch.float64),
        "values": torch.randn(B, T, generator=g, dtype=torch.float64),
        "old_values": torch.randn(B, T, generator=g, dtype=torch.float64),
        "returns": torch.randn(B, T, generator=g, dtype=torch.float64),
        "logprobs": -torch.rand(B, T, generator=g, dtype=torch.float64) * 3,
        "old_logprobs": -torch.rand(B, T, generator=g, dtype=torch.float64) * 3,
        "gen_logprobs": -torch.rand(B, T, generator=g, dtype=torch.float64) * 3,
        "ref_logprobs": -torch.rand(B, T, generator=g, dtype=torch.float64) * 3,
        "advantages": torch.randn(B, T, generator=g, dtype=torch.float64),
        "sequence_rewards": torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.5], dtype=torch.float64),
        "group_ids": torch.tensor([0, 0, 0, 1, 1, 1]),
        "mask": mask.double(),
    }
