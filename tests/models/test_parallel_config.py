import pytest

from ppo.models.parallel import ParallelConfig, ParallelLayoutError, transformer_engine_available


@pytest.mark.parametrize(
    "config,world,layers,message",
    [
        (ParallelConfig(tensor=3), 8, None, "does not divide the 8 GPUs"),
        (ParallelConfig(tensor=2, pipeline=2, context=2), 4, None, "= 8 does not divide the 4"),
        (ParallelConfig(tensor=0), 8, None, "tensor parallel size must be >= 1"),
        (ParallelConfig(sequence_parallel=True), 8, None, "needs tensor parallel size > 1"),
        (ParallelConfig(pipeline=4), 8, 6, "does not divide num_layers=6"),
    ],
)
def test_impossible_layouts_are_refused_in_one_line(config, world, layers, message):
    with pytest.raises(ParallelLayoutError, match=message) as err:
        config.validate(world, num_layers=layers)
    assert "\n" not in str(err.value)


def test_sequence_parallel_needs_transformer_engine_here_but_dry_runs_validate():
    config = ParallelConfig(tensor=4, context=2, sequence_parallel=True)
    config.validate(64, for_launch_here=False)
    assert config.data_parallel_size(64) == 8
    if not transformer_engine_available():
        with pytest.raises(ParallelLayoutError, match="needs Transformer Engine"):
            config.validate(64)
