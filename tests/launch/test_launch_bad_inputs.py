"""Every bad input in ``bad_inputs.CASES`` exits 2 with exactly its one-line message and creates nothing."""

import pytest

from tests.launch.bad_inputs import CASES, answer, scratch_dir


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return scratch_dir(tmp_path_factory.mktemp("bad_inputs"))


@pytest.mark.parametrize("command, message", CASES, ids=[c for c, _ in CASES])
def test_bad_input_gets_one_line(root, command, message):
    before = sorted(p.name for p in root.iterdir())
    rc, out, err = answer(command, root)
    assert (rc, err) == (2, f"launch.py: {message}\n")
    assert out == ""
    after = sorted(p.name for p in root.iterdir() if not p.name.startswith("tmp"))
    assert after == [n for n in before if not n.startswith("tmp")] and not (root / "runs").exists()
