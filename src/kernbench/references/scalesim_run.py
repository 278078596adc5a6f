"""Run GEMMs on SCALE-Sim v3 (runs under ``.venv-refs``, not KernBench).

Reads one JSON request on stdin and prints one JSON answer as the last line of
stdout (``references/gemm_reference.py`` builds the request and reads the answer):

* request: ``{"arrays": [{"rows": R, "cols": C, "shapes": [{"name", "m", "k", "n"}]}]}``;
* answer: ``{"version": str, "cycles": {name: int}, "stalls": {name: int}}`` where
  ``cycles`` is the "Total Cycles" column of SCALE-Sim's COMPUTE_REPORT.csv.

Every array runs as one SCALE-Sim topology (one layer per shape) in a
weight-stationary configuration whose SRAMs and bandwidths are large enough
that nothing stalls: the reported cycles are then the array's compute cycles.
A SCALE-Sim GEMM layer ``M, N, K`` multiplies an M x K input by a K x N filter,
so a shape (m, k, n) is written as ``m, n, k``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

AMPLE_KIB = 65536  # per SRAM: every operand of every shape fits, so no refill stalls
AMPLE_BW = 10000  # words per cycle from backing memory and per SRAM bank
RUN_NAME = "kb"

CONFIG = """[general]
run_name = {run}

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: {kib}
FilterSramSzkB: {kib}
OfmapSramSzkB: {kib}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: {bw}
Dataflow: ws
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bw}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bw}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""
# SCALE-Sim reads a layout file even when no custom layout is used; one default row per layer
LAYOUT_ROW = "1,1,1,1,1,1,0,1,2,0,1,2,0,0,1,2,0,1,2,3,"


def _write_inputs(folder: Path, rows: int, cols: int, shapes: list[dict]) -> None:
    (folder / "scale.cfg").write_text(CONFIG.format(run=RUN_NAME, rows=rows, cols=cols,
                                                    kib=AMPLE_KIB, bw=AMPLE_BW))
    topo = ["Layer, M, N, K,"] + [f"{s['name']}, {s['m']}, {s['n']}, {s['k']}," for s in shapes]
    (folder / "topo.csv").write_text("\n".join(topo) + "\n")
    layout = ["Layer name, a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,"]
    layout += [f"{s['name']}, {LAYOUT_ROW}" for s in shapes]
    (folder / "layout.csv").write_text("\n".join(layout) + "\n")


def run_array(rows: int, cols: int, shapes: list[dict]) -> tuple[dict, dict]:
    """Every shape on one rows x cols array: (cycles by name, stall cycles by name)."""
    from scalesim.scale_sim import scalesim

    with tempfile.TemporaryDirectory(prefix="kb-scalesim-") as tmp:
        folder = Path(tmp)
        _write_inputs(folder, rows, cols, shapes)
        sim = scalesim(save_disk_space=True, verbose=False, config=str(folder / "scale.cfg"),
                       topology=str(folder / "topo.csv"), layout=str(folder / "layout.csv"),
                       input_type_gemm=True)
        with contextlib.redirect_stdout(io.StringIO()):
            sim.run_scale(top_path=str(folder / "out"))
        with open(folder / "out" / RUN_NAME / "COMPUTE_REPORT.csv", newline="") as fh:
            report = [{k.strip(): v.strip() for k, v in row.items() if k}
                      for row in csv.DictReader(fh)]
    if len(report) != len(shapes):
        raise RuntimeError(f"SCALE-Sim reported {len(report)} layers for {len(shapes)} shapes")
    cycles = {s["name"]: int(r["Total Cycles"]) for s, r in zip(shapes, report, strict=True)}
    stalls = {s["name"]: int(r["Stall Cycles"]) for s, r in zip(shapes, report, strict=True)}
    return cycles, stalls


def main() -> None:
    request = json.load(sys.stdin)
    os.environ.setdefault("TQDM_DISABLE", "1")
    cycles: dict[str, int] = {}
    stalls: dict[str, int] = {}
    for array in request["arrays"]:
        c, s = run_array(int(array["rows"]), int(array["cols"]), array["shapes"])
        cycles.update(c)
        stalls.update(s)
    print(json.dumps({"version": version("scalesim"), "cycles": cycles, "stalls": stalls}))


if __name__ == "__main__":
    main()
