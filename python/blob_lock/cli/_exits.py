"""The exit codes of every command (see the package's docstring)."""

import signal

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_LOST = 4
EXIT_TIMEOUT = 75
# A reader of our output went away (`| head`): as a program killed by SIGPIPE exits.
# Windows has no SIGPIPE: the number it has on Linux and macOS.
EXIT_PIPE = 128 + getattr(signal, "SIGPIPE", 13)
EXIT_CANNOT_RUN = 127
