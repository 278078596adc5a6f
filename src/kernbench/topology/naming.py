"""The single owner of node-id strings.

The builder creates nodes and the routing helpers look them up through these
functions only; no other module formats a node id. Changing the convention is
a one-file edit.
"""

from __future__ import annotations

import re

SWITCH = "fabric.switch0"
HOST = "system.host"
IO = "io0"


def sip_prefix(sip: int) -> str:
    return f"sip{sip}"


def io_node(sip: int, comp: str, io_id: str = IO) -> str:
    """IO-chiplet block: comp in pcie_ep | io_cpu | io_noc."""
    return f"sip{sip}.{io_id}.{comp}"


def io_cube_phy(sip: int, cube: int, conn: int, io_id: str = IO) -> str:
    """IO-chiplet UCIe PHY facing connection ``conn`` of ``cube``'s north side."""
    return f"sip{sip}.{io_id}.ucie.cube{cube}.c{conn}"


def sip_link_phy(sip: int, direction: str, io_id: str = IO) -> str:
    """Inter-SIP link PHY on the IO chiplet; direction in n|s|e|w."""
    return f"sip{sip}.{io_id}.sip_link.{direction}"


def cube_prefix(sip: int, cube: int) -> str:
    return f"sip{sip}.cube{cube}"


def router(sip: int, cube: int, row: int, col: int) -> str:
    return f"sip{sip}.cube{cube}.noc.r{row}c{col}"


def m_cpu(sip: int, cube: int) -> str:
    return f"sip{sip}.cube{cube}.m_cpu"


def sram(sip: int, cube: int) -> str:
    return f"sip{sip}.cube{cube}.sram"


def hbm_ctrl(sip: int, cube: int, pe: int) -> str:
    """HBM controller of PE ``pe``'s slice (n_to_one mapping)."""
    return f"sip{sip}.cube{cube}.hbm_ctrl.pe{pe}"


def cube_ucie(sip: int, cube: int, direction: str, conn: int) -> str:
    return f"sip{sip}.cube{cube}.ucie_{direction}.c{conn}"


def pe_prefix(sip: int, cube: int, pe: int) -> str:
    return f"sip{sip}.cube{cube}.pe{pe}"


def pe_unit(sip: int, cube: int, pe: int, unit: str) -> str:
    """PE sub-component, unit in kernbench.topology.spec.PE_SUBCOMPONENTS."""
    return f"sip{sip}.cube{cube}.pe{pe}.{unit}"


def unit_of(pe_prefix_id: str, unit: str) -> str:
    """The sub-component ``unit`` of the PE whose prefix is ``pe_prefix_id``."""
    return f"{pe_prefix_id}.{unit}"


def io_group(sip: int) -> str:
    """Display group of a SIP's IO-chiplet components (traces)."""
    return f"sip{sip}.io"


_CUBE_RE = re.compile(r"^sip(\d+)\.cube(\d+)\.")
_PE_RE = re.compile(r"^sip(\d+)\.cube(\d+)\.pe(\d+)(?:\.|$)")
_SIP_RE = re.compile(r"^sip(\d+)\.")


def cube_of(node_id: str) -> tuple[int, int] | None:
    """(sip, cube) a node belongs to, or None for IO/system nodes."""
    m = _CUBE_RE.match(node_id)
    return (int(m.group(1)), int(m.group(2))) if m else None


def pe_of(node_id: str) -> tuple[int, int, int] | None:
    m = _PE_RE.match(node_id)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def sip_of(node_id: str) -> int | None:
    m = _SIP_RE.match(node_id)
    return int(m.group(1)) if m else None


def same_cube(a: str, b: str) -> bool:
    ca = cube_of(a)
    return ca is not None and ca == cube_of(b)
