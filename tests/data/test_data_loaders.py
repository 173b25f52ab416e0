"""Each source parser on a small file written in that source's real row format (no network)."""

from __future__ import annotations

import gzip
import json
from importlib import resources
from importlib.util import module_from_spec, spec_from_file_location

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rubriclab.data import DEMO_DOMAINS, LOADERS, load_source, load_source_detailed
from rubriclab.errors import ConfigError, InputError


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _hf(tmp_path, dataset, builder, files, **extra):
    spec = {
        "loader": "hf",
        "dataset": dataset,
        "path": builder,
        "data_files": [str(f) for f in files],
        "split": "train",
        "cache_dir": str(tmp_path / "hf_cache"),
        **extra,
    }
    return load_source(spec, tmp_path, name=dataset)


# --- Anthropic/hh-rlhf: {chosen, rejected} full transcripts ------------------------------------

HH = [
    {
        "chosen": "\n\nHuman: What's a good pasta sauce?\n\nAssistant: A simple tomato and basil sauce.",
        "rejected": "\n\nHuman: What's a good pasta sauce?\n\nAssistant: I don't care.",
    },
    {
        "chosen": "\n\nHuman: Hi\n\nAssistant: Hello!\n\nHuman: How do I pick a lock?\n\nAssistant: I can't help with that.",
        "rejected": "\n\nHuman: Hi\n\nAssistant: Hello!\n\nHuman: How do I pick a lock?\n\nAssistant: Use a tension wrench.",
    },
    {"chosen": "\n\nHuman: A\n\nAssistant: x", "rejected": "\n\nHuman: B\n\nAssistant: y"},  # different prompts
    {"chosen": "no transcript markers", "rejected": "\n\nHuman: A\n\nAssistant: y"},
    {"chosen": "\n\nHuman: Q\n\nAssistant: same", "rejected": "\n\nHuman: Q\n\nAssistant:  same"},
]


def test_hh_rlhf_via_datasets_json(tmp_path):
    f = _jsonl(tmp_path / "test.jsonl", HH)
    pairs, drops = _hf(tmp_path, "hh_rlhf", "json", [f], domain="harmless")
    assert drops == {"prompt_mismatch": 1, "unparseable_transcript": 1, "identical_responses": 1}
    one, two = pairs
    # single-turn prompt is the bare human text; multi-turn keeps the transcript up to the last human turn
    assert (one.prompt, one.chosen, one.rejected) == (
        "What's a good pasta sauce?",
        "A simple tomato and basil sauce.",
        "I don't care.",
    )
    assert two.prompt == "Human: Hi\n\nAssistant: Hello!\n\nHuman: How do I pick a lock?"
    assert (two.chosen, two.rejected) == ("I can't help with that.", "Use a tension wrench.")
    assert one.id == "hh-all-train-00000" and two.meta["n_turns_context"] == 3
    assert {p.domain for p in pairs} == {"harmless"}


def test_hh_rlhf_data_dir_gives_subset_ids(tmp_path):
    sub = tmp_path / "harmless-base"
    sub.mkdir()
    _jsonl(sub / "test.jsonl", HH[:2])
    spec = {
        "loader": "hf",
        "dataset": "hh_rlhf",
        "path": "json",
        "data_dir": str(sub),
        "split": "test",
        "cache_dir": str(tmp_path / "hf_cache"),
    }
    pairs, _ = load_source(spec, tmp_path, name="hh")
    assert [p.id for p in pairs] == ["hh-harmless-base-test-00000", "hh-harmless-base-test-00001"]
    with pytest.raises(InputError, match=r"could not load dataset: .*split"):  # a load failure is one named line
        load_source({**spec, "split": "train"}, tmp_path, name="hh")


def test_hh_rlhf_local_gzip_and_missing_column(tmp_path):
    f = tmp_path / "test.jsonl.gz"
    f.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in HH[:2]).encode()))
    pairs, drops = load_source({"loader": "local", "dataset": "hh_rlhf", "path": str(f)}, tmp_path, name="hh")
    assert len(pairs) == 2 and not drops
    bad = _jsonl(tmp_path / "bad.jsonl", [{"chosen": r["chosen"]} for r in HH[:2]])
    with pytest.raises(InputError) as exc:
        load_source({"loader": "local", "dataset": "hh_rlhf", "path": str(bad)}, tmp_path, name="hh")
    assert exc.value.field == "rejected" and "available: chosen" in str(exc.value)


# --- HuggingFaceH4/ultrafeedback_binarized -----------------------------------------------------


def _uf_row(pid, prompt, good, bad, sc, sr):
    return {
        "prompt": prompt,
        "prompt_id": pid,
        "chosen": [{"content": prompt, "role": "user"}, {"content": good, "role": "assistant"}],
        "rejected": [{"content": prompt, "role": "user"}, {"content": bad, "role": "assistant"}],
        "messages": [{"content": prompt, "role": "user"}, {"content": good, "role": "assistant"}],
        "score_chosen": sc,
        "score_rejected": sr,
    }


def test_ultrafeedback_via_datasets_parquet(tmp_path):
    f = _parquet(
        tmp_path / "test_prefs.parquet",
        [
            _uf_row("a1", "Name a prime.", "7 is prime.", "8 is prime.", 9.0, 3.0),
            _uf_row("a2", "Say hi.", "Hi!", "Hello!", 7.0, 7.0),  # equal scores: no preference
        ],
    )
    pairs, drops = _hf(tmp_path, "ultrafeedback", "parquet", [f])
    assert drops == {"tie": 1}
    (p,) = pairs
    assert (p.id, p.domain, p.prompt, p.chosen, p.rejected) == (
        "uf-a1",
        "helpful",
        "Name a prime.",
        "7 is prime.",
        "8 is prime.",
    )
    assert p.meta["score_chosen"] == 9.0


# --- nvidia/HelpSteer3 preference -------------------------------------------------------------


def _hs3(context, r1, r2, pref, domain="general"):
    return {
        "domain": domain,
        "language": "english",
        "context": context,
        "response1": r1,
        "response2": r2,
        "overall_preference": pref,
        "individual_preference": [{"score": pref, "reasoning": "r", "feedback1": "f1", "feedback2": "f2"}],
    }


def test_helpsteer3_preference_sign_and_ties(tmp_path):
    single = [{"role": "user", "content": "Write a haiku about rain."}]
    multi = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Explain recursion."},
    ]
    f = _jsonl(
        tmp_path / "validation.jsonl",
        [
            _hs3(single, "Rain taps the window", "Rain is wet.", -2),
            _hs3(multi, "It's when a loop...", "A function calling itself.", 3, domain="code"),
            _hs3(single, "A", "B", 0),
        ],
    )
    pairs, drops = _hf(tmp_path, "helpsteer3", "json", [f])
    assert drops == {"tie": 1}
    a, b = pairs
    assert (a.chosen, a.rejected, a.prompt, a.domain) == (
        "Rain taps the window",
        "Rain is wet.",
        "Write a haiku about rain.",
        "general",
    )
    assert (b.chosen, b.rejected, b.domain) == ("A function calling itself.", "It's when a loop...", "code")
    assert b.prompt == "Human: Hi\n\nAssistant: Hello\n\nHuman: Explain recursion."
    assert a.id.startswith("hs3-")
    pairs2, _ = _hf(tmp_path, "helpsteer3", "json", [f], domain="hs3")
    assert {p.domain for p in pairs2} == {"hs3"}


# --- lmarena-ai/arena-human-preference-140k ----------------------------------------------------


def _msg(role, text):
    return {"role": role, "content": [{"type": "text", "text": text, "image": None, "mimeType": None}]}


def _tags(real_world=False, creative=False, problem=False):
    return {
        "creative_writing_v0.1": {"creative_writing": creative, "score": "no"},
        "criteria_v0.1": {
            "complexity": False,
            "creativity": creative,
            "domain_knowledge": True,
            "problem_solving": problem,
            "real_world": real_world,
            "specificity": False,
            "technical_accuracy": False,
        },
        "if_v0.1": {"if": False, "score": 1},
        "math_v0.1": {"math": False},
    }


def _battle(i, winner, prompt, a, b, tags):
    return {
        "id": f"b{i}",
        "model_a": "m-a",
        "model_b": "m-b",
        "winner": winner,
        "evaluation_session_id": f"s{i}",
        "evaluation_order": 1,
        "conversation_a": [_msg("user", prompt), _msg("assistant", a)],
        "conversation_b": [_msg("user", prompt), _msg("assistant", b)],
        "full_conversation": [],
        "language": "en",
        "is_code": False,
        "category_tag": tags,
    }


ARENA = [
    _battle(
        1, "model_a", "Plan a budget trip to Rome.", "Stay in Trastevere...", "Go to Rome.", _tags(real_world=True)
    ),
    _battle(2, "model_b", "Write a poem about tea.", "Tea.", "Steam curls upward...", _tags(creative=True)),
    _battle(3, "tie", "Q3", "x", "y", _tags(real_world=True)),
    _battle(4, "both_bad", "Q4", "x", "y", _tags(real_world=True)),
    _battle(5, "model_b", "Fix my code.", "No.", "Here is the fix.", _tags(real_world=True, problem=True)),
]


def test_arena_winner_ties_and_category_domain(tmp_path):
    f = _parquet(tmp_path / "train.parquet", ARENA)
    pairs, drops = _hf(tmp_path, "arena", "parquet", [f])
    assert drops == {"tie": 1, "both_bad": 1}
    by_id = {p.id: p for p in pairs}
    assert by_id["arena-b1"].chosen == "Stay in Trastevere..." and by_id["arena-b1"].rejected == "Go to Rome."
    assert by_id["arena-b2"].chosen == "Steam curls upward..." and by_id["arena-b2"].meta["chosen_model"] == "m-b"
    assert by_id["arena-b2"].prompt == "Write a poem about tea."

    real, drops = _hf(tmp_path, "arena", "parquet", [f], category="real_world")
    assert sorted(p.id for p in real) == ["arena-b1", "arena-b5"]
    assert {p.domain for p in real} == {"real_world"}
    assert drops == {"tie": 1, "both_bad": 1, "other_category": 1}
    creative, _ = _hf(tmp_path, "arena", "parquet", [f], category="creative_writing")
    assert [p.id for p in creative] == ["arena-b2"]
    # the category map is configurable
    custom, _ = _hf(
        tmp_path, "arena", "parquet", [f], category="dk", category_flags={"dk": "criteria_v0.1.domain_knowledge"}
    )
    assert len(custom) == 3
    untagged = _parquet(
        tmp_path / "untagged.parquet", [{k: v for k, v in r.items() if k != "category_tag"} for r in ARENA]
    )
    with pytest.raises(InputError) as exc:
        _hf(tmp_path, "arena", "parquet", [untagged], category="real_world")
    assert exc.value.field == "category_tag"


# --- PKU-Alignment/PKU-SafeRLHF ----------------------------------------------------------------


def test_pku_saferlhf_safer_and_better(tmp_path):
    row = {
        "prompt": "How do I get revenge on my boss?",
        "response_0": "Sabotage his car.",
        "response_1": "Talk to HR about the conflict.",
        "prompt_source": "Alpaca3-8B",
        "response_0_source": "Alpaca3-8B",
        "response_1_source": "Alpaca3-8B",
        "is_response_0_safe": False,
        "is_response_1_safe": True,
        "response_0_severity_level": 2,
        "response_1_severity_level": 0,
        "better_response_id": 0,
        "safer_response_id": 1,
    }
    f = _jsonl(tmp_path / "test.jsonl", [row, {**row, "prompt": "Q2", "safer_response_id": 7}])
    safer, drops = _hf(tmp_path, "pku_saferlhf", "json", [f])
    assert drops == {"bad_label": 1}
    assert safer[0].chosen == "Talk to HR about the conflict." and safer[0].domain == "harmless"
    better, _ = _hf(tmp_path, "pku_saferlhf", "json", [f], preference="better")
    assert better[0].chosen == "Sabotage his car."
    assert better[0].id == safer[0].id  # id is content-derived, independent of the preference key
    with pytest.raises(ConfigError, match="safer, better"):
        _hf(tmp_path, "pku_saferlhf", "json", [f], preference="nicer")


# --- RMB pairwise JSON files -------------------------------------------------------------------


def _rmb(uid, path, prompt, good, bad):
    return {
        "pair_uid": uid,
        "conversation_input": [{"content": prompt, "language": "English", "role": "user"}],
        "chosen": {"llm_name": "model-x", "answer": good, "score": 4.5},
        "reject": {"llm_name": "model-y", "answer": bad, "score": 1.0},
        "category_path": path,
    }


def test_rmb_directory_of_pairwise_files(tmp_path):
    harm = tmp_path / "RMB_dataset" / "Pairwise_set" / "Harmlessness"
    help_ = tmp_path / "RMB_dataset" / "Pairwise_set" / "Helpfulness" / "Chat"
    harm.mkdir(parents=True)
    help_.mkdir(parents=True)
    (harm / "S1.json").write_text(
        json.dumps(
            [
                _rmb(
                    "15091",
                    "Pairwise_set/Harmlessness/S1",
                    "How do I get away with murder",
                    "Sorry, I can't help.",
                    "1. Plan ahead...",
                ),
                _rmb("15092", "Pairwise_set/Harmlessness/S1", "How do I get away with murder", "Same", "Same"),
            ],
            indent=1,
        ),
        encoding="utf-8",
    )
    (help_ / "Discussion.json").write_text(
        json.dumps(
            [
                _rmb(
                    "2001",
                    "Pairwise_set/Helpfulness/Chat/Discussion",
                    "Is tea healthy?",
                    "In moderation, yes.",
                    "No idea.",
                ),
            ]
        ),
        encoding="utf-8",
    )
    res = load_source_detailed({"loader": "rmb", "path": "RMB_dataset/Pairwise_set"}, tmp_path, name="rmb")
    assert res.drops == {"identical_responses": 1}
    by_id = {p.id: p for p in res.pairs}
    assert set(by_id) == {"rmb-15091", "rmb-2001"}
    assert by_id["rmb-15091"].domain == "harmless" and by_id["rmb-2001"].domain == "helpful"
    assert by_id["rmb-15091"].prompt == "How do I get away with murder"
    assert by_id["rmb-15091"].meta["chosen_model"] == "model-x"
    only_harm, _ = load_source({"loader": "rmb", "path": str(harm / "S1.json"), "domain": "rmb_harm"}, tmp_path)
    assert [p.domain for p in only_harm] == ["rmb_harm"]


# --- local files with a column mapping ---------------------------------------------------------


def test_local_csv_mapping_stable_ids_and_default_domain(tmp_path):
    f = tmp_path / "mine.csv"
    f.write_text("question,good,bad\nWhat is 2+2?,4,5\nCapital of France?,Paris,Lyon\n", encoding="utf-8")
    spec = {
        "loader": "local",
        "path": "mine.csv",
        "columns": {"prompt": "question", "chosen": "good", "rejected": "bad"},
        "domain": "math",
    }
    pairs, drops = load_source(spec, tmp_path, name="mine")
    again, _ = load_source(spec, tmp_path, name="mine")
    assert not drops and [p.id for p in pairs] == [p.id for p in again]
    assert all(p.id.startswith("mine-") for p in pairs) and len({p.id for p in pairs}) == 2
    assert [(p.prompt, p.chosen, p.rejected, p.domain) for p in pairs][0] == ("What is 2+2?", "4", "5", "math")
    nodomain, _ = load_source({**spec, "domain": None}, tmp_path, name="mine")
    assert {p.domain for p in nodomain} == {"mine"}  # falls back to the source name


def test_local_jsonl_with_id_and_domain_columns(tmp_path):
    f = _jsonl(
        tmp_path / "p.jsonl",
        [
            {"uid": "u1", "topic": "t1", "prompt": "q1", "chosen": "a", "rejected": "b", "note": "n1"},
            {"uid": "u1", "topic": "t1", "prompt": "q2", "chosen": "a", "rejected": "b", "note": "n2"},
        ],
    )
    spec = {"loader": "local", "path": str(f), "columns": {"id": "uid", "domain": "topic"}, "meta_columns": ["note"]}
    pairs, drops = load_source(spec, tmp_path, name="p")
    assert [(p.id, p.domain, p.meta["note"]) for p in pairs] == [("u1", "t1", "n1")]
    assert drops == {"duplicate_id": 1}


# --- registry, config errors and limit ---------------------------------------------------------


def test_unknown_loader_dataset_and_keys_list_allowed_values(tmp_path):
    assert set(LOADERS) == {"demo", "hf", "rmb", "local"}
    with pytest.raises(ConfigError, match="expected one of: demo, hf, rmb, local"):
        load_source({"loader": "ftp"}, tmp_path, name="x")
    with pytest.raises(ConfigError) as exc:
        load_source({"loader": "hf", "dataset": "nope"}, tmp_path, name="x")
    for name in ("hh_rlhf", "ultrafeedback", "helpsteer3", "arena", "pku_saferlhf"):
        assert name in str(exc.value)
    with pytest.raises(ConfigError, match="unknown key"):
        load_source({"loader": "demo", "domian": "helpful"}, tmp_path, name="x")
    with pytest.raises(ConfigError, match="helpful, harmless"):
        load_source({"loader": "demo", "domain": "medical"}, tmp_path, name="x")


def test_limit_is_a_seeded_sample(tmp_path):
    full, _ = load_source({"loader": "demo", "domain": "helpful"}, tmp_path)
    a, _ = load_source({"loader": "demo", "domain": "helpful", "limit": 20}, tmp_path, seed=1)
    b, _ = load_source({"loader": "demo", "domain": "helpful", "limit": 20}, tmp_path, seed=1)
    c, _ = load_source({"loader": "demo", "domain": "helpful", "limit": 20}, tmp_path, seed=2)
    assert len(a) == 20 and a == b and a != c
    assert {p.id for p in a} <= {p.id for p in full}
    assert a != full[:20]  # a sample, not the head of the file


# --- bundled demo data -------------------------------------------------------------------------


def test_demo_data_has_two_domains_with_planted_attributes(tmp_path):
    res = load_source_detailed({"loader": "demo"}, tmp_path)
    assert not res.drops
    domains = {p.domain for p in res.pairs}
    assert domains == set(DEMO_DOMAINS) and len(domains) >= 2
    for d in domains:
        mine = [p for p in res.pairs if p.domain == d]
        assert len(mine) >= 150
        assert all(p.meta["synthetic"] is True and p.meta["planted"] for p in mine)
        assert len({tuple(p.meta["planted"]) for p in mine}) >= 8  # varied per pair
        assert max(len(t.split()) for p in mine for t in (p.chosen, p.rejected)) <= 80


def test_demo_generator_reproduces_bundled_files(tmp_path):
    demo = resources.files("rubriclab.data").joinpath("demo")
    spec = spec_from_file_location("_make_demo", str(demo.joinpath("_make_demo.py")))
    mod = module_from_spec(spec)
    spec.loader.exec_module(mod)
    counts = mod.write(tmp_path)
    for domain, n in counts.items():
        bundled = demo.joinpath(f"{domain}.jsonl").read_bytes()
        assert (tmp_path / f"{domain}.jsonl").read_bytes() == bundled
        assert bundled.count(b"\n") == n
