"""The example notebook runs end to end (Fig. 8c from a sweep on a LocalCluster)."""

import os

import nbformat
from nbclient import NotebookClient


def test_fig8_notebook_executes(root):
    path = root / "python" / "examples" / "fig8-dask-sweep.ipynb"
    nb = nbformat.read(path, as_version=4)
    os.environ["FIG8_DURATION"] = "3"
    os.environ["FAIRLANE_ROOT"] = str(root)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    # The figure was drawn.
    assert any("image/png" in o.get("data", {}) for o in outputs)
