"""A lone PE-to-PE message's time, written out from the hardware numbers alone.

docs/latency-model.md: a transfer of ``n`` bytes over nodes ``v0..vk`` takes
``sum overhead_ns(v) + sum distance_mm x ns_per_mm(e) + n / min bw(e)``. Here every term
comes from the raw ``config/topologies/default.yaml`` (read with yaml, not through the
compiled topology, the router or the fabric) and the reference CUBE floorplan:

* a PE's message leaves its TCM through its IPCQ and DMA engine (two PE-internal links),
  crosses the PE-to-router link, and enters the other PE the same way in reverse;
* the two PEs of a corner sit ``pe_pitch_mm`` apart, each at its own router, centred
  ``PE_EDGE_MARGIN_MM`` from the CUBE's edge; the NW corner's PEs (PE 0, PE 1) share the
  top router row with the UCIe PHY c0 of the east and west sides, which sit at the
  CUBE's edge;
* between the two corners of a row, relay routers split the gap so no two router columns
  are more than ``max_spacing_mm`` apart (8 mm on the reference CUBE: two relays), so the
  top row has 6 routers (x = 1.5, 4.5, two relays, 12.5, 15.5 mm);
* a message to the CUBE east of it runs along the top row to the east edge, over one
  UCIe link (a PHY at each end) and along the neighbour's top row from its west edge.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from kernbench.topology.spec_checks import PE_EDGE_MARGIN_MM

DEFAULT_YAML = Path(__file__).resolve().parents[1] / "config" / "topologies" / "default.yaml"


def hardware() -> dict:
    return yaml.safe_load(DEFAULT_YAML.read_text())


def top_row_xs(hw: dict) -> list[float]:
    """x (mm) of the router columns of the top row, from the floorplan rules above."""
    cube = hw["cube"]
    w = cube["geometry"]["cube_mm"]["w"]
    pitch = cube["pe_layout"]["pe_pitch_mm"]
    west = [PE_EDGE_MARGIN_MM + k * pitch for k in range(cube["pe_layout"]["pe_per_corner"])]
    east = sorted(w - x for x in west)
    gap = east[0] - west[-1]
    relays = math.ceil(gap / cube["noc"]["max_spacing_mm"]) - 1
    assert relays == 2, "the reference CUBE: two relays between the corners"
    return west + [west[-1] + gap * (i + 1) / (relays + 1) for i in range(relays)] + east


def message_ns(nbytes: int, src_pe: int, dst_pe: int, *, east_cube: bool) -> float:
    """A lone message of ``nbytes`` from NW-corner PE ``src_pe`` to NW-corner PE
    ``dst_pe`` of the same CUBE (``east_cube=False``) or of the CUBE east of it."""
    hw = hardware()
    pe, cube, ucie = hw["pe"], hw["cube"], hw["sip"]["ucie"]
    ovh, noc = pe["overhead_ns"], cube["noc"]
    xs = top_row_xs(hw)
    pitch = cube["pe_layout"]["pe_pitch_mm"]
    x_src = PE_EDGE_MARGIN_MM + src_pe * pitch
    x_dst = PE_EDGE_MARGIN_MM + dst_pe * pitch
    w = cube["geometry"]["cube_mm"]["w"]
    ends = 2 * (ovh["pe_tcm"] + ovh["pe_ipcq"] + ovh["pe_dma"])  # both PEs' blocks
    end_wire = 2 * (2 * pe["internal_link"]["distance_mm"] * pe["internal_link"]["ns_per_mm"]
                    + pe["link"]["distance_mm"] * pe["link"]["ns_per_mm"])
    bws = [pe["internal_link"]["bw_gbs"], pe["link"]["bw_gbs"], noc["link_bw_gbs"]]
    if not east_cube:
        lo, hi = sorted((x_src, x_dst))
        routers = sum(lo <= x <= hi for x in xs)
        on_die_mm = hi - lo
        phys = 0.0
        link_wire = 0.0
    else:
        routers = sum(x >= x_src for x in xs) + sum(x <= x_dst for x in xs)
        on_die_mm = (w - x_src) + x_dst  # to the east edge, then in from the west edge
        phys = 2 * ucie["overhead_ns"]
        link_wire = ucie["distance_mm"] * ucie["ns_per_mm"]
        bws.append(ucie["bw_gbs"])
    overhead = ends + routers * noc["router_overhead_ns"] + phys
    wire = end_wire + on_die_mm * noc["ns_per_mm"] + link_wire
    return overhead + wire + nbytes / min(bws)
