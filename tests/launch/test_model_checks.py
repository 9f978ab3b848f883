"""What the checks before launch accept, and what the dry run says of it (the refusals are in ``bad_inputs.CASES``).

The folders and checkpoints are those of the bad-input table (:mod:`tests.launch.model_folders`), in its scratch
directory; the recipe is ``experiments/math_1b.py`` (a SLURM recipe: a dry run anywhere, so nothing else is needed).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch.bad_inputs import answer, scratch_dir


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return scratch_dir(tmp_path_factory.mktemp("model_checks"))


def dry_run(root, *overrides: str) -> str:
    rc, out, err = answer(" ".join(["gpu.py", *overrides, "--dry-run"]), root)
    assert (rc, err) == (0, ""), err
    return out.split("== models and checkpoints (checked on this machine)\n")[1].split("\n\n")[0]


def test_a_folder_s_config_wins_over_the_recipe_s_copy_and_the_dry_run_shows_how_they_differ(root):
    models = dry_run(root, "model.path=models/good")
    assert "model.path: models/good checked (config.json, qwen2, weights' headers, tokenizer)" in models
    assert "hidden_size=64 (recipe 1536); num_hidden_layers=2 (recipe 28)" in models
    rc, out, _ = answer("gpu.py model.path=models/good --dry-run", root)
    assert "model shape from config.json" in out  # the memory plan is the folder's model, not the recipe's


def test_an_uncached_hub_id_is_planned_from_the_recipe_s_copy_and_says_so(root, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(root / "empty_cache"))
    models = dry_run(root)
    assert models == ("model.path: Qwen/Qwen2.5-1.5B is not in the HF cache: planned from the recipe's model.config; "
                      "a launch fetches it and checks its files first")


def test_a_critic_of_another_size_with_the_policy_s_tokenizer_is_accepted(root):
    models = dry_run(root, "model.path=models/good", "critic.model_path=models/bigger_critic")
    assert ("critic.model_path: models/bigger_critic checked (qwen2, 3 layers; the policy's tokenizer and "
            "vocabulary)") in models


def test_a_checkpoint_of_the_run_s_model_is_accepted_for_resuming(root):
    models = dry_run(root, "model.path=models/good", "trainer.resume=ckpt/good")
    assert "trainer.resume: ckpt/good/policy matches the model (tensor parallel 1 as saved)" in models
    assert "trainer.resume: ckpt/good/critic matches the model (tensor parallel 1 as saved)" in models


def test_the_metadata_read_without_torch_is_torch_s(root):
    """The torch-free unpickler gives every tensor's shape and chunk count as torch.distributed.checkpoint does."""
    from torch.distributed.checkpoint import FileSystemReader

    from ppo.models.checkpoint_meta import stored_tensors

    path = root / "ckpt" / "other_model" / "critic"
    metadata = FileSystemReader(str(path)).read_metadata().state_dict_metadata
    expected = {key: (tuple(meta.size), len(meta.chunks)) for key, meta in metadata.items()}
    assert {key: (t.shape, t.chunks) for key, t in stored_tensors(path).items()} == expected
    assert "output_layer.weight" in expected


@pytest.mark.slow
def test_the_checks_import_neither_torch_nor_transformers(root):
    """The dry run stays as light as the config: json, safetensors headers, tokenizers, a torch-free unpickler."""
    script = ("import sys; from ppo.launch.cli import main; "
              "rc = main(['gpu.py', 'model.path=models/good', 'critic.model_path=models/bigger_critic', "
              "'trainer.resume=ckpt/good', '--dry-run']); "
              "print(rc, sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.splitlines()[-1] == "2 []", done.stderr  # refused: ckpt/good's critic is not bigger_critic
    assert "ckpt/good/critic is a checkpoint of another model" in done.stderr
