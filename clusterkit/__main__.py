"""``python -m clusterkit`` behaves as the ``clusterkit`` console script."""

import sys

from clusterkit.cli import main

sys.exit(main())
