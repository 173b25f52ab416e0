"""While a batch runs, the cycle collector skips the objects that existed when it started (issue 25, ``llm._heap``):
``gc.freeze()`` at the start of the outermost batch, ``gc.unfreeze()`` at its end, never over a caller's own freeze,
never with the collector disabled, never ended by one batch while another still runs, and not inherited by a child
forked during a batch."""

from __future__ import annotations

import gc
import os
import threading

import pytest

from rubriclab.llm import BudgetExceededError, CallRequest, Gateway, RoleSpec, SpendBudget, _heap, open_store
from rubriclab.testing import scripted_model


def _batch(name: str, n: int = 3) -> list[CallRequest]:
    role = RoleSpec(name="judge", model=f"scripted/{name}", max_tokens=8, concurrency=2)
    return [CallRequest(role=role, messages=[{"role": "user", "content": f"{name} {i}"}]) for i in range(n)]


def _frozen_during(name: str) -> list[int]:
    """Register ``scripted/<name>``; each call appends the permanent generation's size as it runs."""
    seen: list[int] = []

    def script(messages, params):
        seen.append(gc.get_freeze_count())
        return "A"

    scripted_model(name, script)
    return seen


@pytest.fixture(autouse=True)
def nothing_frozen():
    assert gc.get_freeze_count() == 0, "a test before this one left objects frozen"
    yield
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    assert frozen == 0, "the test left objects frozen"


def test_the_objects_from_before_a_batch_are_frozen_while_it_runs(tmp_path):
    seen = _frozen_during("heap-on")
    tracked = len(gc.get_objects())
    res = Gateway(open_store(tmp_path / "s.sqlite"), progress=False).run(_batch("heap-on"))
    assert all(r.ok for r in res) and len(seen) == 3
    assert min(seen) >= 0.9 * tracked  # the whole heap as the batch began, not a handful of objects
    assert gc.get_freeze_count() == 0  # put back at the end


def test_the_collector_runs_as_python_does_when_asked(tmp_path):
    seen = _frozen_during("heap-off")
    Gateway(open_store(tmp_path / "s.sqlite"), progress=False, freeze_old_objects=False).run(_batch("heap-off"))
    assert seen == [0, 0, 0]


def test_a_callers_own_freeze_is_left_as_it_is(tmp_path):
    seen = _frozen_during("heap-theirs")
    gc.freeze()  # e.g. a server about to fork its workers
    theirs = gc.get_freeze_count()
    try:
        Gateway(open_store(tmp_path / "s.sqlite"), progress=False).run(_batch("heap-theirs"))
        assert max(seen) <= theirs  # nothing added to it (frozen objects still die by reference count)
        assert gc.get_freeze_count() >= 0.9 * theirs  # and not undone
    finally:
        gc.unfreeze()


def test_nothing_is_frozen_with_the_collector_disabled(tmp_path):
    seen = _frozen_during("heap-disabled")
    gc.disable()
    try:
        Gateway(open_store(tmp_path / "s.sqlite"), progress=False).run(_batch("heap-disabled"))
    finally:
        gc.enable()
    assert seen == [0, 0, 0]


def test_a_batch_that_ends_does_not_unfreeze_one_still_running(tmp_path):
    """Two threads, a batch each: the short one ends while the long one is inside a call."""
    long_started, short_done = threading.Event(), threading.Event()
    seen: list[int] = []

    def slow(messages, params):
        long_started.set()
        assert short_done.wait(30)
        seen.append(gc.get_freeze_count())
        return "A"

    scripted_model("heap-long", slow)
    _frozen_during("heap-short")
    errors: list[BaseException] = []

    def long_batch() -> None:
        try:
            Gateway(open_store(tmp_path / "long.sqlite"), progress=False).run(_batch("heap-long", 1))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)

    t = threading.Thread(target=long_batch)
    t.start()
    try:
        assert long_started.wait(30)
        Gateway(open_store(tmp_path / "short.sqlite"), progress=False).run(_batch("heap-short"))
    finally:
        short_done.set()
        t.join(30)
    assert not t.is_alive()
    assert not errors and seen and seen[0] > 0  # still frozen after the short batch ended
    assert gc.get_freeze_count() == 0  # the last one out put everything back


def test_a_batch_that_fails_puts_everything_back(tmp_path, monkeypatch):
    _frozen_during("heap-fails")
    freezes: list[int] = []
    freeze = gc.freeze

    def counted_freeze() -> None:
        freezes.append(1)
        freeze()

    monkeypatch.setattr(gc, "freeze", counted_freeze)
    gw = Gateway(open_store(tmp_path / "s.sqlite"), progress=False, budget=SpendBudget(prompt_tokens=1))
    with pytest.raises(BudgetExceededError):  # raised inside the batch, before any call
        gw.run(_batch("heap-fails"))
    assert freezes == [1]  # it had frozen
    assert gc.get_freeze_count() == 0


def test_a_child_forked_during_a_batch_starts_with_nothing_frozen(tmp_path):
    """Only the forking thread lives on in the child: a freeze it inherited would never be put back."""
    child: list[str] = []

    def script(messages, params):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report and leave at once
            os.write(write, f"{gc.get_freeze_count()} {_heap._depth}".encode())
            os._exit(0)
        os.close(write)
        child.append(os.read(read, 100).decode())
        os.close(read)
        os.waitpid(pid, 0)
        child.append(str(gc.get_freeze_count() > 0))  # the parent's batch still frozen
        return "A"

    scripted_model("heap-fork", script)
    Gateway(open_store(tmp_path / "s.sqlite"), progress=False).run(_batch("heap-fork", 1))
    assert child == ["0 0", "True"]
    assert gc.get_freeze_count() == 0
