"""``python -m ragtiller``: the same command as ``ragtiller``."""

from ragtiller.cli import main

raise SystemExit(main())
