"""Models by hub id: found in the HF cache without the network, complete or not at all, refused offline when absent,
and read by ``HFCheckpoint`` from the snapshot folder."""

import json
from pathlib import Path

import pytest

from ppo.hub import HubError
from ppo.models.hub import HubModel, cached_model, fetch_model, snapshot_folder
from ppo.models.sources import HFCheckpoint
from tests.hub.cache import cache_repo, model_files
from tests.hub.conftest import tiny_qwen_config


def test_a_cached_model_resolves_to_its_snapshot(cached_model_folder):
    assert cached_model(HubModel("test-org/tiny-qwen")) == cached_model_folder
    assert cached_model(HubModel("test-org/tiny-qwen", "main")) == cached_model_folder
    assert cached_model(HubModel("test-org/tiny-qwen", cached_model_folder.name)) == cached_model_folder  # a commit
    assert cached_model(HubModel("test-org/tiny-qwen", "v2")) is None
    assert fetch_model(HubModel("test-org/tiny-qwen")) == cached_model_folder  # offline: from the cache


def test_the_cache_lookup_reads_the_layout_as_huggingface_hub_does(caches, cached_model_folder):
    """Our own reading of the cache (the dry run imports no huggingface_hub) against huggingface_hub's
    ``try_to_load_from_cache`` on branches, tags, commits, unknown revisions, a ref to a missing snapshot, a
    revision that would climb out of ``snapshots/``, and an uncached repository."""
    from huggingface_hub import try_to_load_from_cache

    v1 = cache_repo(caches.hub, "test-org/tiny-qwen", model_files(tiny_qwen_config() | {"vocab_size": 64}),
                    revision="v1")
    (caches.hub / "models--test-org--tiny-qwen" / "refs" / "gone").write_text("0" * 40)
    revisions = [None, "main", "v1", "gone", "nope", "..", "refs", cached_model_folder.name, v1.name]
    for repo_id in ("test-org/tiny-qwen", "test-org/absent"):
        for revision in revisions:
            theirs = try_to_load_from_cache(repo_id, "config.json", cache_dir=caches.hub, revision=revision)
            ours = snapshot_folder(HubModel(repo_id, revision))
            assert (ours / "config.json" if ours else None) == (Path(theirs) if isinstance(theirs, str) else None), \
                (repo_id, revision)
    assert snapshot_folder(HubModel("test-org/tiny-qwen", "v1")) == v1 != cached_model_folder


def test_a_snapshot_without_all_its_weights_is_not_there(caches):
    files = model_files(tiny_qwen_config())
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    partial = {"config.json": files["config.json"], "model.safetensors.index.json": json.dumps(index).encode(),
               "model-00001-of-00002.safetensors": files["model.safetensors"]}
    cache_repo(caches.hub, "test-org/sharded", partial)
    assert cached_model(HubModel("test-org/sharded")) is None
    with pytest.raises(HubError, match=r"^test-org/sharded is not in the HF cache"):
        fetch_model(HubModel("test-org/sharded"))
    complete = partial | {"model-00002-of-00002.safetensors": files["model.safetensors"]}
    cache_repo(caches.hub, "test-org/sharded", complete, revision="complete")
    assert cached_model(HubModel("test-org/sharded", "complete")) is not None


def test_an_unknown_id_offline_is_one_line(caches):
    with pytest.raises(HubError) as err:
        fetch_model(HubModel("nobody/nothing", "v1"))
    assert str(err.value) == (f"nobody/nothing@v1 is not in the HF cache ({caches.hub}) and HF_HUB_OFFLINE is set: "
                              "fetch it where the hub can be reached (python launch.py prepare FILE), or give a local "
                              "folder")


def test_a_checkpoint_named_by_id_reads_the_cached_config(cached_model_folder):
    recipe_config = tiny_qwen_config() | {"max_position_embeddings": 131072}
    checkpoint = HFCheckpoint("test-org/tiny-qwen", config=recipe_config)
    assert checkpoint.missing_paths() == []
    assert checkpoint.local_path() == cached_model_folder
    assert checkpoint.hf_config() == (tiny_qwen_config(), "config.json")
    assert checkpoint.materialize(None, None) == cached_model_folder
    absent = HFCheckpoint("test-org/absent", config=recipe_config)
    assert absent.missing_paths() == [] and absent.local_path() is None
    assert absent.hf_config() == (recipe_config, "the recipe")  # a dry run where nothing is cached
    with pytest.raises(FileNotFoundError, match=r"^model test-org/absent is not in the HF cache"):
        absent.materialize(None, None)


@pytest.mark.slow
def test_a_real_tiny_model_loads_from_its_snapshot(caches, tmp_path):
    """transformers reads a model and its tokenizer through the snapshot's links into ``blobs/``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.tiny import create_tiny_model

    source = create_tiny_model(tmp_path / "tiny", build_arithmetic_tokenizer(), num_layers=1)
    snapshot = cache_repo(caches.hub, "test-org/real-tiny", {p.name: p.read_bytes() for p in source.iterdir()})
    folder = HFCheckpoint("test-org/real-tiny").materialize(tmp_path, None)
    assert folder == snapshot and (folder / "model.safetensors").is_symlink()
    model, original = AutoModelForCausalLM.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(source)
    assert model.config.num_hidden_layers == 1
    assert all((a == b).all() for a, b in zip(model.state_dict().values(), original.state_dict().values()))
    assert AutoTokenizer.from_pretrained(folder).get_vocab() == AutoTokenizer.from_pretrained(source).get_vocab()


def test_the_dataset_lookup_reads_the_layout_as_snapshot_download_does(caches):
    """Datasets too: ``cached_snapshot_folder`` against ``snapshot_download(local_files_only=True)``."""
    from huggingface_hub import snapshot_download

    from ppo.hub import cached_snapshot_folder
    from tests.hub.conftest import cache_dapo_math

    folder = cache_dapo_math(caches.hub)
    for revision in (None, "main", folder.name, "v9"):
        try:
            theirs = Path(snapshot_download("BytedTsinghua-SIA/DAPO-Math-17k", repo_type="dataset", revision=revision,
                                            cache_dir=caches.hub, local_files_only=True))
        except OSError:
            theirs = None
        assert cached_snapshot_folder("BytedTsinghua-SIA/DAPO-Math-17k", revision, "dataset") == theirs, revision
    assert cached_snapshot_folder("BytedTsinghua-SIA/DAPO-Math-17k", None, "dataset") == folder
