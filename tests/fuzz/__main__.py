"""`python -m tests.fuzz --seed S -n N [--out DIR] [--jobs J]`: see tests/fuzz/campaign.py."""
from __future__ import annotations

import sys

from tests.fuzz.campaign import main

if __name__ == "__main__":
    sys.exit(main())
