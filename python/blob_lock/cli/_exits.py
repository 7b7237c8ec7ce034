"""The exit codes of every command (see the package's docstring)."""

import signal

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_LOST = 4
EXIT_TIMEOUT = 75
# A reader of our output went away (`| head`): as a program killed by SIGPIPE exits.
EXIT_PIPE = 128 + signal.SIGPIPE
EXIT_CANNOT_RUN = 127
