"""CLI inputs that blocked, leaked or worked before refusing (issue 31, item 7).

A named pipe given as a file (`validate --cases`, `--model`, `--strategy`) is refused before it is
opened for a blocking read; `lesson --json` without a lesson prints strict JSON; a 100,000-character
`--model` is one line naming the problem and no path of the install; `--max-memory-gib inf`, nan,
negative or zero is refused before the search starts.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.cli.main import main
from explorer.errors import ExplorerError
from explorer.io.safe_load import read_capped

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--model", "tiny-gpt", "--cluster", "classroom"]


def run_main(argv, capsys) -> tuple:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.fixture
def fifo(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("argv", [
    ["validate", "--cases", "{fifo}"],
    ["evaluate", "--model", "{fifo}", "--cluster", "classroom", "--gpus", "1"],
    ["evaluate", *TINY, "--strategy", "{fifo}"],
    ["search", "--model", "tiny-gpt", "--cluster", "{fifo}", "--gpus", "1", "--global-batch", "1"],
])
def test_a_named_pipe_is_refused_without_waiting_for_a_writer(fifo, argv):
    args = [a.replace("{fifo}", str(fifo)) for a in argv]
    done = subprocess.run([sys.executable, "-m", "explorer", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)          # before the fix: blocked forever on open()
    assert done.returncode == 2
    assert "not a regular file" in one_error_line(done.stderr)


def test_read_capped_refuses_a_pipe_a_directory_and_a_nul_without_blocking(fifo, tmp_path):
    for path, named in ((fifo, "not a regular file"), (tmp_path, "not a regular file"),
                        ("a\0b.json", "cannot be read"), ("/" + "x" * 5000, "cannot be read")):
        with pytest.raises(ExplorerError, match=named) as refused:
            read_capped(path)
        assert len(str(refused.value)) < 300


def test_lesson_json_without_a_lesson_lists_the_lessons_as_json(capsys):
    code, out, err = run_main(["lesson", "--json"], capsys)
    assert code == 0 and err == ""
    lessons = json.loads(out)["lessons"]
    assert [lesson["number"] for lesson in lessons] == list(range(1, 9))
    assert all(lesson["slug"] and lesson["controls"] for lesson in lessons)
    for control in lessons[3]["controls"]:
        assert control["default"] in control["options"]


def test_lesson_set_without_a_lesson_is_refused(capsys):
    code, out, err = run_main(["lesson", "--set", "pp=4", "--json"], capsys)
    assert code == 2 and out == "" and "needs a lesson" in one_error_line(err)


@pytest.mark.parametrize("flag", ["--model", "--cluster"])
def test_a_100000_character_name_is_one_line_without_the_install_path(capsys, flag):
    argv = ["evaluate", *TINY, "--gpus", "1"]
    argv[argv.index(flag) + 1] = "a" * 100_000
    code, _, err = run_main(argv, capsys)
    line = one_error_line(err)
    assert code == 2 and "100,000 characters" in line and len(line) < 300
    assert str(ROOT) not in line and "OSError" not in line and "Errno" not in line


@pytest.mark.parametrize("argv", [["evaluate", *TINY, "--gpus", "1", "--strategy", "/tmp/" + "s" * 100_000],
                                  ["validate", "--cases", "/tmp/" + "c" * 100_000],
                                  ["evaluate", "--model", "m" * 1000 + ".json", "--cluster", "classroom"]])
def test_a_long_file_path_is_one_short_line(capsys, argv):
    code, _, err = run_main(argv, capsys)
    line = one_error_line(err)
    assert code == 2 and len(line) < 400 and "OSError" not in line and str(ROOT) not in line


@pytest.mark.parametrize("cap", ["inf", "nan", "-1", "0", "-inf", "1e300"])
def test_a_memory_cap_that_is_not_a_positive_finite_size_is_refused_before_the_search(capsys, monkeypatch, cap):
    import explorer.search

    def no_search(*args, **kwargs):
        raise AssertionError("the search ran")
    monkeypatch.setattr(explorer.search, "search", no_search)
    code, out, err = run_main(["search", *TINY, "--gpus", "8", "--global-batch", "8", f"--max-memory-gib={cap}"],
                              capsys)
    assert code == 2 and out == ""
    assert "--max-memory-gib" in one_error_line(err)


def test_the_library_search_refuses_a_cap_that_is_not_finite():
    from explorer.io.clusters import load_cluster
    from explorer.io.models import load_model
    from explorer.search import search
    for cap in (float("inf"), float("nan"), 10 ** 400):
        with pytest.raises(ExplorerError, match="memory cap"):
            search(load_model("tiny-gpt"), load_cluster("classroom"), 8, 8, cap)
