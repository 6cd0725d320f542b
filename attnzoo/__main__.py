"""``python -m attnzoo`` is the ``attnzoo`` command."""

import sys

from attnzoo.cli import main

sys.exit(main())
