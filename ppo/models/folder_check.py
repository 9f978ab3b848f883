"""What a local HF model folder must hold for a run to load it, checked before launch without loading a tensor.

A worker reads ``config.json`` (:class:`~ppo.models.architecture.Architecture`), every tensor the conversion to
Megatron names (:mod:`ppo.models.convert`) from the safetensors files, and the trainer and vLLM read the tokenizer.
Each of these that would fail on the nodes fails here instead, as one line naming the file and what is wrong
(:class:`ModelFolderError`):

- ``config.json`` is there, parses, and describes a model the workers can convert;
- the weight files are there (``model.safetensors``, or every shard ``model.safetensors.index.json`` names) and
  their headers (the 8-byte length and the JSON that start a safetensors file: names, dtypes, shapes; no tensor
  is read) hold every parameter the architecture needs, with its shape and a dtype the workers load;
- the tokenizer loads (``tokenizer.json`` through the ``tokenizers`` library; a folder with only a slow tokenizer's
  files is taken as it is).

Nothing here imports torch or transformers: the dry run stays as fast as the config (``tokenizers`` is a small
Rust extension).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from ppo.models.architecture import Architecture, UnsupportedModelError

WEIGHT_DTYPES = ("F32", "BF16", "F16")
"""The safetensors dtypes of weights the workers load (quantised formats such as F8_E4M3 or I8 are not)."""
SLOW_TOKENIZER_FILES = ("tokenizer.model", "vocab.json", "tokenizer.tiktoken")
HEADER_LIMIT = 100 << 20  # safetensors' own limit on a header's length


class ModelFolderError(ValueError):
    """A model folder a job could not load; the message is one line naming the file."""


@dataclass(frozen=True)
class ModelFolder:
    """What a checked folder holds: its ``config.json`` fields, their architecture, and the tokenizer's vocabulary
    (token → id; None where the folder has no ``tokenizer.json``)."""

    path: Path
    config: dict
    architecture: Architecture
    vocabulary: dict[str, int] | None


def read_config(folder: Path) -> dict:
    """``config.json``'s fields; one line when it is missing or does not parse."""
    file = folder / "config.json"
    if not folder.is_dir():
        raise ModelFolderError(f"{folder} is not a directory (a local HF checkpoint folder, or a hub id org/name, is "
                               "needed)")
    if not file.is_file():
        listed = "is empty" if not any(folder.iterdir()) else "has no config.json"
        raise ModelFolderError(f"{folder} {listed} (an HF checkpoint folder holds config.json, safetensors weights and "
                               "a tokenizer)")
    try:
        config = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ModelFolderError(f"{file} does not parse as JSON ({_reason(err)})") from None
    if not isinstance(config, dict):
        raise ModelFolderError(f"{file} holds a {type(config).__name__}, not a JSON object")
    return config


def architecture_of(config: dict, file: Path) -> Architecture:
    try:
        return Architecture.from_hf_config(config)
    except UnsupportedModelError as err:
        raise ModelFolderError(f"{file}: {err}") from None
    except KeyError as err:
        raise ModelFolderError(f"{file} lacks the field {err.args[0]!r} (a decoder's config names its shape)") from None
    except (TypeError, ValueError, ZeroDivisionError) as err:
        raise ModelFolderError(f"{file}: not a valid model config ({_reason(err)})") from None


def expected_parameters(arch: Architecture, *, value_head: bool = False) -> dict[str, tuple[int, ...]]:
    """Every tensor :func:`ppo.models.convert.hf_to_megatron` reads from the folder, in HF names, with its shape.

    A value head (``value_head``: the critic) reads no ``lm_head`` (its ``score.weight`` is optional: without one the
    head starts random); an untied policy reads ``lm_head.weight``.
    """
    hidden, head = arch.hidden_size, arch.head_dim
    q, kv = arch.num_attention_heads * head, arch.num_key_value_heads * head
    shapes = {"model.embed_tokens.weight": (arch.vocab_size, hidden), "model.norm.weight": (hidden,)}
    for i in range(arch.num_layers):
        layer = f"model.layers.{i}."
        shapes |= {layer + "input_layernorm.weight": (hidden,), layer + "post_attention_layernorm.weight": (hidden,),
                   layer + "self_attn.q_proj.weight": (q, hidden), layer + "self_attn.k_proj.weight": (kv, hidden),
                   layer + "self_attn.v_proj.weight": (kv, hidden), layer + "self_attn.o_proj.weight": (hidden, q),
                   layer + "mlp.gate_proj.weight": (arch.ffn_hidden_size, hidden),
                   layer + "mlp.up_proj.weight": (arch.ffn_hidden_size, hidden),
                   layer + "mlp.down_proj.weight": (hidden, arch.ffn_hidden_size)}
        if arch.qkv_bias:
            shapes |= {layer + "self_attn.q_proj.bias": (q,), layer + "self_attn.k_proj.bias": (kv,),
                       layer + "self_attn.v_proj.bias": (kv,)}
        if arch.qk_layernorm:
            shapes |= {layer + "self_attn.q_norm.weight": (head,), layer + "self_attn.k_norm.weight": (head,)}
    if not value_head and not arch.tie_word_embeddings:
        shapes["lm_head.weight"] = (arch.vocab_size, hidden)
    return shapes


def safetensors_header(file: Path) -> dict[str, dict]:
    """``{tensor name: {"dtype", "shape", "data_offsets"}}`` from a safetensors file's header, without its tensors;
    one line for a file that is not one (too short, a length past the end, JSON that does not parse)."""
    try:
        size = file.stat().st_size
        with file.open("rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise ModelFolderError(f"{file} is not a safetensors file ({size} bytes, shorter than its header)")
            (length,) = struct.unpack("<Q", prefix)
            if length > min(HEADER_LIMIT, size - 8):
                raise ModelFolderError(f"{file} is not a safetensors file, or is cut off (its header claims {length} "
                                       f"bytes of {size})")
            header = json.loads(f.read(length))
    except OSError as err:
        raise ModelFolderError(f"{file} cannot be read ({_reason(err)})") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise ModelFolderError(f"{file} is not a safetensors file (its header does not parse: {_reason(err)})") \
            from None
    if not isinstance(header, dict):
        raise ModelFolderError(f"{file} is not a safetensors file (its header is not a JSON object)")
    header.pop("__metadata__", None)
    end = max((entry.get("data_offsets", [0, 0])[1] for entry in header.values() if isinstance(entry, dict)),
              default=0)
    if 8 + length + end > size:
        raise ModelFolderError(f"{file} is cut off: its header places tensors up to byte {8 + length + end}, the file "
                               f"has {size}")
    return header


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files a run reads: every shard the index names, or ``model.safetensors``."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ModelFolderError(f"{index} is not a safetensors index (a weight_map of tensor → file: "
                                   f"{_reason(err)})") from None
        missing = [shard for shard in shards if not (folder / shard).is_file()]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ModelFolderError(f"{folder / missing[0]} is missing{more}: {index.name} names it")
        return [folder / shard for shard in shards]
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"]
    others = sorted(p.name for p in folder.glob("*.bin")) + sorted(p.name for p in folder.glob("*.pt"))
    hint = f" ({others[0]} is there: only safetensors weights are read)" if others else ""
    raise ModelFolderError(f"{folder} has no weights: no model.safetensors nor model.safetensors.index.json{hint}")


def check_weights(folder: Path, arch: Architecture, *, value_head: bool = False) -> None:
    """Every parameter the architecture needs is in the folder's safetensors headers, shaped as the config says, in
    a dtype the workers load."""
    stored: dict[str, tuple[Path, dict]] = {}
    for file in weight_files(folder):
        stored |= {name: (file, entry) for name, entry in safetensors_header(file).items()}
    config = folder / "config.json"
    for name, shape in expected_parameters(arch, value_head=value_head).items():
        if name not in stored:
            where = ", ".join(sorted({p.name for p, _ in stored.values()})) or "the weight files"
            raise ModelFolderError(f"{folder}: no {name} in {where}, which {config.name} "
                                   f"({arch.model_type}, {arch.num_layers} layers) needs")
        file, entry = stored[name]
        if tuple(entry.get("shape", ())) != shape:
            raise ModelFolderError(f"{file}: {name} has shape {list(entry.get('shape', ()))}, {config.name} gives "
                                   f"{list(shape)}")
        if entry.get("dtype") not in WEIGHT_DTYPES:
            raise ModelFolderError(f"{file}: {name} is {entry.get('dtype')}, not a dtype the workers load "
                                   f"({', '.join(WEIGHT_DTYPES)})")
    if value_head and "score.weight" in stored:
        file, entry = stored["score.weight"]
        if tuple(entry.get("shape", ())) != (1, arch.hidden_size):
            raise ModelFolderError(f"{file}: score.weight has shape {list(entry.get('shape', ()))}, a value head is "
                                   f"[1, {arch.hidden_size}]")


def read_vocabulary(folder: Path, *, required: bool) -> dict[str, int] | None:
    """The tokenizer's token → id map from ``tokenizer.json`` (added tokens included); None where the folder has a
    slow tokenizer's files only, or (``required=False``) no tokenizer.  One line for one that does not load."""
    file = folder / "tokenizer.json"
    if not file.is_file():
        if not required or any((folder / name).is_file() for name in SLOW_TOKENIZER_FILES):
            return None
        raise ModelFolderError(f"{folder} has no tokenizer (no tokenizer.json, {', '.join(SLOW_TOKENIZER_FILES[:-1])} "
                               f"or {SLOW_TOKENIZER_FILES[-1]}): the run tokenizes prompts with the model's own")
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(file)).get_vocab(with_added_tokens=True)
    except Exception as err:  # noqa: BLE001 - the Rust library raises plain Exceptions for any malformed file
        raise ModelFolderError(f"{file} does not load as a tokenizer ({_reason(err)})") from None


def check_model_folder(folder: str | Path, *, value_head: bool = False, tokenizer_required: bool = True,
                       weights: bool = True) -> ModelFolder:
    """The folder's config, architecture and vocabulary once every check of the module docstring passed
    (``weights=False``: all but the weights', for a hub snapshot whose files the fetch has checked)."""
    folder = Path(folder)
    config = read_config(folder)
    arch = architecture_of(config, folder / "config.json")
    if weights:
        check_weights(folder, arch, value_head=value_head)
    return ModelFolder(folder, config, arch, read_vocabulary(folder, required=tokenizer_required and weights))


def _reason(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    return text[:200]
