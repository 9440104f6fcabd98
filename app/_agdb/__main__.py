"""`python -m agdb`: the `agdb` command."""
from __future__ import annotations

import sys

from agdb._entry import main

if __name__ == "__main__":
    sys.exit(main())
