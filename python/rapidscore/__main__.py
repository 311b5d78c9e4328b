from __future__ import annotations

import sys

from rapidscore.cli import main

sys.exit(main())
