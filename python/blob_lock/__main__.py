"""``python -m blob_lock``: the ``blob-lock`` command."""

import sys

from blob_lock.cli import main

sys.exit(main())
