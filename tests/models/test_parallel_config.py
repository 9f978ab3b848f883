import pytest

from ppo.models import layers
from ppo.models.parallel import ParallelConfig, ParallelLayoutError
from ppo.models.recompute import Recompute, RecomputeError
from ppo.workers.specs import MegatronPolicy


@pytest.mark.parametrize(
    "config,world,layers_,message",
    [
        (ParallelConfig(tensor=3), 8, None, "does not divide the 8 GPUs"),
        (ParallelConfig(tensor=2, pipeline=2), 6, None, "= 4 does not divide the 6"),
        (ParallelConfig(tensor=0), 8, None, "tensor parallel size must be >= 1"),
        (ParallelConfig(tensor=4, sequence_parallel=False, context=2), 64, None,
         "context=2: context parallelism is not supported (sequences are not split across context-parallel ranks, "
         "so the gradient would count every token 2 times); set context=1"),
        (ParallelConfig(sequence_parallel=True), 8, None, "needs tensor parallel size > 1"),
        (ParallelConfig(pipeline=4), 8, 6, "does not divide num_layers=6"),
    ],
)
def test_impossible_layouts_are_refused_in_one_line(config, world, layers_, message):
    with pytest.raises(ParallelLayoutError) as err:
        config.check(world, num_layers=layers_)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("impl, sequence_parallel, message", [
    ("local", True, None),  # tests/models/test_sequence_parallel.py runs it
    ("te", False, "transformer_impl must be 'local' or 'transformer_engine', got 'te'"),
    ("transformer_engine", True, None),  # needs nothing installed here: checked where the model is built
    ("local", False, None),
])
def test_the_layer_implementation_is_checked_against_the_layout(impl, sequence_parallel, message):
    spec = MegatronPolicy(parallel=ParallelConfig(tensor=2, sequence_parallel=sequence_parallel), transformer_impl=impl)
    if message is None:
        spec.check_model()
        return
    with pytest.raises(layers.LayerImplementationError) as err:
        spec.check_model()
    assert str(err.value) == message


def test_a_missing_transformer_engine_fails_in_one_line_where_the_model_is_built():
    pytest.importorskip("megatron.core")
    try:
        import transformer_engine  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("Transformer Engine is installed here")
    with pytest.raises(layers.LayerImplementationError) as err:
        layers.layer_spec("transformer_engine")
    assert str(err.value).startswith("transformer_impl='transformer_engine' but Transformer Engine is not importable")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("recompute, message", [
    (Recompute("partial"), "recompute.granularity must be None, 'selective' or 'full', got 'partial'"),
    (Recompute("full"), "recompute.granularity='full' needs recompute.method 'uniform' or 'block', got None"),
    (Recompute("full", "uniform"), "recompute.granularity='full' needs recompute.num_layers >= 1, got None"),
    (Recompute("full", "block", 0), "recompute.granularity='full' needs recompute.num_layers >= 1, got 0"),
    (Recompute("selective", "uniform", 1), "recompute.method and recompute.num_layers apply to granularity='full' "
                                           "only (selective recompute covers every layer): leave them None"),
    (Recompute(None, None, 2), "apply to granularity='full' only (nothing is recomputed)"),
])
def test_recompute_settings_megatron_would_refuse_are_refused_in_one_line(recompute, message):
    with pytest.raises(RecomputeError) as err:
        MegatronPolicy(recompute=recompute).check_model()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_recompute_layers_cannot_exceed_a_pipeline_stage():
    with pytest.raises(RecomputeError, match=r"recompute.num_layers=5 is more than the 4 layers of a pipeline stage"):
        Recompute("full", "block", 5).check(layers_per_stage=4)
    for ok in (Recompute(), Recompute("selective"), Recompute("full", "uniform", 1), Recompute("full", "block", 4)):
        ok.check(layers_per_stage=4)
