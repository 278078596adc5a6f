"""Data-movement flows as sequences of legs over routes.

A flow is what one initiator asks of the fabric: a host write, a host read, a
PE DMA, an M_CPU DMA. Each flow is a list of legs run back to back; a leg with
``nbytes == 0`` is a command (head only, no occupancy). Flows only name nodes
and routes: timing is the fabric's job, SimPy bookkeeping the engine's.
"""

from __future__ import annotations

from typing import NamedTuple

from kernbench.policy.address.phys_addr import PhysAddr
from kernbench.policy.routing import AddressResolver, PathRouter
from kernbench.policy.routing.router import command_policy, scope_policy
from kernbench.topology import naming as nm


class LegSpec(NamedTuple):
    """One leg of a flow (immutable; a named tuple because flows are built per transfer)."""

    label: str  # "data", "command"
    nodes: tuple[str, ...]
    nbytes: int
    hbm_node: str | None = None  # HBM slice touched by this leg
    hbm_offset: int = 0
    hbm_at_start: bool = False
    continues: bool = False  # starts where the previous leg ended: its first node is already paid


class FlowSpec(NamedTuple):
    """What one initiator asks of the fabric (immutable)."""

    kind: str  # h2d_write | d2h_read | pe_dma_write | pe_dma_read | mcpu_dma_write | ...
    initiator: str  # node id that owns the op in the op log
    nbytes: int
    legs: tuple[LegSpec, ...]
    src: str | PhysAddr = ""  # source / destination: a node id or a physical address
    dst: str | PhysAddr = ""  # (formatted only when the op log is read)


def _leg(label: str, nodes: tuple[str, ...], nbytes: int, hbm_node: str | None = None,
         hbm_offset: int = 0, hbm_at_start: bool = False, continues: bool = False) -> LegSpec:
    """``LegSpec(...)`` without the named tuple's constructor, an interpreted function
    (legs are made per transfer; callgrind: ~2 k instructions each, most of it that)."""
    return tuple.__new__(LegSpec, (label, nodes, nbytes, hbm_node, hbm_offset, hbm_at_start,
                                   continues))


def _flow(kind: str, initiator: str, nbytes: int, legs: tuple[LegSpec, ...],
          src: str | PhysAddr, dst: str | PhysAddr) -> FlowSpec:
    """``FlowSpec(...)``, made the same way as :func:`_leg`."""
    return tuple.__new__(FlowSpec, (kind, initiator, nbytes, legs, src, dst))


def _join(*paths) -> tuple[str, ...]:
    """Concatenate routes that share their junction node."""
    out: list[str] = []
    for p in paths:
        if out and p and out[-1] == p[0]:
            out.extend(p[1:])
        else:
            out.extend(p)
    return tuple(out)


class FlowBuilder:
    """Turns (initiator, address, size) requests into FlowSpecs."""

    def __init__(self, resolver: AddressResolver, router: PathRouter, hbm_slice_bytes: int) -> None:
        self.resolver = resolver
        self.router = router
        self.slice_bytes = hbm_slice_bytes
        self._routes: dict[tuple, tuple] = {}
        self._commands: dict[tuple[str, ...], LegSpec] = {}

    def _cached(self, key: tuple, build) -> tuple[tuple[str, ...], ...]:
        """Node sequences of a flow's legs, computed once per (kind, ends)."""
        hit = self._routes.get(key)
        if hit is None:
            hit = self._routes[key] = build()
        return hit

    def _hbm_target(self, pa: PhysAddr) -> tuple[str, int]:
        return self.resolver.resolve(pa), pa.hbm_offset % self.slice_bytes

    def _end(self, pa: PhysAddr, node: str) -> tuple[str | None, int]:
        """(HBM node, offset in its slice) of a DMA end point, or (None, 0) off HBM."""
        return (node, pa.hbm_offset % self.slice_bytes) if pa.kind == "hbm" else (None, 0)

    def _host_prefix(self, sip: int) -> tuple[str, ...]:
        pcie = self.resolver.find_pcie_ep(sip)
        return self.router.route("all", nm.HOST, pcie)[0]

    def host_to_hbm_path(self, sip: int, cube: int, hbm_node: str) -> tuple[str, ...]:
        """pcie_ep -> io_cpu -> m_cpu -> HBM: the IO CPU hands the write to the cube's M_CPU."""
        pcie = self.resolver.find_pcie_ep(sip)
        io_cpu = self.resolver.find_io_cpu(sip)
        m_cpu = self.resolver.find_m_cpu(sip, cube)
        return _join(self.router.find_memory_path(pcie, io_cpu),
                     self.router.find_memory_path(io_cpu, m_cpu),
                     self.router.find_mcpu_dma_path(m_cpu, hbm_node))

    def h2d_write(self, pa: PhysAddr, nbytes: int, *, from_host: bool = False) -> FlowSpec:
        """Host -> device memory (an HBM slice, a CUBE's SRAM or a PE's TCM) through the
        IO CPU and the CUBE's M_CPU."""
        node = self.resolver.resolve(pa)
        hbm_node, off = self._end(pa, node)

        def build():
            path = self.host_to_hbm_path(pa.sip, pa.cube, node)
            return (_join(self._host_prefix(pa.sip), path) if from_host else path,)

        (path,) = self._cached(("h2d_write", pa.sip, pa.cube, node, from_host), build)
        leg = LegSpec("data", path, nbytes, hbm_node, off, hbm_at_start=False)
        return FlowSpec("h2d_write", path[0], nbytes, (leg,), path[0], pa)

    def d2h_read(self, pa: PhysAddr, nbytes: int, *, to_host: bool = False) -> FlowSpec:
        """Command out along the write path, data back along the memory path."""
        node = self.resolver.resolve(pa)
        hbm_node, off = self._end(pa, node)

        def build():
            cmd = self.host_to_hbm_path(pa.sip, pa.cube, node)
            m_cpu = self.resolver.find_m_cpu(pa.sip, pa.cube)
            pcie = self.resolver.find_pcie_ep(pa.sip)
            back = (self.router.find_memory_path(node, pcie) if hbm_node else _join(
                self.router.route(scope_policy(node, m_cpu, "memory"), node, m_cpu)[0],
                self.router.route_to("memory", m_cpu, pcie)[0]))
            data = back
            if to_host:
                prefix = self._host_prefix(pa.sip)
                cmd = _join(prefix, cmd)
                data = _join(data, tuple(reversed(prefix)))
            return cmd, tuple(data)

        cmd, data = self._cached(("d2h_read", pa.sip, pa.cube, node, to_host), build)
        legs = (self._command_leg(cmd),
                LegSpec("data", data, nbytes, hbm_node, off, hbm_at_start=hbm_node is not None,
                        continues=True))
        return FlowSpec("d2h_read", cmd[0], nbytes, legs, pa, cmd[0])

    def pe_dma_write(self, sip: int, cube: int, pe: int, dst: PhysAddr, nbytes: int) -> FlowSpec:
        """TCM -> PE_DMA -> fabric -> destination (HBM slice, SRAM or another TCM)."""
        dst_node = self.resolver.resolve(dst)
        key = ("pe_dma_write", sip, cube, pe, dst_node)
        hit = self._routes.get(key)
        if hit is None:
            src_pe = self.resolver.find_pe(sip, cube, pe)
            tcm = nm.pe_unit(sip, cube, pe, "pe_tcm")
            hit = self._routes[key] = (_join((tcm,), self.router.find_path(src_pe, dst_node)),)
        path = hit[0]
        if dst.kind == "hbm":
            leg = _leg("data", path, nbytes, dst_node, dst.hbm_offset % self.slice_bytes)
        else:
            leg = _leg("data", path, nbytes)
        return _flow("pe_dma_write", path[1], nbytes, (leg,), path[0], dst)

    def pe_dma_read(self, sip: int, cube: int, pe: int, src: PhysAddr, nbytes: int) -> FlowSpec:
        """Request to the source, then data back into this PE's TCM."""
        src_node = self.resolver.resolve(src)
        key = ("pe_dma_read", sip, cube, pe, src_node)
        hit = self._routes.get(key)
        if hit is None:
            src_pe = self.resolver.find_pe(sip, cube, pe)
            dma = nm.pe_unit(sip, cube, pe, "pe_dma")
            tcm = nm.pe_unit(sip, cube, pe, "pe_tcm")
            back = self.router.find_path_to_pe(src_node, src_pe)
            cmd = tuple(self.router.find_path(src_pe, src_node))
            hit = self._routes[key] = (self._command_leg(cmd), _join(back, (dma, tcm)))
        cmd_leg, data = hit
        if src.kind == "hbm":
            leg = _leg("data", data, nbytes, src_node, src.hbm_offset % self.slice_bytes,
                       True, True)
        else:
            leg = _leg("data", data, nbytes, None, 0, True, True)
        return _flow("pe_dma_read", cmd_leg.nodes[0], nbytes, (cmd_leg, leg), src, data[-1])

    def pe_message(self, src: tuple[int, int, int], dst: tuple[int, int, int],
                   nbytes: int) -> FlowSpec:
        """PE-to-PE message: source TCM -> PE_IPCQ -> fabric -> PE_IPCQ -> destination TCM."""

        def build():
            a = nm.pe_unit(*src, "pe_ipcq")
            b = nm.pe_unit(*dst, "pe_ipcq")
            for pe in (src, dst):
                self.resolver.find_pe(*pe)  # RoutingError names a PE that does not exist
            route = self.router.route(scope_policy(a, b, "data"), a, b)[0]
            return (_join((nm.pe_unit(*src, "pe_tcm"),), route, (nm.pe_unit(*dst, "pe_tcm"),)),)

        (path,) = self._cached(("pe_message", src, dst), build)
        leg = _leg("data", path, nbytes)
        return _flow("pe_message", path[1], nbytes, (leg,), path[0], path[-1])

    def ipcq_message(self, src: tuple[int, int, int], dst: tuple[int, int, int],
                     tier: str) -> tuple[str, ...]:
        """Route of an IPCQ message: sender TCM -> sender PE_IPCQ -> fabric -> receiver
        PE_IPCQ -> the receive slot (receiver TCM, or its CUBE's SRAM)."""

        def build():
            a = nm.pe_unit(*src, "pe_ipcq")
            b = nm.pe_unit(*dst, "pe_ipcq")
            for pe in (src, dst):
                self.resolver.find_pe(*pe)
            route = self._pe_to_pe(a, b)
            if tier == "tcm":
                tail = (b, nm.pe_unit(*dst, "pe_tcm"))
            else:
                sram = nm.sram(dst[0], dst[1])
                tail = self.router.route(scope_policy(b, sram, "data"), b, sram)[0]
            return (_join((nm.pe_unit(*src, "pe_tcm"),), route, tail),)

        return self._cached(("ipcq_message", src, dst, tier), build)[0]

    def ipcq_credit(self, src: tuple[int, int, int], dst: tuple[int, int, int]) -> tuple[str, ...]:
        """Route of a credit (a zero-byte message) from receiver ``src`` back to sender ``dst``."""

        def build():
            return (self._pe_to_pe(nm.pe_unit(*src, "pe_ipcq"), nm.pe_unit(*dst, "pe_ipcq")),)

        return self._cached(("ipcq_credit", src, dst), build)[0]

    def _pe_to_pe(self, a: str, b: str) -> tuple[str, ...]:
        """Data route between two PE units. Across SIPs it is composed at the IO NoCs,
        which every inter-SIP path crosses: source to its IO NoC (one backward search
        per SIP), IO NoC to IO NoC, IO NoC to destination (one search per SIP), so
        a hundred PEs talking across six SIPs cost a dozen searches, not a hundred."""
        sa, sb = nm.sip_of(a), nm.sip_of(b)
        if sa == sb:
            return self.router.route(scope_policy(a, b, "data"), a, b)[0]
        assert sa is not None and sb is not None  # different SIPs: both are in one
        ha, hb = nm.io_node(sa, "io_noc"), nm.io_node(sb, "io_noc")
        return _join(self.router.route_to("sip_data", a, ha)[0],
                     self.router.route("data", ha, hb)[0],
                     self.router.route("sip_data", hb, b)[0])

    def ipcq_copy(self, pe: tuple[int, int, int], tier: str, slot: PhysAddr,
                  dst: PhysAddr | None, nbytes: int) -> FlowSpec:
        """A receive's slot read: slot (TCM or SRAM) -> PE_IPCQ -> the destination, this
        PE's TCM (``dst`` None) or a memory address (HBM, SRAM, TCM)."""
        dst_node = None if dst is None else self.resolver.resolve(dst)

        def build():
            ipcq = nm.pe_unit(*pe, "pe_ipcq")
            tcm = nm.pe_unit(*pe, "pe_tcm")
            if tier == "tcm":
                head = (tcm, ipcq)
            else:
                sram = nm.sram(pe[0], pe[1])
                head = self.router.route(scope_policy(sram, ipcq, "data"), sram, ipcq)[0]
            if dst_node is None:
                tail = (ipcq, tcm)
            else:
                tail = _join((ipcq,), self.router.find_path(self.resolver.find_pe(*pe), dst_node))
            return (_join(head, tail),)

        (path,) = self._cached(("ipcq_copy", pe, tier, dst_node), build)
        if dst is not None and dst.kind == "hbm":
            leg = _leg("data", path, nbytes, dst_node, dst.hbm_offset % self.slice_bytes)
        else:
            leg = _leg("data", path, nbytes)
        return _flow("ipcq_copy", path[1], nbytes, (leg,), slot, dst or path[-1])

    def _command_leg(self, path: tuple[str, ...]) -> LegSpec:
        """The (cached) zero-byte leg over ``path``: commands are all alike."""
        leg = self._commands.get(path)
        if leg is None:
            leg = self._commands[path] = LegSpec("command", path, 0)
        return leg

    def command(self, *stops: str) -> FlowSpec:
        """A zero-byte control message through ``stops`` (command links allowed)."""
        (path,) = self._cached(("command", stops), lambda: (_join(*(
            self._command_route(a, b) for a, b in zip(stops, stops[1:], strict=False))),))
        return _flow("command", path[0], 0, (self._command_leg(path),), path[0], path[-1])

    def _command_route(self, a: str, b: str) -> tuple[str, ...]:
        # toward a hub (the host, an IO CPU) many sources share one backward search
        hub = b == nm.HOST or b.endswith(".io_cpu")
        find = self.router.route_to if hub else self.router.route
        return find(command_policy(a, b), a, b)[0]

    def mcpu_dma_write(self, sip: int, cube: int, dst: PhysAddr, nbytes: int) -> FlowSpec:
        """M_CPU pushes ``nbytes`` from its local memory to ``dst``."""
        m_cpu = self.resolver.find_m_cpu(sip, cube)
        dst_node = self.resolver.resolve(dst)
        (path,) = self._cached(("mcpu_dma_write", sip, cube, dst_node),
                               lambda: (tuple(self.router.find_mcpu_dma_path(m_cpu, dst_node)),))
        hbm_node, off = self._end(dst, dst_node)
        leg = LegSpec("data", path, nbytes, hbm_node, off, hbm_at_start=False)
        return FlowSpec("mcpu_dma_write", m_cpu, nbytes, (leg,), m_cpu, dst)

