"""The cluster, below the actors: where every rank goes (:mod:`ppo.cluster.plan`, pure), reserving it on Ray
(:mod:`ppo.cluster.placement`), free ports, the Ray runtime, and waiting on workers with a deadline
(:mod:`ppo.cluster.deadline`).  Imports nothing from the actors, the engines or the loop."""
