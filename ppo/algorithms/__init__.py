"""PPO mathematics as pure tensor functions (no I/O, no distributed state), one module per subject.

    from ppo.algorithms.gae import compute_gae, length_adaptive_lambda
    from ppo.algorithms.policy_loss import clipped_pg_loss
    from ppo.algorithms.critic_loss import value_loss
    from ppo.algorithms.advantages import estimate_advantages

The package re-exports nothing: import from the module.  The one import rule of the project holds here too:
settings live in torch-free modules (``estimators``: the estimator classes an experiment configures; ``options``:
the loss options' allowed values), the tensor code sits beside them and imports torch at the top (``advantages``,
``gae``, ``policy_loss``, ...).  See ``docs/architecture.md``, "The import rule".
"""
