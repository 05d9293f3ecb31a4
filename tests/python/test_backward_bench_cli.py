"""bench/compare.py's command line for the backward directions (--direction, --deterministic)
and for v's head dim (--dv), its output names, grid points, FLOP counts and n/a reporting.
Parsing only: nothing runs on a device, but compare.py imports torch (with
torch.nn.attention) and triton, so without them this skips.
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
                                 ["--impls", "ours,fa3"], ["--timer", "cupti"], ["--dv", "0"],
                                 ["--dv", "x"], ["--dv"]])
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


def test_dv_default_keeps_points_and_names():
    a = compare.parse_args(["--dims", "128", "--seqlens", "2048", "--causal", "yes"])
    assert a.dv is None
    pts = compare.grid(a)
    assert all("Dv" not in p for p in pts)  # rows as before --dv existed
    assert pts[0] == {"label": "grid", "B": 8, "S": 2048, "H": 16, "D": 128, "causal": True,
                      "dtype": "bf16"}
    # --dv equal to D: the same computation, the same names
    assert compare.output_stem(compare.parse_args(["--dims", "128", "--dv", "128"])) == \
        "compare-auto"


def test_dv_points_and_names():
    a = compare.parse_args(["--dims", "192", "--dv", "128", "--timer", "graph",
                            "--seqlens", "2048,16384", "--no-seed"])
    assert a.dv == 128
    assert compare.output_stem(a) == "compare-auto-graph-d192v128"
    pts = compare.grid(a)
    assert len(pts) == 4  # 2 seqlens x both causal, no seed
    for p in pts:
        assert p["D"] == 192 and p["Dv"] == 128
        assert p["H"] == 2048 // 192  # H from q/k's head dim
        assert p["B"] == max(1, 16384 // p["S"])
    a = compare.parse_args(["--direction", "bwd", "--dims", "128,192", "--dv", "128"])
    assert compare.output_stem(a) == "compare-auto-bwd-d128-192v128"
    seed = compare.grid(compare.parse_args(["--dims", "192", "--dv", "128"]))[-1]
    assert seed["label"] == "seed" and "Dv" not in seed  # the seed shape is unchanged


def test_flops_with_dv():
    f = compare.bwd.flops
    for direction in compare.bwd.DIRECTIONS:
        for causal in (False, True):
            # Dv == D (given or not) is exactly the old count
            assert f(1, 64, 1024, 1024, 128, causal, direction, 128) == \
                f(1, 64, 1024, 1024, 128, causal, direction)
    fwd = 2 * 10 * 2048 * 2048 * (192 + 128)
    assert f(1, 10, 2048, 2048, 192, False, "fwd", 128) == fwd
    assert f(1, 10, 2048, 2048, 192, True, "fwd", 128) == fwd / 2
    assert f(1, 10, 2048, 2048, 192, True, "bwd", 128) == 2.5 * fwd / 2
    assert f(1, 10, 2048, 2048, 192, False, "fwdbwd", 128) == 3.5 * fwd
    for d in compare.bwd.DIRECTIONS:
        assert d in compare.FLOPS_DOC_DV


def test_sdpa_refusal_reasons():
    msgs = [
        "Memory efficient kernel not used because: (Triggered internally at sdp_utils.cpp:1)",
        "Memory Efficient attention has been runtime disabled. (Triggered internally at x:2)",
        "Flash attention kernel not used because: (Triggered internally at x:3)",
        "Flash attention requires q,k,v to have the same last dimension and to be less than or "
        "equal to 256. Got Query.size(-1): 192, Key.size(-1): 192, Value.size(-1): 128 instead. "
        "(Triggered internally at x:4)",
        "CuDNN attention kernel not used because: (Triggered internally at x:5)",
        "CuDNN attention has been runtime disabled. (Triggered internally at x:6)",
    ]
    assert compare.sdpa_refusal_reasons(msgs, "fa2") == [
        "Flash attention requires q,k,v to have the same last dimension and to be less than or "
        "equal to 256. Got Query.size(-1): 192, Key.size(-1): 192, Value.size(-1): 128 instead."]
    assert compare.sdpa_refusal_reasons(msgs, "cudnn") == [
        "CuDNN attention has been runtime disabled."]
    assert compare.sdpa_refusal_reasons(["something else"], "fa2") == ["something else"]
    assert compare.sdpa_refusal_reasons([], "cudnn") == []
    text = compare._error_text(RuntimeError("No available kernel. Aborting execution.\nmore"),
                               ["a", "a", "b"])
    assert text == "RuntimeError: No available kernel. Aborting execution. [a; b]"
    assert compare._error_text(ValueError("")) == "ValueError: "


def _row(D, Dv, S, causal, **kw):
    r = {"label": "grid", "dtype": "bf16", "D": D, "S": S, "B": 16384 // S, "H": 2048 // D,
         "causal": causal, "status": "ok", "resolved": "sm90", "direction": "fwd",
         "ours_tflops": 500.0, "cudnn_tflops": None, "fa2_tflops": None,
         "ours_over_cudnn": None, "ours_over_fa2": None}
    if Dv is not None:
        r["Dv"] = Dv
    r.update(kw)
    return r


def test_table_marks_refused_implementations(capsys):
    err = "RuntimeError: No available kernel. Aborting execution. [Flash attention requires ...]"
    rows = [_row(192, 128, s, c, fa2_error=err, cudnn_tflops=400.0, ours_over_cudnn=1.25)
            for s in (2048, 4096) for c in (False, True)]
    compare.print_table(rows)
    out = capsys.readouterr().out.splitlines()
    table = [line for line in out if line.startswith("grid")]
    assert len(table) == 4
    for line in table:
        cols = line.split()
        # point dtype D S B H causal backend ours cuDNN FA2 /cuDNN /FA2 status
        assert cols[2] == "192v128" and cols[5] == "10"
        assert cols[8:14] == ["500.0", "400.0", "n/a", "1.25", "-", "ok"]
    notes = [line for line in out if line.startswith("n/a")]
    assert notes == [f"n/a FA2 at 4 point(s) (192v128/2048/nc, 192v128/2048/c, 192v128/4096/nc, "
                     f"192v128/4096/c): {err}"]


def test_table_without_dv_is_unchanged(capsys):
    compare.print_table([_row(128, None, 2048, True, cudnn_tflops=400.0, fa2_tflops=300.0)])
    out = capsys.readouterr().out.splitlines()
    # The header and row exactly as before --dv (a 4-wide D column)
    assert out[0] == ("point  dtype    D      S   B   H causal backend      ours   cuDNN     FA2 "
                      " /cuDNN   /FA2  status")
    assert out[2] == ("grid   bf16   128   2048   8  16 yes    sm90        500.0   400.0   300.0 "
                      "      -      -  ok")
    assert not any(line.startswith("n/a") for line in out)
