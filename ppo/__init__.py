"""PPO for language models: Megatron-Core actor and critic, vLLM rollouts, Ray workers, Fiddle experiments.

Subpackages (see DESIGN.md for the data flow):
  ppo.algorithms  pure tensor math (GAE, advantage estimators, KL, losses, reward shaping)
"""
