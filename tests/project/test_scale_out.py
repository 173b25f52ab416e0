"""Scale-out pieces that stand on existing engines: a self-hosted vLLM judge (`hosted_vllm/...` with `api_base`),
tested against the fake OpenAI-compatible server standing in for it."""

from __future__ import annotations

import pytest

from rubriclab.llm import CallRequest, Gateway, open_store, parse_verdict, roles_from_params
from rubriclab.testing import FakeOpenAIServer


@pytest.mark.timeout(60)
def test_a_hosted_vllm_judge_role_goes_through_the_gateway(tmp_path):
    seen = []

    def responder(body):
        seen.append(body.get("model"))
        return "Both are fine, but A is more direct. [[A]]"

    with FakeOpenAIServer(responder=responder) as server:
        params = {"llm": {"roles": {"judge": {"model": "hosted_vllm/Qwen/Qwen3-14B", "api_base": server.url,
                                              "temperature": 0.0, "max_tokens": 64}}}}
        judge = roles_from_params(params)["judge"]
        reqs = [CallRequest(role=judge, messages=[{"role": "user", "content": f"pair {i}: which is better?"}],
                            parser=parse_verdict) for i in range(3)]
        store = open_store(tmp_path / "calls.sqlite")
        results = Gateway(store, stage="vllm", progress=False).run(reqs)
        again = Gateway(store, stage="vllm", progress=False).run(reqs)
        assert server.stats()["requests"] == 3  # the re-run is served from the store
    assert [r.value for r in results] == ["A"] * 3 and all(r.cached for r in again)
    assert seen == ["Qwen/Qwen3-14B"] * 3  # litellm strips the provider prefix; the server sees its model id
    (row,) = store.ledger()
    assert row["role"] == "judge" and row["calls"] == 3


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(240)
def test_stages_log_to_an_mlflow_server_on_postgresql(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys
    import time
    import urllib.request

    from mlflow import MlflowClient

    from rubriclab.testing import find_postgres_bindir, postgres_server
    from rubriclab.tracking import stage_run

    if find_postgres_bindir() is None:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    with postgres_server() as pg_url:
        port = _free_port()
        artifacts = tmp_path / "artifacts"
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", pg_url, "--artifacts-destination",
             artifacts.as_uri(), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            # without MLflow's job runner (eight huey consumers, ~30 CPU-s on 2 cores: benchmarks/ui_startup.py), as
            # docs/several-machines.md allows: the stages log runs, they submit no server-side job
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        try:
            uri = f"http://127.0.0.1:{port}"
            deadline = time.time() + 180
            while time.time() < deadline:
                try:
                    if urllib.request.urlopen(uri + "/health", timeout=2).status == 200:
                        break
                except OSError:
                    time.sleep(0.5)
                assert server.poll() is None, server.stdout.read()[-2000:]
            monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
            (tmp_path / "note.txt").write_text("from a stage")
            with stage_run("audit", "audit@demo", {"audit": {"runs": 2}}, tmp_path, experiment="scale-out") as run:
                run.log_metrics({"alpha": 0.5})
                run.log_artifact(tmp_path / "note.txt")
                with run.trial("nested") as child:
                    child.log_metrics({"loss": 1.0}, step=1)
            client = MlflowClient(tracking_uri=uri)
            exp = client.get_experiment_by_name("scale-out")
            runs = client.search_runs([exp.experiment_id])
            by_name = {r.info.run_name: r for r in runs}
            top = by_name["audit@demo"]
            assert top.info.status == "FINISHED" and top.data.params["audit.runs"] == "2"
            assert top.data.metrics["alpha"] == 0.5 and by_name["nested"].data.tags["mlflow.parentRunId"] == top.info.run_id
            assert [f.path for f in client.list_artifacts(top.info.run_id)] == ["note.txt"]
            assert list(artifacts.rglob("note.txt"))  # stored under the server's artifact root
        finally:
            server.terminate()
            server.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_outputs_through_a_dvc_remote_and_a_shared_store_need_no_model_call(tmp_path):
    import subprocess
    import sys

    import yaml

    from rubriclab.testing import reliability_project, reliability_responder, repro, repro_env

    env = repro_env()

    def run(*argv, cwd):
        proc = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{argv}: {proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        return proc.stdout

    shared_store = tmp_path / "shared" / "calls.sqlite"  # on one machine a path; across machines postgresql://…
    with FakeOpenAIServer(responder=reliability_responder) as server:
        first = reliability_project(tmp_path / "first", server.url, drift=False, probe=False)
        params = yaml.safe_load((first / "params.yaml").read_text())
        params["llm"]["store"] = str(shared_store)
        (first / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        repro(first)
        made = server.stats()["requests"]
        assert made > 0
        dvc = [sys.executable, "-m", "dvc"]
        run(*dvc, "remote", "add", "-d", "storage", str(tmp_path / "remote"), cwd=first)
        run("git", "add", "-A", cwd=first)
        run("git", "commit", "-q", "-m", "pipeline run", cwd=first)
        run(*dvc, "push", cwd=first)

        second = tmp_path / "second"  # a fresh clone, as on another machine
        run("git", "clone", "-q", str(first), str(second), cwd=tmp_path)
        run(*dvc, "pull", cwd=second)
        status = run(*dvc, "status", cwd=second)
        assert "up to date" in status.lower(), status
        out = repro(second).stdout
        assert "up to date" in out.lower(), out
        repro(second, targets=["-f", "audit@demo_helpful"])  # re-running a stage: every call is in the shared store
        assert server.stats()["requests"] == made  # zero model calls from the clone
    from rubriclab.testing import drop_volatile, snapshot_outputs

    # the card served from the shared store is the card made by calling the model: byte for byte (it holds no
    # count of store hits, which is the store's history: the ledger says it)
    card = "outputs/audit/demo_helpful/card.json"
    assert (second / card).read_bytes() == (first / card).read_bytes()
    assert drop_volatile(snapshot_outputs(second))[card] == drop_volatile(snapshot_outputs(first))[card]
