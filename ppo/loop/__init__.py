"""The PPO loop: :mod:`ppo.loop.trainer` (``PPOTrainer``: setup, one step, checkpoints, the loop), its settings
(:mod:`ppo.loop.settings`, torch-free: what an experiment configures as ``trainer``), how the critic's work interleaves
with the policy's (:mod:`ppo.loop.schedules`) and the step's metrics (:mod:`ppo.loop.step_metrics`).

Re-exports nothing: importing the settings must not import torch (``tests/test_import_rule.py``)."""
