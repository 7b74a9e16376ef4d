"""``python -m clusterkit`` behaves as the ``clusterkit`` console script."""

import sys

from .cli import main

sys.exit(main())
