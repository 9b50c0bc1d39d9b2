"""`fairlane.tam`: the catalog reproduces Table 2 of the TAM paper; diagrams are SVG."""

import dataclasses

import pytest

import fairlane
from fairlane import tam

TABLE2 = {
    "hbase": "N U C B O",
    "mongodb": ". U C B .",
    "cassandra": ". U C B .",
    "riak": "N U C . .",
    "tamed-hbase": ". . C . .",
    "muzzled-hbase": ". U C B O",
}


def test_catalog_names_in_table2_order():
    assert tam.catalog() == list(TABLE2)


@pytest.mark.parametrize("name,row", TABLE2.items())
def test_table2_rows_from_model_files(root, name, row):
    r = tam.check(root / "models" / f"{name}.toml")
    assert r.table2_row == row
    # The row is the set of kinds of the findings, which are dataclasses.
    letters = {p.letter for p in r.problems}
    assert " ".join(c if c in letters else "." for c in "NUCBO") == row
    assert all(dataclasses.is_dataclass(p) for p in r.problems)
    assert tam.check(name) == r  # by catalog name too


def test_hbase_findings_name_the_stages():
    r = tam.check("hbase")
    u = [p for p in r.problems if p.kind == "unknown_resource_usage"]
    assert [p.stages for p in u] == [["RPC Handle"]]
    assert u[0].resources == ["io", "network"]
    blocked = {p.stages[0] for p in r.problems if p.kind == "blocking"}
    assert blocked == {"RPC Handle", "Mem Flush", "LOG Sync"}
    assert all(p.explanation and p.remedy for p in r.problems)


def test_draw_is_svg():
    svg = tam.draw("riak")
    assert "<svg" in svg and svg.rstrip().endswith("</svg>")
    assert svg._repr_svg_() == str(svg)
    assert tam.draw("riak", highlight=False) != svg


def test_invalid_model_names_file_and_field(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('[model]\nname = "x"\n[[stage]]\nname = "A"\nscheduling = "sometimes"\n')
    with pytest.raises(fairlane.SpecError) as e:
        tam.check(p)
    assert str(p) in str(e.value) and "scheduling" in e.value.field
    with pytest.raises(fairlane.SpecError):
        tam.check(tmp_path / "missing.toml")
