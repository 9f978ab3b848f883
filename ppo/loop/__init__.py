"""The PPO loop's pieces beside the trainer: how the critic's work interleaves with the policy's
(:mod:`ppo.loop.schedules`) and the step's metrics (:mod:`ppo.loop.step_metrics`)."""
