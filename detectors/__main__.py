"""``python -m detectors`` is ``attnzoo``."""

import sys

from detectors.harness.cli import main

sys.exit(main())
