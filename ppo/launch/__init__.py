"""The launch layer: executors, run directories, local / debug / SLURM runs, and ``launch.py``'s commands.

- :mod:`~ppo.launch.executors`: ``LocalExecutor``, ``DebugExecutor``, ``SlurmExecutor`` (plain dataclasses).
- :mod:`~ppo.launch.prepare`: experiment file + fiddlers + overrides -> checked experiment, plan, executor.
- :mod:`~ppo.launch.rundir`: ``runs/<name>-<timestamp>`` with the config, overrides, git state, versions
  (``write_run_dir``, for runs and sweep trials alike).
- :mod:`~ppo.launch.job`: ``python -m ppo.launch.job RUN_DIR`` builds the stored config and calls ``run``.
- :mod:`~ppo.launch.local`: the local and debug runners.
- :mod:`~ppo.launch.slurm`: the pre-submit check, sbatch rendering, submission, status / logs / cancel through submitit.
- :mod:`~ppo.launch.slurm_job`: what each SLURM task runs: Ray head or worker, then the driver on node 0.
- :mod:`~ppo.launch.cli`: ``launch.py``'s command line for experiments (a CLI: nothing in ``ppo`` imports it).

This package never imports :mod:`ppo.sweep`; sweeps build on it.

Importing this package loads the executors only (no Fiddle, no submitit).
"""

from ppo.launch.executors import DebugExecutor, LocalExecutor, SlurmExecutor

__all__ = ["DebugExecutor", "LocalExecutor", "SlurmExecutor"]
