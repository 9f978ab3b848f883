"""The models and checkpoints a run will read, checked on this machine before anything is created or queued.

- The policy's folder (``model.path``, or a hub id's cached snapshot) and the critic's (``critic.model_path``):
  :func:`ppo.models.folder_check.check_model_folder` (config, weights' headers, tokenizer; of a cached snapshot, whose
  files the fetch checked, the config and the tokenizer where it has ``tokenizer.json``).  The folder's
  ``config.json`` is what the run plans with; where the recipe carries a copy (``model.config``) that differs, the
  dry run says how.  A hub id that is not in the cache is planned from the copy, and the dry run says so.
- The pair: the critic reads the policy's token ids, so its tokenizer must be the policy's and its embedding must
  hold every id (a critic of another size with the same tokenizer is fine).  The reference model is the policy's
  own starting point (the run keeps it), so it always agrees.
- ``trainer.resume=DIR`` and ``critic.model_path=<run>/checkpoints/step_N``: the distributed checkpoint's metadata
  (:mod:`ppo.models.checkpoint_meta`) against the run's model; another tensor-parallel layout is resharded on load,
  which the dry run says.

Folders that are not on this machine are left to ``missing_paths`` (a SLURM dry run reports them); with
``executor.check_paths=False`` (the paths exist on the cluster only) nothing here is read.  Every fault is one
:class:`ModelInputError` line; :func:`check_models` returns the dry run's notes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppo.hub import hub_cache
from ppo.models.checkpoint_meta import CheckpointMismatch, check_against, saved_tensor_parallel
from ppo.models.folder_check import ModelFolder, ModelFolderError, check_model_folder
from ppo.models.hub import cached_model, parse_model_id

PLANNED_FIELDS = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "intermediate_size", "head_dim", "tie_word_embeddings",
                  "max_position_embeddings", "rope_theta")
"""The ``config.json`` fields the dry run compares with the recipe's copy (those the plan and layouts read)."""


class ModelInputError(ValueError):
    """A model folder, model pair or checkpoint the run cannot use; one line."""


def local_folder(path: str) -> tuple[Path | None, str | None]:
    """``(the folder here, the hub id)``: a local path gives ``(path, None)``; a hub id its cached snapshot (None
    when not cached) and itself."""
    model = parse_model_id(path)
    if model is None:
        return Path(path), None
    return cached_model(model), str(model)


def fetched(folder: Path, hub_id: str | None) -> bool:
    """A snapshot of the HF cache (named by its hub id, or by the path a launch pinned): the fetch checked its files."""
    return hub_id is not None or hub_cache().resolve() in folder.resolve().parents


def check_models(experiment: Any, executor: Any) -> list[str]:
    """Refuse (``ModelInputError``) what the run could not load; the dry run's lines on the models otherwise."""
    if getattr(executor, "check_paths", True) is False:
        return []
    notes: list[str] = []
    policy = _check_policy(experiment, notes)
    _check_critic(experiment, policy, notes)
    _check_resume(experiment, policy, notes)
    return notes


def _check_policy(experiment: Any, notes: list[str]) -> ModelFolder | None:
    model = getattr(experiment, "model", None)
    if type(model).__name__ != "HFCheckpoint" or not isinstance(model.path, str) or not model.path:
        return None  # an empty path is check()'s to refuse
    folder, hub_id = local_folder(model.path)
    if folder is None:
        copy = "the recipe's model.config" if model.config else "nothing (no model.config: no memory plan)"
        notes.append(f"model.path: {hub_id} is not in the HF cache: planned from {copy}; a launch fetches it and "
                     "checks its files first")
        return None
    if not folder.exists():
        return None  # missing_paths() reports it
    snapshot = fetched(folder, hub_id)
    checked = _folder(folder, "model.path", weights=not snapshot)
    what = "the HF cache's snapshot" if snapshot else "weights' headers, tokenizer"
    notes.append(f"model.path: {folder} checked (config.json, {checked.architecture.model_type}, {what})")
    if model.config:
        differences = config_differences(checked.config, model.config)
        if differences:
            notes.append(f"model.path: {folder}/config.json wins over the recipe's model.config, which differs: "
                         f"{'; '.join(differences)}")
    return checked


def config_differences(actual: dict, copy: dict) -> list[str]:
    """``field: file value (recipe value)`` for each planned field where the recipe's copy differs from the file."""
    return [f"{name}={actual.get(name)!r} (recipe {copy.get(name)!r})" for name in PLANNED_FIELDS
            if name in actual or name in copy if actual.get(name) != copy.get(name)]


def _folder(folder: Path, where: str, **options) -> ModelFolder:
    try:
        return check_model_folder(folder, **options)
    except ModelFolderError as err:
        raise ModelInputError(f"{where}: {err}") from None


def _check_critic(experiment: Any, policy: ModelFolder | None, notes: list[str]) -> None:
    critic = getattr(experiment, "critic", None)
    advantage = getattr(experiment, "advantage", None)
    if critic is None or not critic.model_path or not getattr(advantage, "needs_critic", False):
        return
    step = critic.init_checkpoint()
    if step is not None:
        if policy is not None:
            _checkpoint(step, policy, "critic.model_path", value_head=True, notes=notes,
                        tensor=critic.parallel.tensor)
        return
    folder, hub_id = local_folder(critic.model_path)
    if folder is None or not folder.exists():
        return
    checked = _folder(folder, "critic.model_path", value_head=True, tokenizer_required=False,
                      weights=not fetched(folder, hub_id))
    _check_critic_layout(critic, checked)
    if policy is not None:
        check_pair(policy, checked, "critic.model_path")
        notes.append(f"critic.model_path: {folder} checked ({checked.architecture.model_type}, "
                     f"{checked.architecture.num_layers} layers; the policy's tokenizer and vocabulary)")


def _check_critic_layout(critic: Any, checked: ModelFolder) -> None:
    """The critic builds from its own config.json: its tensor-parallel size must divide that model's shape."""
    tp, arch = critic.parallel.tensor, checked.architecture
    for name, value in (("num_attention_heads", arch.num_attention_heads), ("num_key_value_heads",
                        arch.num_key_value_heads), ("intermediate_size", arch.ffn_hidden_size),
                        ("vocab_size", arch.vocab_size)):
        if value % tp:
            raise ModelInputError(f"critic.parallel.tensor={tp} does not divide the critic model's {name}={value} "
                                  f"({checked.path}/config.json)")


def check_pair(policy: ModelFolder, other: ModelFolder, where: str) -> None:
    """``other`` reads the policy's token ids: the same tokenizer (where both folders have ``tokenizer.json``) and an
    embedding that holds every id; without a tokenizer to compare, the same vocabulary size."""
    ours, theirs = policy.vocabulary, other.vocabulary
    size = other.architecture.vocab_size
    if ours is not None and theirs is not None:
        if ours != theirs:
            moved = sum(1 for token, i in ours.items() if theirs.get(token) != i)
            raise ModelInputError(f"{where}: {other.path}/tokenizer.json is not the policy's tokenizer "
                                  f"({policy.path}/tokenizer.json): {moved} of its {len(ours)} tokens have another id "
                                  f"or none, and the critic reads the policy's token ids")
        needed = max(ours.values()) + 1
        if size < needed:
            raise ModelInputError(f"{where}: {other.path}/config.json has vocab_size={size}, fewer than the "
                                  f"{needed} token ids of the policy's tokenizer")
        return
    if size != policy.architecture.vocab_size:
        raise ModelInputError(f"{where}: {other.path}/config.json has vocab_size={size}, the policy's "
                              f"{policy.architecture.vocab_size}, and no tokenizer.json shows they share a tokenizer "
                              "(the critic reads the policy's token ids)")


def _check_resume(experiment: Any, policy: ModelFolder | None, notes: list[str]) -> None:
    trainer = getattr(experiment, "trainer", None)
    resume = getattr(trainer, "resume", "auto")
    if resume in ("auto", "never") or not (Path(resume) / "trainer_state.json").is_file():
        return  # not a path, or missing_paths() reports it
    arch = policy.architecture if policy is not None else _planned_architecture(experiment)
    if arch is None:
        notes.append(f"trainer.resume: {resume} not checked against the model (its shape is not known here)")
        return
    step = Path(resume)
    _checkpoint(step / "policy", arch, "trainer.resume", notes=notes, tensor=experiment.policy.parallel.tensor)
    if experiment.advantage.needs_critic:
        if not (step / "critic").is_dir():
            raise ModelInputError(f"trainer.resume: {step} holds no critic/, and the run trains one (the checkpoint "
                                  "is of a run without a critic)")
        critic_arch = arch
        if experiment.critic.model_path is not None and experiment.critic.init_checkpoint() is None:
            folder, _ = local_folder(experiment.critic.model_path)
            critic_arch = _folder(folder, "critic.model_path", value_head=True,
                                  tokenizer_required=False).architecture if folder and folder.exists() else None
        elif experiment.critic.num_layers is not None:
            from dataclasses import replace

            critic_arch = replace(arch, num_layers=experiment.critic.layers_of(arch.num_layers))
        if critic_arch is not None:
            _checkpoint(step / "critic", critic_arch, "trainer.resume", value_head=True, notes=notes,
                        tensor=experiment.critic.parallel.tensor)


def _planned_architecture(experiment: Any):
    found = experiment.model.architecture(experiment.task) if hasattr(experiment.model, "architecture") else None
    return None if found is None else found[0]


def _checkpoint(path: str | Path, model: Any, where: str, *, notes: list[str], tensor: int,
                value_head: bool = False) -> None:
    arch = model.architecture if isinstance(model, ModelFolder) else model
    try:
        stored = check_against(path, arch, value_head=value_head,
                               what="the critic" if value_head else "the run's model")
    except CheckpointMismatch as err:
        raise ModelInputError(f"{where}: {err}") from None
    saved = saved_tensor_parallel(stored)
    layout = (f"saved at tensor parallel {saved}, loaded at {tensor}: Megatron reshards it on load"
              if saved not in (None, tensor) else f"tensor parallel {tensor} as saved")
    notes.append(f"{where}: {path} matches the model ({layout})")
