"""`python -m pfcsim`: the command line (see `pfcsim.cli`)."""

import sys

from pfcsim.cli import main

sys.exit(main())
