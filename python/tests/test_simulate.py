"""`simulate` gives the numbers `fairlane simulate --json` prints, as DataFrames."""

import json
import math
import subprocess

import pandas as pd
import pytest

import fairlane

WALL = {"wall_seconds", "events_per_second"}


def cli_json(cli, path, *args):
    out = subprocess.run(
        [cli, "simulate", str(path), "--json", *args], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out)


def strip_wall(summary):
    return {
        **summary,
        "runs": [{k: v for k, v in r.items() if k not in WALL} for r in summary["runs"]],
    }


def expected_tenants(summary):
    """The per-tenant table built independently from the CLI's JSON."""
    rows = []
    for r in summary["runs"]:
        for name, t in r["tenants"].items():
            rows.append({"point": r["label"], "scheduler": r["scheduler"], "tenant": name, **t})
    return pd.DataFrame(rows)


def same_rows(df, expected):
    key = ["point", "scheduler", "tenant"]
    a = df.sort_values(key).reset_index(drop=True)
    b = expected.sort_values(key).reset_index(drop=True)[list(a.columns)]
    pd.testing.assert_frame_equal(a, b, check_exact=True, check_dtype=False)


def test_small_spec_identical_to_cli(cli, small_spec):
    want = cli_json(cli, small_spec, "--seed", "9")
    r = fairlane.simulate(small_spec, seed=9)
    assert strip_wall(r.summary) == strip_wall(want)
    # Shape: 2 sweep points × 3 schedulers × 4 tenants, tenants in spec order.
    assert len(r.tenants) == 2 * 3 * 4
    assert list(r.tenants.columns[:3]) == ["point", "scheduler", "tenant"]
    assert list(r.tenants["tenant"][:4]) == ["small-0", "small-1", "small-2", "large"]
    assert r.points == ["w4", "w8"] and r.schedulers == ["wfq", "2dfq", "drr"]
    same_rows(r.tenants, expected_tenants(want))
    assert len(r.runs) == 6
    assert list(r.runs["events"]) == [x["events"] for x in want["runs"]]
    # Series: the tracked group's first tenant's service and lag, and the Gini index, for every run.
    assert set(r.series["series"]) == {"service", "lag", "gini"}
    assert set(r.series[r.series["series"] == "lag"]["tenant"]) == {"small-0"}
    assert r.series.groupby(["point", "scheduler"]).ngroups == 6


def test_seed_changes_numbers_and_repeats(small_spec):
    a = fairlane.simulate(small_spec, seed=1).tenants
    b = fairlane.simulate(small_spec, seed=1).tenants
    c = fairlane.simulate(small_spec, seed=2).tenants
    pd.testing.assert_frame_equal(a, b)
    assert not a["work"].equals(c["work"])


@pytest.mark.parametrize(
    "spec,args",
    [
        ("experiments/2dfq-fig8.toml", ["--duration", "1"]),
        ("experiments/interposed-fig3-4.toml", ["--duration", "20"]),
        ("experiments/ldf-table1.toml", ["--duration", "20"]),
    ],
)
def test_experiment_specs_identical_to_cli(cli, root, spec, args):
    want = cli_json(cli, root / spec, *args)
    r = fairlane.simulate(root / spec, duration=float(args[1]))
    assert strip_wall(r.summary) == strip_wall(want)
    same_rows(r.tenants, expected_tenants(want))
    assert len(r.tenants) == sum(len(x["tenants"]) for x in want["runs"])


def test_text_and_dict_specs_match_the_file(small_spec):
    import tomllib

    text = small_spec.read_text()
    by_file = fairlane.simulate(small_spec).tenants
    pd.testing.assert_frame_equal(fairlane.simulate(text).tenants, by_file)
    pd.testing.assert_frame_equal(fairlane.simulate(tomllib.loads(text)).tenants, by_file)


def test_occupancy_and_plots(small_spec):
    import matplotlib

    matplotlib.use("Agg")
    r = fairlane.simulate(small_spec)
    t0, dt, cells = r.occupancy("2dfq", "w4")
    assert cells.shape[0] == 4 and dt > 0
    # Backlogged tenants keep every worker busy: no idle cell after the first column.
    assert not any(math.isnan(x) for x in cells[:, 1:].ravel())
    for ax in (r.plot(), r.plot.lag("small-0"), r.plot.latency_cdf(), r.plot.occupancy("wfq")):
        assert ax.has_data()
    with pytest.raises(ValueError):
        r.plot("nope")


def test_priority_levels_spec_runs_through_simulate(root):
    # The reproduction's spec, shortened: with levels the high level's tenant is served as if
    # alone; on one flat level it waits behind the 50 flooding tenants.
    r = fairlane.simulate(root / "experiments/priority-levels.toml", duration=40.0)
    assert r.points == ["levels", "alone", "flat"]
    api = r.tenants[r.tenants["tenant"] == "api"].set_index("point")["latency_p99"]
    assert api["levels"] <= 2 * api["alone"]
    assert api["flat"] >= 10 * api["levels"]


def test_llm_spec_runs_through_the_same_interface(cli, root):
    """A `model = "llm"` spec (VTC's overload suite) gives the CLI's numbers, tenants in
    order, and the service series."""
    spec = root / "experiments" / "vtc-overload.toml"
    over = {"duration": 60.0, "schedulers": ["vtc", "fifo"]}
    r = fairlane.simulate(spec, set=over, jobs=1)
    expected = cli_json(
        cli, spec, "--duration", "60", "--set", 'schedulers=["vtc", "fifo"]', "--jobs", "1"
    )
    assert strip_wall(r.summary) == strip_wall(expected)
    assert r.schedulers == ["vtc", "fifo"]
    assert list(r.tenants["tenant"]) == ["client0", "client1"] * 2
    vtc = r.tenants[r.tenants["scheduler"] == "vtc"]
    assert vtc["share"].sub(0.5).abs().max() < 0.05
    s = r.series[(r.series["series"] == "service") & (r.series["scheduler"] == "fifo")]
    assert set(s["tenant"]) == {"client0", "client1"}
    assert all(g["value"].is_monotonic_increasing for _, g in s.groupby("tenant"))
    assert (r.runs["max_backlogged_difference"] <= r.runs["bound"]).tolist() == [True, False]
