"""``python launch.py prepare FILE [path=value ...]``: fetch every hub model and dataset an experiment names, then
say how to launch it.

Run on a host that reaches the hub (a cluster's login node) before submitting: models (weights, configs, tokenizer
files) go into the HF cache, datasets into ``PPO_DATA_ROOT`` (:mod:`ppo.launch.fetch`), with huggingface_hub's and
datasets' own progress bars.  What is already there is said to be so and not fetched again, so a second run does
nothing.  The experiment is then checked as a launch from this host would check it (on the local paths), and the
command lines to launch with are printed: as given (the ids resolve from the cache without the network) or with the
fetched paths pinned.  With ``HF_HUB_OFFLINE=1`` nothing is fetched: anything not already here is one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys

from ppo.config.errors import ConfigError
from ppo.hub import HubError
from ppo.launch import fetch
from ppo.launch.prepare import Request, prepare


def prepare_inputs(request: Request, out=None) -> int:
    """Fetch what ``request``'s experiment names on the hub; print one line per input and the launch commands."""
    out = out or sys.stdout
    checked = prepare(dataclasses.replace(request, dry_run=True))
    inputs = fetch.hub_inputs(checked.experiment)
    if not inputs:
        print(f"nothing to fetch: {request.file} names no hub model or dataset", file=out)
        return 0
    resolved = {}
    for item in inputs:
        local = item.local()
        if local is not None:
            print(f"{item.where} = {item.ref}: already there, {local}", file=out, flush=True)
            resolved[item.where] = local
        else:
            try:
                resolved |= fetch.resolve([item], lambda line: print(line, file=out, flush=True))
            except HubError as err:
                raise ConfigError(str(err)) from None
    prepare(dataclasses.replace(request, dry_run=False))  # as a launch from here checks it, on the local paths
    command = ["python", "launch.py", request.file, *[f"--fiddler={f}" for f in request.fiddlers],
               *([f"--executor={request.executor}"] if request.executor else []), *request.overrides]
    pinned = [f"{where}={path}" for where, path in resolved.items()]
    print(f"ready: what {request.file} reads from the hub is here.  Launch it as it is (the ids resolve from the "
          f"cache, without the network):\n  {shlex.join(command)}\nor with the fetched paths pinned:\n  "
          f"{shlex.join(command + pinned)}\n(HF_HUB_OFFLINE=1 in front of either keeps a launch off the network.)",
          file=out)
    return 0
