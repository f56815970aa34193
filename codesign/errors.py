"""User-facing errors: the CLI prints their message as one line, without a traceback."""


class CodesignError(Exception):
    """A mistake in user input (file, field, value) or an impossible request."""


class ConfigError(CodesignError):
    """A malformed or impossible hardware config, board, space or option."""


class InvalidSchedule(CodesignError):
    """A schedule config that breaks a VTA rule; the message names the rule."""


class SimulationError(CodesignError):
    """A VTA program that cannot run: deadlock, empty-queue pop, out-of-bounds access."""


class BoardError(CodesignError):
    """A board refused a request or cannot run it: wrong bitstream, checksum, part, payload size,
    unknown function, an unreachable board."""
