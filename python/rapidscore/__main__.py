import sys

from rapidscore.cli import main

sys.exit(main())
