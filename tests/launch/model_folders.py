"""Small HF model folders, whole and broken, for the checks before launch (written without torch: a safetensors file
is an 8-byte header length, the JSON header, then the tensors' bytes)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from ppo.models.architecture import Architecture
from ppo.models.folder_check import expected_parameters

ITEM_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1}


def tiny_config(vocab_size: int, *, model_type: str = "qwen2", hidden: int = 64, layers: int = 2) -> dict:
    return {"model_type": model_type, "vocab_size": vocab_size, "hidden_size": hidden, "num_hidden_layers": layers,
            "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 2 * hidden,
            "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 128, "tie_word_embeddings": True}


def write_safetensors(file: Path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """Zero tensors of the given ``{name: (dtype, shape)}`` (a sparse file)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = ITEM_BYTES[dtype]
        for n in shape:
            size *= n
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    file.write_bytes(struct.pack("<Q", len(text)) + text)
    os.truncate(file, 8 + len(text) + offset)  # sparse: a 7B model's zeros take no disk


def write_tokenizer(folder: Path, tokens: list[str]) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tokenizer = Tokenizer(WordLevel({t: i for i, t in enumerate(tokens)}, unk_token=tokens[0]))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))


def write_model(folder: Path, config: dict, tokens: list[str] | None, *, value_head: bool = False,
                dtype: str = "F32") -> Path:
    """A whole folder: ``config.json``, ``model.safetensors`` with every parameter, ``tokenizer.json``."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    shapes = expected_parameters(Architecture.from_hf_config(config), value_head=value_head)
    write_safetensors(folder / "model.safetensors", {name: (dtype, shape) for name, shape in shapes.items()})
    if tokens is not None:
        write_tokenizer(folder, tokens)
    return folder


def model_folders(root: Path) -> None:
    """``root/models/``: ``good`` (the policy), each fault of the checks once, and critics of the pair checks."""
    models = root / "models"
    letters = ["<unk>", *"abcdefghijklmnopqrstuvwxyz"]
    config = tiny_config(len(letters))
    write_model(models / "good", config, letters)
    (models / "empty").mkdir()
    cut = write_model(models / "cut_config", config, letters)
    (cut / "config.json").write_text(json.dumps(config)[:40])
    (write_model(models / "no_weights", config, letters) / "model.safetensors").unlink()
    write_model(models / "mistral", config, letters)
    (models / "mistral" / "config.json").write_text(json.dumps({**config, "model_type": "mistral"}))
    partial = write_model(models / "missing_tensor", config, letters)
    shapes = expected_parameters(Architecture.from_hf_config(config))
    shapes.pop("model.layers.1.mlp.down_proj.weight")
    write_safetensors(partial / "model.safetensors", {n: ("F32", s) for n, s in shapes.items()})
    wrong = write_model(models / "wrong_shape", config, letters)
    (wrong / "config.json").write_text(json.dumps({**config, "intermediate_size": 96}))
    write_model(models / "fp8", config, letters, dtype="F8_E4M3")
    torn = write_model(models / "torn_weights", config, letters)
    data = (torn / "model.safetensors").read_bytes()
    (torn / "model.safetensors").write_bytes(data[: len(data) // 2])
    sharded = write_model(models / "missing_shard", config, letters)
    (sharded / "model.safetensors").rename(sharded / "model-00001-of-00002.safetensors")
    weight_map = {name: f"model-0000{1 + i % 2}-of-00002.safetensors" for i, name in enumerate(shapes)}
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (write_model(models / "bad_tokenizer", config, letters) / "tokenizer.json").write_text('{"model": 3}')
    write_model(models / "no_tokenizer", config, None)
    other = ["<unk>", *"zyxwvutsrqponmlkjihgfedcba", "extra"]
    write_model(models / "other_critic", tiny_config(len(other), model_type="llama"), other, value_head=True)
    write_model(models / "bigger_critic", tiny_config(len(letters), hidden=128, layers=3), letters, value_head=True)
    write_model(models / "critic_no_tokenizer", tiny_config(64), None, value_head=True)


def write_checkpoint(step: Path, config: dict, *, critic: bool = True) -> Path:
    """A run's checkpoint step of the model ``config`` describes, in the trainer's torch_dist format (zeros): the
    policy, and the critic unless ``critic=False``."""
    import torch
    import torch.distributed.checkpoint as dcp

    from ppo.models.checkpoint_meta import megatron_shapes

    arch = Architecture.from_hf_config(config)
    step.mkdir(parents=True)
    (step / "trainer_state.json").write_text(json.dumps({"step": 1}))
    for group in ("policy", "critic") if critic else ("policy",):
        shapes = megatron_shapes(arch, value_head=group == "critic")
        tensors = {key: torch.zeros(shape) for key, shape in shapes.items()}
        dcp.save(tensors, checkpoint_id=str(step / group), no_dist=True)
        (step / group / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist",
                                                                "sharded_backend_version": 1}))
    return step


def checkpoints(root: Path) -> None:
    """``root/ckpt/``: a step of the ``good`` model, one of another model, one without a critic."""
    config = tiny_config(27)
    write_checkpoint(root / "ckpt" / "good", config)
    write_checkpoint(root / "ckpt" / "other_model", tiny_config(27, hidden=32))
    write_checkpoint(root / "ckpt" / "policy_only", config, critic=False)
