"""Launch an experiment: ``python launch.py experiments/tiny_cpu.py [path=value ...] [--dry-run]``.

See ``ppo/launch/cli.py`` for the options and ``python launch.py --help``; ``status|logs|cancel RUN_DIR``
follow a launched run.  Exit status: 0 success, 2 bad command line or config (one line on stderr), 1 job failed.
"""

import sys

from ppo.launch.cli import main

if __name__ == "__main__":
    sys.exit(main())
