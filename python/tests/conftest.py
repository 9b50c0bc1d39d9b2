"""Shared fixtures: the repository root, the CLI binary, a small spec."""

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root() -> pathlib.Path:
    return ROOT


@pytest.fixture(scope="session")
def cli() -> str:
    """The `fairlane` binary: $FAIRLANE_BIN, a built one, or build it (release)."""
    env = os.environ.get("FAIRLANE_BIN")
    if env:
        return env
    for p in (ROOT / "target/release/fairlane", ROOT / "target/debug/fairlane"):
        if p.exists():
            return str(p)
    assert shutil.which("cargo"), "cargo is needed to build the fairlane CLI"
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "-p", "fairlane"], cwd=ROOT, check=True
    )
    return str(ROOT / "target/release/fairlane")


SMALL = """
name = "two tenants"
duration = 3.0
seed = 5
schedulers = ["wfq", "2dfq", "drr"]
[server]
workers = 4
rate = 1000.0
[metrics]
track = ["small"]
[[tenant]]
name = "small"
count = 3
arrival = { kind = "backlogged" }
cost = { kind = "normal", mean = 1.0, std = 0.1 }
[[tenant]]
name = "large"
weight = 2.0
arrival = { kind = "poisson", rate = 2.0 }
cost = { kind = "constant", value = 500.0 }
[[sweep]]
label = "w4"
[[sweep]]
label = "w8"
set = { "server.workers" = 8 }
"""


@pytest.fixture()
def small_spec(tmp_path) -> pathlib.Path:
    p = tmp_path / "small.toml"
    p.write_text(SMALL)
    return p
