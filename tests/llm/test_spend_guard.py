"""llm.budget: a stage's fresh calls are estimated before each batch and refused before anything is sent."""

from __future__ import annotations

import litellm
import pytest

from rubriclab.llm import BudgetExceededError, CallRequest, Gateway, RoleSpec, SpendBudget
from rubriclab.llm._budget import estimate
from rubriclab.testing import FakeOpenAIServer, scripted_model

PRICED = "openai/gpt-4o-mini"  # in litellm's local cost map


def _requests(role: RoleSpec, n: int, size: int = 200) -> list[CallRequest]:
    return [CallRequest(role=role, messages=[{"role": "user", "content": f"question {i}: " + "word " * size}])
            for i in range(n)]


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RUBRICLAB_TEST_KEY", "sk-test-budget")


def _role(server, **kw) -> RoleSpec:
    return RoleSpec(name="judge", model=PRICED, api_base=server.url, max_tokens=50, max_retries=0,
                    api_key_env="RUBRICLAB_TEST_KEY", **kw)


def test_the_estimate_is_litellms_token_count_and_price_at_max_tokens(server):
    reqs = _requests(_role(server), 3)
    est = estimate(reqs)
    tokens = [litellm.token_counter(model=PRICED, messages=r.messages) for r in reqs]
    assert est.prompt_tokens == sum(tokens) and est.calls == 3 and not est.unpriced
    price = sum(sum(litellm.cost_per_token(model=PRICED, prompt_tokens=t, completion_tokens=50)) for t in tokens)
    assert est.cost_usd == pytest.approx(price)


def test_a_batch_past_the_token_budget_sends_nothing_and_says_the_estimate(store, server):
    reqs = _requests(_role(server), 4)
    need = estimate(reqs).prompt_tokens
    gw = Gateway(store, stage="audit", progress=False, budget=SpendBudget(prompt_tokens=need - 1))
    before = server.stats()["requests"]
    with pytest.raises(BudgetExceededError) as err:
        gw.run(reqs, desc="verdicts")
    assert server.stats()["requests"] == before  # refused before sending
    msg = str(err.value)
    assert f"~{need:,} prompt tokens" in msg and f"llm.budget.prompt_tokens={need - 1:,}" in msg
    assert "stage audit" in msg and "'verdicts'" in msg and PRICED in msg and "\n" not in msg
    # within the budget the same batch runs, and what it spent is what the provider reported
    ok = Gateway(store, stage="audit", progress=False, budget=SpendBudget(prompt_tokens=need))
    res = ok.run(reqs, desc="verdicts")
    assert all(r.ok for r in res) and server.stats()["requests"] == before + 4
    assert ok.spend.prompt_tokens == sum(r.prompt_tokens for r in res) > 0


def test_calls_the_store_holds_cost_nothing_and_spend_adds_up_across_batches(store, server):
    role = _role(server)
    first, second = _requests(role, 3), _requests(role, 6)[3:]
    one = estimate(first).prompt_tokens
    Gateway(store, stage="s", progress=False).run(first)  # now cached
    gw = Gateway(store, stage="s", progress=False, budget=SpendBudget(prompt_tokens=1))
    assert all(r.cached for r in gw.run(first))  # a cached batch passes a budget it could not afford
    assert gw.spend.prompt_tokens == 0
    budget = SpendBudget(prompt_tokens=one + estimate(second).prompt_tokens // 2)
    gw = Gateway(store, stage="s", progress=False, budget=budget)
    fresh = _requests(role, 9)[6:]
    gw.run(fresh)  # spends about one batch
    spent = gw.spend.prompt_tokens
    assert spent > 0
    with pytest.raises(BudgetExceededError, match=rf"spent {spent:,}"):
        gw.run(second)


def test_a_cost_budget_is_checked_in_dollars_and_refuses_a_model_without_a_price(store, server):
    reqs = _requests(_role(server), 2)
    cost = estimate(reqs).cost_usd
    with pytest.raises(BudgetExceededError, match=r"llm\.budget\.cost_usd"):
        Gateway(store, stage="s", progress=False, budget=SpendBudget(cost_usd=cost / 2)).run(reqs)
    unpriced = _requests(RoleSpec(name="judge", model="openai/no-such-priced-model", api_base=server.url), 1)
    with pytest.raises(BudgetExceededError, match="no price in litellm's cost map for openai/no-such-priced-model"):
        Gateway(store, stage="s", progress=False, budget=SpendBudget(cost_usd=100.0)).run(unpriced)


def test_in_process_models_are_free_and_no_budget_means_no_check(store):
    model = scripted_model("budget-free", lambda messages, params: "[[A]]")
    reqs = _requests(RoleSpec(name="judge", model=model), 3)
    assert estimate(reqs).cost_usd == 0.0 and not estimate(reqs).unpriced
    res = Gateway(store, stage="s", progress=False, budget=SpendBudget(cost_usd=0.0)).run(reqs)
    assert all(r.ok for r in res)
    assert all(r.ok for r in Gateway(store, stage="s2", progress=False).run(_requests(RoleSpec(
        name="judge", model=model), 5, size=5000)))


def test_budget_keys_are_checked():
    with pytest.raises(Exception, match="unknown key.*tokens.*expected prompt_tokens, cost_usd"):
        SpendBudget.of({"tokens": 5})
    assert SpendBudget.of({"prompt_tokens": 10}) == SpendBudget(prompt_tokens=10)


def test_params_llm_budget_reaches_the_stage_gateway_and_bad_values_are_refused(tmp_path):
    from rubriclab.config import load_params
    from rubriclab.errors import ConfigError
    from rubriclab.llm import gateway_from_params

    (tmp_path / "params.yaml").write_text("llm:\n  budget: {prompt_tokens: 1000, cost_usd: 0.5}\n")
    params = load_params(tmp_path / "params.yaml")
    gw = gateway_from_params(params, "audit", tmp_path, progress=False)
    assert gw.spend.budget == SpendBudget(prompt_tokens=1000, cost_usd=0.5) and gw.spend.stage == "audit"
    with pytest.raises(ConfigError, match=r"llm\.budget\.prompt_tokens: got -5"):
        load_params(tmp_path / "params.yaml", ["llm.budget.prompt_tokens=-5"])
