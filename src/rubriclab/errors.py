"""Error hierarchy. Every error says where the problem is and what was expected."""

from __future__ import annotations


class RubricLabError(Exception):
    """Base class of every error rubriclab raises on purpose: every exception class in the package derives from it
    (a stage or the CLI reports one as a line with its fix; tests/project/test_error_hierarchy.py checks the source)."""


class ConfigError(RubricLabError):
    """params.yaml (or an override) is missing a key or holds a value of the wrong kind."""


class ArgumentError(RubricLabError, ValueError):
    """A function was handed a value outside what it accepts: a count below 1, an unknown method, a table
    without a column it needs, a setting or environment variable it reads out of range. The message names the
    value, what is accepted and, where a setting gives the value, the setting.

    Also a ValueError, as these were before they joined this hierarchy: every ``except ValueError`` (a caller's,
    the call retry layer's fallback for a failure of unknown shape, a pydantic validator's) treats them as it did.
    ``ConfigError`` and ``InputError`` are not ValueErrors: code that catches ValueError around a parse does not
    swallow them."""


class InputError(RubricLabError):
    """A file, row or field is malformed.

    The message is one line: ``<file>[:<line>][: field '<field>']: <problem>; expected <expectation>``.
    """

    def __init__(
        self,
        problem: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.file, self.line, self.field, self.expected, self.problem = file, line, field, expected, problem
        where = str(file) if file is not None else "<input>"
        if line is not None:
            where += f":{line}"
        if field is not None:
            where += f": field '{field}'"
        msg = f"{where}: {problem}"
        if expected:
            msg += f"; expected {expected}"
        super().__init__(msg)


class TemplateError(InputError):
    """A prompt or judge template lacks a required placeholder or has an unknown one."""


class ModelCallError(RubricLabError):
    """A model call failed for good (after the retry budget) or cannot be made."""


class CallFailureError(ModelCallError):
    """Too many of a role's model calls in a stage got no usable reply (``rubriclab.llm.check_calls``).

    One line naming the role, the model and the first error; the stage exits non-zero. ``failing`` holds
    every failing (role, model) tally, the first one first."""

    def __init__(self, message: str, *, role: str, model: str, first_error: str | None,
                 failing: list | None = None) -> None:
        self.role, self.model, self.first_error, self.failing = role, model, first_error, list(failing or [])
        super().__init__(message)


class ParseFailure(RubricLabError):
    """A model reply could not be parsed into the expected shape."""


class InvariantError(RubricLabError):
    """A bookkeeping invariant broke (e.g. support not conserved): a bug, reported with the numbers.

    A real exception, not ``assert``, so it still fires under ``python -O``."""


class MissingDependencyError(RubricLabError):
    """An optional dependency is not installed."""

    def __init__(self, what: str, package: str) -> None:
        super().__init__(f"{what} requires optional dependencies. Install with: pip install {package}")
