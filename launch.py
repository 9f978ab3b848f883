"""Launch an experiment: ``python launch.py experiments/tiny_cpu.py [path=value ...] [--dry-run]``.

See ``ppo/launch/cli.py`` for the options and ``python launch.py --help``; ``status|logs|cancel RUN_DIR``
follow a launched run; ``prepare FILE`` fetches the hub models and datasets an experiment names; ``export RUN_DIR
--out DIR`` writes a checkpoint step as an HF folder.  A sweep file (one that defines ``SWEEP``, see
``docs/sweeps.md``) goes to ``ppo/sweep/cli.py`` instead.  Exit status: 0 success,
2 bad command line or config (one line on stderr), 1 job failed.

This script is the one place that knows both command lines: the launch layer (``ppo.launch``) knows nothing of
sweeps, and sweeps (``ppo.sweep``) build on the launch layer's library modules, not on its CLI.
"""

import sys
from pathlib import Path

from ppo.config.errors import ConfigError
from ppo.launch import cli as launch_cli


def is_sweep_command(argv: list[str]) -> bool:
    """Whether a command line names a sweep file (``SWEEP = ...``), told without running the file: the first ``.py``
    argument that is neither an option nor an override.  ``ppo.sweep`` is imported only for a sweep."""
    from ppo.config.loading import is_sweep_file

    files = [a for a in argv if a.endswith(".py") and not a.startswith("-") and "=" not in a]
    return bool(files) and is_sweep_file(files[0])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = bool(argv) and argv[0] in launch_cli.COMMANDS and not Path(argv[0]).is_file()
    if not command and is_sweep_command(argv):
        from ppo.sweep import cli as sweep_cli

        try:
            return sweep_cli.main(argv)
        except ConfigError as err:
            print(f"launch.py: {err}", file=sys.stderr)
            return 2
    return launch_cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
