"""bench/compare.py's command line for the backward directions (--direction, --deterministic),
its output names and FLOP counts. Parsing only: nothing runs on a device, but compare.py
imports torch (with torch.nn.attention) and triton, so without them this skips.
"""
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch.nn.attention")
pytest.importorskip("triton")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import compare  # noqa: E402

FWD = 4 * 64 * 1024 * 1024 * 128  # the seed shape's forward FLOPs (B=1, H=64, S=1024, D=128)


def test_default_is_the_forward_with_its_old_names():
    a = compare.parse_args([])
    assert a.direction == "fwd" and not a.deterministic
    assert compare.output_stem(a) == "compare-auto"
    a = compare.parse_args(["--backend", "sm90", "--timer", "graph", "--quick"])
    assert compare.output_stem(a) == "compare-sm90-graph-quick"


@pytest.mark.parametrize("direction", ["bwd", "fwdbwd"])
def test_backward_directions(direction):
    a = compare.parse_args(["--direction", direction, "--timer", "graph", "--deterministic",
                            "--impls", "ours,cudnn"])
    assert a.direction == direction and a.deterministic and a.impls == ["ours", "cudnn"]
    assert compare.output_stem(a) == f"compare-auto-{direction}-graph"
    assert compare.output_stem(compare.parse_args(["--direction", direction, "--name", "x"])) == "x"


@pytest.mark.parametrize("bad", [["--direction", "backward"], ["--direction"],
                                 ["--impls", "ours,fa3"], ["--timer", "cupti"]])
def test_bad_values_exit(bad):
    with pytest.raises(SystemExit) as e:
        compare.parse_args(bad)
    assert e.value.code == 2


def test_flops_per_direction():
    f = compare.bwd.flops
    assert f(1, 64, 1024, 1024, 128, False, "fwd") == FWD
    assert f(1, 64, 1024, 1024, 128, False, "bwd") == 2.5 * FWD
    assert f(1, 64, 1024, 1024, 128, False, "fwdbwd") == 3.5 * FWD
    assert f(1, 64, 1024, 1024, 128, True, "bwd") == 1.25 * FWD  # square causal: half
    assert f(1, 64, 1024, 2048, 128, True, "bwd") == 2.5 * 2 * FWD  # Sq != Sk: not halved
    for d in compare.bwd.DIRECTIONS:
        assert d in compare.FLOPS_DOC and d in compare.DIRECTION_NAMES
