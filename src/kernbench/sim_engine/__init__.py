"""Timing engine: GraphEngine on SimPy, op log, memory store, trace export."""

from kernbench.sim_engine.engine import FlowResult, GraphEngine, space_of
from kernbench.sim_engine.memory_store import MemoryStore
from kernbench.sim_engine.op_log import OpLogger, OpRecord

__all__ = ["FlowResult", "GraphEngine", "MemoryStore", "OpLogger", "OpRecord", "space_of"]
