"""`python -m volcano_server ...` is `volcano-locks ...`."""

from .cli import main

raise SystemExit(main())
