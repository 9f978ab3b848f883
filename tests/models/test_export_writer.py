"""The HF folder writer (``ppo.models.export.write_hf_export``): pieces fill files of a size, with HF's index; one
file when they fit; a critic's ``config.json`` names its one-label head."""

import json

import torch

from ppo.models.convert import load_hf_state_dict
from ppo.models.export import write_hf_export


def like_dir(path):
    path.mkdir()
    config = {"model_type": "qwen2", "num_hidden_layers": 3, "architectures": ["Qwen2ForCausalLM"]}
    (path / "config.json").write_text(json.dumps(config))
    (path / "tokenizer.json").write_text("{}")
    (path / "model.safetensors").write_text("old weights, never copied")
    return path


def pieces(layers: int, head: str = "lm_head.weight"):
    g = torch.Generator().manual_seed(0)
    yield {"model.embed_tokens.weight": torch.randn(8, 4, generator=g)}
    for i in range(layers):
        yield {f"model.layers.{i}.mlp.up_proj.weight": torch.randn(8, 4, generator=g)}  # 128 bytes a piece
    yield {"model.norm.weight": torch.ones(4), head: torch.randn(8 if head == "lm_head.weight" else 1, 4, generator=g)}


def test_pieces_fill_files_of_the_given_size_with_an_index(tmp_path):
    out = write_hf_export(pieces(3), like_dir(tmp_path / "like"), tmp_path / "out", shard_bytes=256)
    files = sorted(p.name for p in out.iterdir())
    assert files == ["config.json", "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                     "model-00003-of-00003.safetensors", "model.safetensors.index.json", "tokenizer.json"]
    expected = {name: t for piece in pieces(3) for name, t in piece.items()}
    loaded = load_hf_state_dict(out)
    assert loaded.keys() == expected.keys() and all(torch.equal(loaded[k], expected[k]) for k in expected)
    assert json.loads((out / "model.safetensors.index.json").read_text())["metadata"]["total_size"] == 656


def test_a_dict_is_one_file_and_a_critic_says_its_head_is_one_label(tmp_path):
    state = {name: t for piece in pieces(1, head="score.weight") for name, t in piece.items()}
    out = write_hf_export(state, like_dir(tmp_path / "like"), tmp_path / "out", shard_bytes=1)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["architectures"] == ["Qwen2ForTokenClassification"]
    assert (config["id2label"], config["token_classification_bias"]) == ({"0": "value"}, False)
