"""Which hyperparameter mattered: each swept path's importance to the metric, for searched and gridded sweeps alike.

The configurations that ran to the end (no seed stopped) and have the metric become the trials of an in-memory
Optuna study, each with its mean over seeds as the value and its point as the parameters, and Optuna's PED-ANOVA
(:class:`optuna.importance.PedAnovaImportanceEvaluator`, Watanabe et al. 2023) scores each path: how differently it
is distributed among the best configurations (the top ``max(10 %, 2 configurations)``) than among all of them.
PED-ANOVA needs numpy alone (fANOVA would need scikit-learn) and works with few trials.  Importances sum to 1.

A numeric path is a float (log scale when it spans two decades, as the figures draw it); anything else, and a path
with fewer than two distinct values, is a category or left out.  Fewer than :data:`MIN_CONFIGS` configurations
give no importances.
"""

from __future__ import annotations

import math

import pandas as pd

from ppo.sweep.results import SweepResults
from ppo.sweep.scales import scale_of

MIN_CONFIGS = 4
"""Fewer ranked configurations than this leave too few in PED-ANOVA's top regime to say anything."""


def _distribution(values: list):
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    scale = scale_of(values)
    if scale.categories:
        return CategoricalDistribution([repr(v) for v in scale.categories]), repr
    return FloatDistribution(float(min(values)), float(max(values)), log=scale.log), float


def importances(results: SweepResults) -> pd.DataFrame | None:
    """``path``, ``importance`` (best first), or None when there are too few completed configurations."""
    import optuna
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances
    from optuna.trial import create_trial

    configs = results.configs
    ranked = configs[configs["mean"].notna() & (configs["stopped"] == 0)]
    if len(ranked) < MIN_CONFIGS:
        return None
    paths = [a for a in results.axes if len(set(map(repr, ranked[a]))) > 1]
    if not paths:
        return None
    kinds = {a: _distribution(list(ranked[a])) for a in paths}
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(direction="maximize" if results.maximize else "minimize")
    for _, config in ranked.iterrows():
        study.add_trial(create_trial(params={a: kinds[a][1](config[a]) for a in paths},
                                     distributions={a: kinds[a][0] for a in paths}, value=float(config["mean"])))
    quantile = max(0.1, 2 / len(ranked))
    scores = get_param_importances(study, evaluator=PedAnovaImportanceEvaluator(target_quantile=quantile))
    frame = pd.DataFrame({"path": list(scores), "importance": [float(v) for v in scores.values()]})
    frame = frame[frame["importance"].map(math.isfinite)]
    return frame.sort_values("importance", ascending=False, kind="stable").reset_index(drop=True)
