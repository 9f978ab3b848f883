"""PPO for language models: Megatron-Core actor and critic, vLLM rollouts, Ray workers, Fiddle experiments.

Subpackages (see DESIGN.md for the data flow):
  ppo.algorithms  pure tensor math (GAE, advantage estimators, KL, losses, reward shaping)
"""

from ppo.config import fiddle_import

fiddle_import.install()  # before any Fiddle import: libcst waits until something uses it (ppo/config/fiddle_import.py)
