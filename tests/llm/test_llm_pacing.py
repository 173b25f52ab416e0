"""Send turns (issue 25, ``llm._pacing``): at most a few calls at a time build their request in litellm, so calls
that start together leave one after another instead of all at the end of one long interleaved stretch. A turn comes
back when litellm hands the request to the provider (it calls the request's ``logger_fn``), or when the call ends; an
endpoint whose successful call never signalled is no longer paced; in-process models are never paced."""

from __future__ import annotations

import asyncio
import json
import threading

import litellm
import pytest

from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store
from rubriclab.llm._pacing import SendPacer
from rubriclab.testing import FakeOpenAIServer, scripted_model


@pytest.fixture
def fake_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test")


def _requests(role: RoleSpec, n: int, tag: str = "q") -> list[CallRequest]:
    return [CallRequest(role=role, messages=[{"role": "user", "content": f"{tag} {i}"}]) for i in range(n)]


async def _pending(fut: asyncio.Future) -> bool:
    for _ in range(5):  # let every ready callback run
        await asyncio.sleep(0)
    return not fut.done()


# -- the pacer ------------------------------------------------------------------------------------------------------


def test_a_turn_comes_back_when_litellm_sends_not_when_the_call_ends():
    async def go():
        pacer = SendPacer(2)
        a, b = await pacer.take("g"), await pacer.take("g")
        third = asyncio.ensure_future(pacer.take("g"))
        assert await _pending(third)  # two turns, both taken
        a({"model": "m"})  # litellm's pre_call: a's request leaves
        c = await asyncio.wait_for(third, 1)
        assert c is not None
        a({"model": "m"})  # litellm's post_call calls it again: nothing more is handed back
        fourth = asyncio.ensure_future(pacer.take("g"))
        assert await _pending(fourth)
        pacer.done("g", a, ok=True)  # a's turn is already back
        assert await _pending(fourth)
        pacer.done("g", b, ok=False)  # b failed before sending: its turn comes back as it ends
        assert await asyncio.wait_for(fourth, 1) is not None
        assert pacer.signals == 1 and not pacer.unpaced  # a failed call does not turn pacing off

    asyncio.run(go())


def test_a_signal_from_another_thread_hands_the_turn_back_on_the_loop():
    """litellm's generic HTTP handler calls ``pre_call`` inside ``completion()``, in its executor thread; asyncio's
    semaphore may only be released on its loop's thread."""
    async def go():
        pacer = SendPacer(1)
        released_on: list[int] = []
        release = pacer.semaphore.release

        def on_which_thread() -> None:
            released_on.append(threading.get_ident())
            release()

        pacer.semaphore.release = on_which_thread
        a = await pacer.take("g")
        waiting = asyncio.ensure_future(pacer.take("g"))
        t = threading.Thread(target=a, args=({},))  # a provider that builds its request in litellm's executor
        t.start()
        t.join()
        assert await asyncio.wait_for(waiting, 1) is not None
        assert released_on == [threading.get_ident()]  # the loop's thread, not the signalling one
        pacer.done("g", a, ok=True)
        assert pacer.signals == 1 and not pacer.unpaced

    asyncio.run(go())


def test_a_turn_not_signalled_in_time_goes_back_once():
    """A provider whose setup waits on the network before litellm's ``pre_call`` holds a turn ``hold_s`` at most;
    the turn goes back once, whatever comes later (the call's end, a late signal)."""
    async def go():
        pacer = SendPacer(1, hold_s=0.05)
        a = await pacer.take("g")
        waiting = asyncio.ensure_future(pacer.take("g"))
        assert await _pending(waiting)
        b = await asyncio.wait_for(waiting, 1)  # a's turn went back unsignalled
        assert b is not None and not a.signalled
        a({"model": "m"})  # the late signal: counted, nothing more handed back
        pacer.done("g", a, ok=True)
        assert pacer.signals == 1 and not pacer.unpaced
        after = asyncio.ensure_future(pacer.take("g"))
        assert await _pending(after)  # b still holds the one turn
        b({})
        assert await asyncio.wait_for(after, 1) is not None

    asyncio.run(go())


def test_a_call_cancelled_while_it_waits_for_a_turn_takes_none_away():
    async def go():
        pacer = SendPacer(1)
        a = await pacer.take("g")
        gone = asyncio.ensure_future(pacer.take("g"))
        assert await _pending(gone)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        pacer.done("g", a, ok=False)
        assert await asyncio.wait_for(pacer.take("g"), 1) is not None

    asyncio.run(go())


def test_an_endpoint_whose_successful_call_never_signalled_is_no_longer_paced():
    """A litellm path that never calls ``logger_fn`` would otherwise hold every call of the batch to the number of
    turns; it costs one call instead. Other endpoints stay paced."""
    async def go():
        pacer = SendPacer(2)
        a, b = await pacer.take("g"), await pacer.take("g")
        waiting = [asyncio.ensure_future(pacer.take("g")) for _ in range(3)]
        other = asyncio.ensure_future(pacer.take("h"))
        assert await _pending(waiting[0])
        pacer.done("g", a, ok=True)  # answered, never signalled
        assert "g" in pacer.unpaced
        assert await asyncio.wait_for(asyncio.gather(*waiting), 1) == [None, None, None]
        assert await pacer.take("g") is None  # no turn taken, none to give back
        h = await asyncio.wait_for(other, 1)
        assert h is not None  # endpoint h is still paced
        pacer.done("h", h, ok=True)
        pacer.done("g", b, ok=True)
        assert pacer.unpaced == {"g", "h"} and pacer.signals == 0

    asyncio.run(go())


def test_the_number_of_turns_is_at_least_one():
    async def go():
        with pytest.raises(ValueError, match="at least 1, got 0"):
            SendPacer(0)

    asyncio.run(go())


# -- in the gateway ---------------------------------------------------------------------------------------------------


def _canned() -> litellm.ModelResponse:
    return litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}],
                                 usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6})


@pytest.mark.parametrize("turns, most", [(2, 2), (None, 16)])
def test_at_most_the_turns_build_a_request_at_once(tmp_path, monkeypatch, turns, most):
    """litellm stands in with a request build in steps (as its own yields to the loop several times) and a signal as
    it sends. Paced, at most two calls build at once; unpaced, all sixteen of the concurrency do, interleaved."""
    building, seen = [0], [0]

    async def acompletion(**kw):
        building[0] += 1
        seen[0] = max(seen[0], building[0])
        for _ in range(3):
            await asyncio.sleep(0)
        building[0] -= 1
        if kw.get("logger_fn") is not None:
            kw["logger_fn"]({"model": kw["model"]})
        await asyncio.sleep(0.01)  # the provider answers
        return _canned()

    monkeypatch.setattr(litellm, "acompletion", acompletion)
    role = RoleSpec(name="judge", model="openai/paced", api_base="http://127.0.0.1:9/v1", concurrency=16)
    gw = Gateway(open_store(tmp_path / "s.sqlite"), progress=False, send_turns=turns)
    results = gw.run(_requests(role, 48))
    assert all(r.ok for r in results)
    assert seen[0] == most
    if turns is not None:
        assert gw.pacer.signals == 48 and not gw.pacer.unpaced


@pytest.mark.timeout(60)
def test_litellm_hands_back_the_turn_of_every_call_it_sends(tmp_path, fake_key):
    """Through the real litellm, to the fake server: every call signals as it sends (a litellm that stopped calling
    ``logger_fn`` fails here, not silently unpaced), all sixteen calls are at the server at once (turns do not cap
    concurrency), and what is sent, the keys and the stored requests are those of an unpaced gateway."""
    stored = {}
    with FakeOpenAIServer(latency=1.0) as server:
        role = RoleSpec(name="judge", model="openai/fake-judge", api_base=server.url, concurrency=16, timeout=20)
        for turns in (2, None):
            reqs = _requests(role, 16)
            gw = Gateway(open_store(tmp_path / f"{turns}.sqlite"), progress=False, send_turns=turns)
            results = gw.run(reqs)
            assert all(r.ok and not r.cached for r in results)
            if turns is not None:
                assert gw.pacer.signals == 16 and not gw.pacer.unpaced
                assert server.stats()["peak_in_flight"] == 16
            recs = gw.store.get_ok([r.key(0, salt=gw.salt) for r in reqs])
            stored[turns] = {k: json.dumps(rec.request, sort_keys=True) for k, rec in recs.items()}
        sent = server.stats()["attempts"]  # per hash of the request body the server received
    assert len(sent) == 16 and set(sent.values()) == {2}  # each body sent once paced, once not: the same bodies
    assert len(stored[2]) == 16 and stored[2] == stored[None]
    assert not any("logger_fn" in text for text in stored[2].values())


def test_in_process_models_are_not_paced(tmp_path):
    role = RoleSpec(name="judge", model=scripted_model("pace-local", lambda m, p: "ok"), concurrency=4)
    gw = Gateway(open_store(tmp_path / "l.sqlite"), progress=False)
    assert all(r.ok for r in gw.run(_requests(role, 8)))
    assert gw.pacer.signals == 0 and not gw.pacer.unpaced  # no turn taken: none signalled, none switched off
