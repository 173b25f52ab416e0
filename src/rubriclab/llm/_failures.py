"""Whether a stage's model calls worked: the one check every LLM stage runs before it reports success.

A gateway made by ``gateway_from_params`` tallies, per (role, model), every result it hands back: calls, usable
replies, errors (no reply: a transport failure after the retry layer, or a final error such as a bad key, an
unusable URL or an unknown model) and unparseable replies. ``check_calls`` raises ``CallFailureError`` — one
line naming the role, the model and the first error — when more than ``max_failure_share`` of a role's calls
ended in an error (``llm.defaults.max_failure_share``, overridable per role), or when the role got no usable
reply at all and errors are among the reasons. The stage runner and the CLI turn it into that line on stderr
and exit status 2. Nothing finished is lost: the stage's outputs are written first, and every reply that worked
is in the call store, so a re-run repeats only the failed calls.

Unparseable replies alone never fail a stage: the model answered, and what it answered is a measurement the
stage reports (parse failures in its metrics, ``provenance.shortfall`` on a rubric that came out short), as it
does for the embedded model, whose extractor replies rarely parse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rubriclab.errors import CallFailureError
from rubriclab.llm._gateway import CallRequest, CallResult, Gateway
from rubriclab.secrets import redact_text

# the share used for a role that does not set one (RoleSpec.max_failure_share, llm.defaults.max_failure_share)
DEFAULT_MAX_FAILURE_SHARE = 0.5


def _one_line(text: str, limit: int = 300) -> str:
    text = redact_text(" ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class RoleTally:
    """The outcomes of one role's calls to one model in one stage (one process)."""

    role: str
    model: str
    max_share: float = DEFAULT_MAX_FAILURE_SHARE
    calls: int = 0
    ok: int = 0
    errors: int = 0  # no reply: a transport failure after the retry budget, or a final error (key, URL, 4xx)
    unparseable: int = 0  # a reply that never parsed, re-asks included
    first_error: str | None = None
    first_unparseable: str | None = None

    @property
    def failed(self) -> int:
        """Calls that got no usable reply (an error or an unparseable reply)."""
        return self.errors + self.unparseable

    @property
    def error_share(self) -> float:
        """The share of calls that ended in an error (no reply)."""
        return self.errors / self.calls if self.calls else 0.0

    @property
    def failing(self) -> bool:
        """More than ``max_share`` of the calls ended in an error, or no call got a usable reply and errors are
        among the reasons (whatever the share allows)."""
        if not self.errors:
            return False
        return self.error_share > self.max_share or self.ok == 0

    def add(self, result: CallResult) -> None:
        self.calls += 1
        if result.ok:
            self.ok += 1
        elif result.parse_error is not None:
            self.unparseable += 1
            self.first_unparseable = self.first_unparseable or _one_line(result.parse_error)
        else:
            self.errors += 1
            self.first_error = self.first_error or _one_line(result.error or "no reply and no error recorded")

    def describe(self) -> str:
        """One line: the role, the model, how many calls failed and how, and the first error."""
        how = []
        if self.errors:
            how.append(f"{self.errors} error{'s' if self.errors != 1 else ''}")
        if self.unparseable:
            how.append(f"{self.unparseable} unparseable")
        rule = ("no usable reply at all" if self.ok == 0
                else f"errors in more than max_failure_share {self.max_share:g} of the calls")
        return (f"role '{self.role}' (model {self.model}): no usable reply to {self.failed} of {self.calls} calls "
                f"({', '.join(how)}; {rule}); first error: {self.first_error}")


def _threshold(request: CallRequest) -> float:
    share = getattr(request.role, "max_failure_share", None)
    return DEFAULT_MAX_FAILURE_SHARE if share is None else float(share)


class CallTally:
    """Per (role, model) tallies of every result a gateway handed back, in first-seen order."""

    def __init__(self) -> None:
        self.roles: dict[tuple[str, str], RoleTally] = {}

    def add(self, results: Iterable[CallResult]) -> None:
        """Count a batch's results."""
        for res in results:
            if res is None:  # a batch cut short: its unfinished requests have no result
                continue
            role = res.request.role
            key = (role.name, role.model)
            tally = self.roles.get(key)
            if tally is None:
                tally = self.roles[key] = RoleTally(role.name, role.model, _threshold(res.request))
            tally.add(res)

    def failing(self) -> list[RoleTally]:
        """The failing tallies, those with no usable reply at all first."""
        bad = [t for t in self.roles.values() if t.failing]
        return sorted(bad, key=lambda t: (t.ok != 0, -t.error_share))


class TalliedGateway(Gateway):
    """A Gateway that keeps a ``CallTally`` of every batch it runs (``gateway_from_params`` makes these)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally = CallTally()

    async def arun(self, requests: Sequence[CallRequest], desc: str = "calls") -> list[CallResult]:
        results = await super().arun(requests, desc=desc)
        self.tally.add(results)
        return results


def check_calls(source: Gateway | CallTally, stage: str | None = None) -> CallTally:
    """Raise ``CallFailureError`` when a role's calls failed (see the module docstring); else return the tally.

    ``source`` is a gateway from ``gateway_from_params`` (its tally is read) or a ``CallTally``. A gateway made
    another way keeps no tally: that is a bug in the stage, refused rather than passed."""
    tally = source if isinstance(source, CallTally) else getattr(source, "tally", None)
    if not isinstance(tally, CallTally):
        raise TypeError("check_calls needs a gateway from rubriclab.llm.gateway_from_params (or a CallTally)")
    stage = stage or getattr(source, "stage", None)
    bad = tally.failing()
    if not bad:
        return tally
    first = bad[0]
    msg = (f"{stage}: " if stage else "") + first.describe()
    if len(bad) > 1:
        msg += "; also failing: " + ", ".join(f"'{t.role}' ({t.model}) {t.failed} of {t.calls}" for t in bad[1:])
    msg += (f"; the {sum(t.ok for t in tally.roles.values())} replies that worked are kept in the call store, "
            "so a re-run repeats only the failed calls")
    raise CallFailureError(msg, role=first.role, model=first.model,
                           first_error=first.first_error, failing=bad)
