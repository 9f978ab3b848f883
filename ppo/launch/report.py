"""What ``--dry-run`` prints: the flattened config with what changed, the resource plan, the executor, the hub models
and datasets (here, or what a launch fetches), the input paths a SLURM job's dry run could not find here, the sbatch
script."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ppo.config.printing import flattened_text
from ppo.launch.executors import SlurmExecutor
from ppo.launch.prepare import Prepared


def plan_table(plan: list[dict]) -> str:
    """The resource plan as an aligned table, columns in order of first appearance."""
    if not plan:
        return "(empty)"
    columns: list[str] = []
    for group in plan:
        columns += [k for k in group if k not in columns]
    rows = [columns] + [[_cell(group.get(c, "")) for c in columns] for group in plan]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def placement_section(experiment) -> list[str]:
    """The experiment's GPU map (node × GPU, which ranks share each GPU) and ``GPUs used: U of N``, if it has one."""
    if not hasattr(experiment, "placement_plan"):
        return []
    return ["== GPU map (P = policy rank, C = critic rank, E<engine>.<rank> = vLLM engine)",
            experiment.placement_plan().grid(), "", *memory_section(experiment)]


def memory_section(experiment) -> list[str]:
    """The fullest GPU's bytes per phase and the ``peak memory:`` line (validation has refused what does not fit)."""
    if experiment.placement_plan().cpu_only:
        return []
    plan = experiment.memory_plan()
    if plan is None:
        return ["== memory plan: the model's shape is not known here (no readable config.json, no model.config)", ""]
    return ["== memory plan (GiB per GPU and phase; ppo/workers/memory.py)", plan.table(), ""]


def _cell(value) -> str:
    return value if isinstance(value, str) else repr(value)


def executor_line(executor) -> str:
    fields = ", ".join(f"{f.name}={getattr(executor, f.name)!r}" for f in dataclasses.fields(executor)
                       if getattr(executor, f.name) not in (None, (), {}, False))
    return f"{type(executor).__name__}({fields})"


def dry_run_text(prepared: Prepared, run_dir: Path, sbatch: str | None) -> str:
    request = prepared.request
    changes = prepared.edits.changes()
    parts = [
        f"experiment: {prepared.file.path} ({prepared.file.module_name}.config)",
        f"fiddlers:   {' '.join(request.fiddlers) or '-'}",
        f"overrides:  {' '.join(request.overrides) or '-'}",
        f"changed:    {len(changes)} path(s), marked '# <-' below",
        "",
        "== config",
        flattened_text(prepared.cfg, prepared.edits.marks()),
        "",
        "== resource plan",
        plan_table(prepared.plan),
        "",
        *placement_section(prepared.experiment),
        "== executor",
        executor_line(prepared.executor),
        f"run directory: {run_dir} (not created by --dry-run)",
    ]
    if prepared.model_notes:
        parts += ["", "== models and checkpoints (checked on this machine)", *prepared.model_notes]
    if prepared.hub_inputs:
        parts += ["", "== hub models and datasets (a launch fetches what is not here before anything is created or "
                      "queued, and the run's config names the local paths; --dry-run fetches nothing)",
                  *prepared.hub_inputs]
    if prepared.missing_paths:
        parts += ["", "== input paths not on this machine (the job reads them on the cluster; a submission from a "
                      "host that shares its filesystem checks them first, and node 0 when the job starts)",
                  *prepared.missing_paths]
    if isinstance(prepared.executor, SlurmExecutor) and sbatch is not None:
        parts += ["", "== sbatch script", sbatch.rstrip("\n")]
    return "\n".join(parts) + "\n"
