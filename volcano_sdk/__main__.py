"""`python -m volcano_sdk`: the `volcano-locks` command."""

import sys

from ._cli import main

sys.exit(main())
