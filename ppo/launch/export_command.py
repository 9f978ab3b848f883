"""``python launch.py export RUN_DIR [--step N] [--critic] --out DIR``: a checkpoint step of a run as an HF folder.

The step's distributed checkpoint (``checkpoints/step_NNNNNN/policy``, or ``/critic``) is converted in this
process, a layer at a time (:func:`ppo.models.export.export_checkpoint`): no Ray, no workers, no GPU, and the
memory of one safetensors file (:data:`ppo.models.export.SHARD_BYTES`) and one layer whatever the model's size.
The folder gets the non-weight files (config, tokenizer, generation settings) of the model the run started from:
``<run_dir>/initial_model`` for a tiny random model, else the run's ``model.path`` (for a critic with a model of
its own, ``critic.model_path``), so that it loads on its own: the policy in transformers
(``AutoModelForCausalLM``) and vLLM, the critic as ``AutoModelForTokenClassification`` (its value head is
``score``) and as another run's ``critic.model_path``.

``--step`` defaults to the latest complete checkpoint.  A directory that is not a run's, a step without a complete
checkpoint (none saved, or torn: only ``step_N.partial``, a save that never finished), a critic the run does not
train, or an ``--out`` that exists and is not empty is one line, exit 2, with nothing written.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import fiddle as fdl

from ppo.config.errors import ConfigError
from ppo.launch.job import load_stored_config
from ppo.loop.checkpoints import PARTIAL, checkpoint_dir, complete_checkpoints
from ppo.models.sources import HFCheckpoint


def checkpoint_of(run_dir: Path, step: int | None) -> tuple[int, Path]:
    """``(step, directory)`` of the run's checkpoint ``step`` (None: the latest complete one); a step without a
    complete checkpoint is a ``ConfigError`` naming the ones there are."""
    if not (run_dir / "launch.json").is_file() or not (run_dir / "config.json").is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no launch.json)")
    steps = complete_checkpoints(run_dir)
    if not steps:
        raise ConfigError(f"{run_dir} has no complete checkpoint (the trainer saves one every "
                          "trainer.checkpoint_period steps into checkpoints/step_N)")
    if step is None:
        step = max(steps)
    if step not in steps:
        there = f"complete: steps {', '.join(map(str, sorted(steps)))}"
        torn = checkpoint_dir(run_dir, step).with_name(checkpoint_dir(run_dir, step).name + PARTIAL)
        if torn.exists():
            raise ConfigError(f"the checkpoint of step {step} in {run_dir} is torn ({torn.name}: its save never "
                              f"finished); {there}")
        raise ConfigError(f"{run_dir} has no checkpoint of step {step} ({there})")
    return step, steps[step]


def model_folder(run_dir: Path, critic: bool) -> Path:
    """The HF folder the run's policy (or critic) was built from, whose config and tokenizer the export copies."""
    experiment = fdl.build(load_stored_config(run_dir))
    own = experiment.critic.model_path
    try:
        if critic and own is not None and experiment.critic.init_checkpoint() is None:
            folder = HFCheckpoint(own).local_path()
        else:
            folder = experiment.model.materialize(run_dir, experiment.task)
    except FileNotFoundError as err:
        raise ConfigError(str(err)) from None
    if folder is None or not (folder / "config.json").is_file():
        raise ConfigError(f"the model {run_dir} started from is not here ({folder or own}): its config and tokenizer "
                          "go into the export (python launch.py prepare on the run's experiment fetches it)")
    return folder


def export_step(run_dir: Path, out: Path, step: int | None = None, critic: bool = False, stream=None) -> int:
    """Write the run's policy (or critic) at checkpoint ``step`` as the HF folder ``out``; print where."""
    stream = stream or sys.stdout
    step, directory = checkpoint_of(run_dir, step)
    role = "critic" if critic else "policy"
    if not (directory / role).is_dir():
        raise ConfigError(f"{directory} holds no {role} (the run trains none)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not empty: choose another folder, or remove it")
    like = model_folder(run_dir, critic)
    with warnings.catch_warnings():  # Megatron's notices on import (no Apex) and torch's on how it loads
        warnings.filterwarnings("ignore", module=r"megatron\.")
        from ppo.models.export import export_checkpoint

        export_checkpoint(directory / role, like, out, value_head=critic)
    print(f"{out}: the {role} of {run_dir} at step {step}, an HF folder (weights, config and tokenizer of {like})",
          file=stream)
    return 0
