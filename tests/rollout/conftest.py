import pytest

from tests.models.conftest import megatron_world  # noqa: F401  (fixture)


@pytest.fixture(scope="session")
def ray_runtime():
    import ray

    from ppo.cluster.ray_runtime import init_local_ray

    init_local_ray(num_cpus=2)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.tiny import create_tiny_model

    return create_tiny_model(tmp_path_factory.mktemp("tiny") / "model", build_arithmetic_tokenizer(), seed=0)
