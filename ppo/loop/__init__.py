"""The PPO loop: :mod:`ppo.loop.trainer` (``PPOTrainer``: the loop and one step), its settings
(:mod:`ppo.loop.settings`, torch-free: what an experiment configures as ``trainer``), starting the workers
(:mod:`ppo.loop.start`, :mod:`ppo.loop.warm_start`), who holds shared GPUs (:mod:`ppo.loop.gpu_turns`), the step's
forward passes (:mod:`ppo.loop.forward`) and how the critic's work interleaves with the policy's
(:mod:`ppo.loop.schedules`), its timings (:mod:`ppo.loop.clock`), metrics (:mod:`ppo.loop.step_metrics`) and
records (:mod:`ppo.loop.records`), and checkpoints (:mod:`ppo.loop.checkpoints`, torch-free).

Re-exports nothing: importing the settings must not import torch (``tests/test_import_rule.py``)."""
