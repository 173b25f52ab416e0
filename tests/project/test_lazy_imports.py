"""What reads the call store, templates or recorded verdicts starts without litellm.

litellm and the openai SDK's types are 3-6 s of a process's start on 2 cores (`python -X importtime -c "import
litellm"`). The report and recorded-verdicts stages and `rubriclab calls` make no model call, so
`rubriclab.llm` loads its litellm-backed names (Gateway, CallRequest, embed_texts, ...) on first use.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import rubriclab.llm as llm

NO_LITELLM = """
import json, sys
import rubriclab.llm, rubriclab.stages.report, rubriclab.stages.recorded, rubriclab.report, rubriclab.recorded
from rubriclab.cli import main
from rubriclab.llm import open_store, load_prompt, parse_verdict, RoleSpec, store_location
print(json.dumps(sorted(m for m in ("litellm", "openai") if m in sys.modules)))
"""


def test_the_report_and_recorded_stages_import_without_litellm():
    out = subprocess.run([sys.executable, "-c", NO_LITELLM], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_rubriclab_calls_runs_without_litellm(tmp_path):
    code = ("import runpy, sys; sys.argv = ['rubriclab', 'calls', '--store', sys.argv[1]]\n"
            "try:\n    runpy.run_module('rubriclab.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('LITELLM' if 'litellm' in sys.modules else 'NONE')")
    store = llm.open_store(tmp_path / "calls.sqlite")
    store.close()
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "calls.sqlite")], capture_output=True,
                         text=True, cwd=tmp_path)
    assert out.stdout.strip().splitlines()[-1] == "NONE", out.stdout + out.stderr


def test_every_public_name_resolves_to_its_module_object():
    from rubriclab.llm import _budget, _failures, _gateway, _local

    for name in llm.__all__:
        assert getattr(llm, name) is not None, name
    assert llm.Gateway is _gateway.Gateway and llm.CallRequest is _gateway.CallRequest
    assert llm.TalliedGateway is _failures.TalliedGateway and llm.SpendBudget is _budget.SpendBudget
    assert llm.local_provider is _local.local_provider
    assert set(llm.__all__) <= set(dir(llm))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Gatewya'"):
        llm.Gatewya  # noqa: B018
    with pytest.raises(ImportError):
        exec("from rubriclab.llm import Gatewya", {})
