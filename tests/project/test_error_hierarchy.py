"""Every error rubriclab raises is a ``RubricLabError`` (rubriclab.errors): a stage or the CLI reports it as one line
with its fix, and a caller catches all of them with one except. Read from the source (no module is imported):

- no ``raise ValueError`` in src, except in a pydantic validator (a function the schema hands to ``AfterValidator``,
  ``PlainValidator``, ... or ``settings._custom``, or decorated ``field_validator`` / ``model_validator``): pydantic
  turns a ValueError raised there into the field's ValidationError, which is how a validator says "not this value";
  what the user sees is the ConfigError built from that. A value a function refuses is an ``ArgumentError`` (also a
  ValueError, so every ``except ValueError`` treats it as before).
- every exception class defined in src derives from RubricLabError (warnings are not errors and are left out).
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from rubriclab.errors import ArgumentError, ConfigError, InputError, RubricLabError

SRC = Path(__file__).resolve().parents[2] / "src" / "rubriclab"
VALIDATOR_WRAPPERS = {"AfterValidator", "BeforeValidator", "PlainValidator", "WrapValidator", "_custom"}
VALIDATOR_DECORATORS = {"field_validator", "model_validator", "validator", "root_validator"}


def _name(node: ast.AST) -> str:
    """The last part of a (dotted) name or call: ``pydantic.AfterValidator(...)`` -> ``AfterValidator``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _sources() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in sorted(SRC.rglob("*.py"))}


def _validators(tree: ast.Module) -> set[str]:
    """Names of the module's functions that pydantic runs as validators."""
    names = {_name(arg) for node in ast.walk(tree) if isinstance(node, ast.Call)
             and _name(node) in VALIDATOR_WRAPPERS for arg in node.args[:1]}
    names |= {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
              and any(_name(d) in VALIDATOR_DECORATORS for d in node.decorator_list)}
    return names


def _bare_value_errors(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, enclosing function) of each ``raise ValueError`` outside a validator."""
    allowed = _validators(tree)
    found = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name)
                continue
            if (isinstance(child, ast.Raise) and child.exc is not None and _name(child.exc) == "ValueError"
                    and function not in allowed):
                found.append((child.lineno, function or "<module>"))
            visit(child, function)

    visit(tree, "")
    return found


def test_no_bare_value_error_is_raised_in_src():
    found = [f"{path.relative_to(SRC.parent)}:{line} (in {function})"
             for path, tree in _sources().items() for line, function in _bare_value_errors(tree)]
    assert not found, ("raise the fitting rubriclab.errors class (ArgumentError for a value a function refuses, "
                       "ConfigError, InputError, InvariantError) instead of ValueError:\n" + "\n".join(found))


def test_the_check_sees_a_bare_value_error_and_spares_validators():
    tree = ast.parse("from pydantic import AfterValidator\n"
                     "def ok(v):\n    raise ValueError\n"
                     "X = AfterValidator(ok)\n"
                     "def bad(n):\n    if n < 1:\n        raise ValueError(f'n={n}')\n")
    assert _bare_value_errors(tree) == [(7, "bad")]


def _classes() -> dict[str, list[tuple[str, list[str]]]]:
    """Every class defined in src: name -> [(where, base names)]."""
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                where = f"{path.relative_to(SRC.parent)}:{node.lineno}"
                out.setdefault(node.name, []).append((where, [_name(b) for b in node.bases]))
    return out


def _kind(name: str, classes: dict, seen: frozenset = frozenset()) -> set[str]:
    """What ``name`` derives from, as far as it matters here: "rubriclab" (RubricLabError), "warning", "exception"
    (another exception class: a builtin one, or a library's by its name)."""
    if name == "RubricLabError":
        return {"rubriclab"}
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and issubclass(builtin, BaseException):
        return {"warning" if issubclass(builtin, Warning) else "exception"}
    if name in seen:
        return set()
    if name not in classes:  # a library's class: an exception by its name
        return {"warning"} if name.endswith("Warning") else {"exception"} if name.endswith(("Error", "Exception")) \
            else set()
    return {k for _, bases in classes[name] for base in bases for k in _kind(base, classes, seen | {name})}


def test_every_exception_class_in_src_derives_from_rubriclab_error():
    classes = _classes()
    outside = [f"{where}: {name}({', '.join(bases)})" for name, defs in classes.items() for where, bases in defs
               if _kind(name, classes) & {"exception"} and "rubriclab" not in _kind(name, classes)
               and name != "RubricLabError"]
    assert not outside, "derive these from rubriclab.errors.RubricLabError (or a subclass):\n" + "\n".join(outside)


def test_the_classes_that_were_value_errors_still_are():
    """ArgumentError replaced bare ValueErrors: still caught by ``except ValueError``; the older classes are not
    ValueErrors (an ``except ValueError`` around a parse must not swallow a ConfigError or an InputError)."""
    err = ArgumentError("samples=0: need at least one draw per verdict")
    assert isinstance(err, RubricLabError) and isinstance(err, ValueError)
    assert not issubclass(ConfigError, ValueError) and not issubclass(InputError, ValueError)


def test_errors_that_joined_keep_their_other_bases():
    from rubriclab.llm._processes import ProviderProcessError
    from rubriclab.llm._reply_cap import ReplyTooLargeError
    from rubriclab.llm._retry import MalformedResponseError, RemoteFailure, is_retryable
    from rubriclab.testing import BrowserNotFoundError

    assert issubclass(ProviderProcessError, RuntimeError) and issubclass(BrowserNotFoundError, RuntimeError)
    for cls in (ProviderProcessError, ReplyTooLargeError, MalformedResponseError, RemoteFailure,
                BrowserNotFoundError):
        assert issubclass(cls, RubricLabError), cls
    # the retry layer classifies them as before: a malformed body is retried, a reply past its cap is not
    assert is_retryable(MalformedResponseError("no choices"))
    assert not is_retryable(ReplyTooLargeError(10, 5))
    assert is_retryable(RemoteFailure("X", "m", True, None)) and not is_retryable(RemoteFailure("X", "m", False, None))
    # an ArgumentError raised inside a call stays what a plain ValueError was to the retry layer
    assert is_retryable(ArgumentError("x")) == is_retryable(ValueError("x"))
