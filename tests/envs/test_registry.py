"""The environment registry."""

from __future__ import annotations

import pytest

import hsa.envs
from hsa.envs import env_names, get_env
from hsa.envs.livestream import LivestreamEnvironment
from hsa.envs.registry import from_config
from hsa.errors import EnvError


def test_names_and_get():
    assert {"livestream", "bfcl", "tau2", "recorded"} <= set(env_names())
    env = get_env("livestream", seed=2, n_tasks=10)
    assert isinstance(env, LivestreamEnvironment) and env.seed == 2 and len(env.tasks()) == 10


def test_bad_requests_are_one_clear_error(tmp_path):
    with pytest.raises(EnvError, match="unknown environment 'nope'; registered: bfcl"):
        get_env("nope")
    with pytest.raises(EnvError, match=r"takes no option\(s\) 'colour'; it accepts: seed, n_tasks"):
        get_env("livestream", colour="red")
    with pytest.raises(EnvError, match=r"needs option\(s\) path \(--env-path on the command"):
        get_env("bfcl")
    with pytest.raises(EnvError, match="n_tasks must be a positive integer"):
        get_env("livestream", n_tasks=0)


@pytest.mark.parametrize("env", ["bfcl", "tau2", "recorded"])
@pytest.mark.parametrize("path", [5, ["a"], None, "", " "])
def test_a_corpus_path_that_is_not_a_path_is_named(env: str, path) -> None:
    # a number or a list failed deep in the import with a TypeError's traceback
    with pytest.raises(EnvError, match="path must name a corpus file or folder") as err:
        from_config(env, {"path": path}, file="build.yaml", at="$.source")
    assert (err.value.file, err.value.where) == ("build.yaml", "$.source.env_options.path")


def test_a_plugin_environment_takes_a_path_of_its_own_kind(monkeypatch):
    # only hsa's corpus environments need one file or folder: a plugin's may take a list
    monkeypatch.setattr(hsa.envs.registry, "_FACTORIES", dict(hsa.envs.registry._FACTORIES))
    hsa.envs.register_env("multi", "tests.envs.test_registry:_multi")
    assert get_env("multi", path=["a.jsonl", "b.jsonl"]).n_tasks == 2
    assert from_config("multi", {"path": None}, file="build.yaml").n_tasks == 1


def _multi(path=None):
    return LivestreamEnvironment(n_tasks=len(path) if path else 1)


def test_register(monkeypatch):
    monkeypatch.setattr(hsa.envs.registry, "_FACTORIES", dict(hsa.envs.registry._FACTORIES))
    hsa.envs.register_env("mini", "hsa.envs.livestream.env:LivestreamEnvironment")
    assert "mini" in env_names()
    assert isinstance(get_env("mini", n_tasks=3), LivestreamEnvironment)


def test_score_version_is_read_without_building_the_environment(monkeypatch):
    from hsa.envs import registry
    from hsa.envs.tau2 import Tau2Environment

    assert registry.score_version("tau2") == Tau2Environment.score_version == 2
    assert registry.score_version("bfcl") == 3
    assert registry.score_version("livestream") == 1
    assert registry.score_version("no-such-env") == 1
    monkeypatch.setitem(registry._FACTORIES, "broken", "no_such_module_hsa:Env")
    assert registry.score_version("broken") == 1  # (building it says what is wrong)


def test_score_version_of_a_plugin_that_fails_to_import_is_1(monkeypatch, tmp_path):
    # a module that raises as it imports: the hash of a job is made, building the
    # environment says what is wrong
    from hsa.envs import registry

    (tmp_path / "hsa_broken_plugin_env.py").write_text("raise RuntimeError('no')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._FACTORIES, "broken", "hsa_broken_plugin_env:Env")
    assert registry.score_version("broken") == 1


def test_a_corpus_is_hashed_by_the_files_its_environment_reads_without_building_it(
    monkeypatch, tmp_path
):
    from hsa.config import content_hash
    from hsa.envs import registry

    for name in ("airline", "copy"):  # one domain's files under two folder names
        (tmp_path / "tau2" / name).mkdir(parents=True)
        for file in ("tools.json", "tasks.json"):
            (tmp_path / "tau2" / name / file).write_text("[]")
    (tmp_path / "tau2" / "airline" / "notes.txt").write_text("not read")
    airline = registry.corpus_hash("tau2", tmp_path / "tau2" / "airline")
    (tmp_path / "tau2" / "airline" / "notes.txt").write_text("still not read")
    assert registry.corpus_hash("tau2", tmp_path / "tau2" / "airline") == airline
    # the folder's name is the domain's, which names its harness and tasks
    assert registry.corpus_hash("tau2", tmp_path / "tau2" / "copy") != airline
    monkeypatch.chdir(tmp_path / "tau2" / "airline")
    assert registry.corpus_hash("tau2", tmp_path / "tau2" / "airline" / ".") == airline
    # a plugin's (or a name not registered, or one that does not import): the file by its
    # content, the folder's files
    monkeypatch.setitem(registry._FACTORIES, "broken", "no_such_module_hsa:Env")
    for name in ("broken", "no-such-env", "recorded"):
        for path in (tmp_path / "tau2" / "copy", tmp_path / "tau2" / "copy" / "tools.json"):
            assert registry.corpus_hash(name, path) == content_hash(path)
    with pytest.raises(FileNotFoundError):
        registry.corpus_hash("bfcl", tmp_path / "missing")


def test_task_version_is_read_as_score_version_is(monkeypatch):
    from hsa.envs import registry

    assert registry.task_version("livestream") == LivestreamEnvironment.task_version == 2
    assert registry.task_version("tau2") == 1
    assert registry.task_version("no-such-env") == 1
    monkeypatch.setitem(registry._FACTORIES, "broken", "no_such_module_hsa:Env")
    assert registry.task_version("broken") == 1
