"""`python -m robench.cli` is `robench`."""
import sys

from robench.cli import main

sys.exit(main())
