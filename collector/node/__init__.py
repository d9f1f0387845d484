"""The simulated NonStop node (numpy, virtual clock): topology, workloads, engine, hooks.

The engine (collector.node.engine.Node, compiled with numba) is imported from its module, not
from here: the package itself stays light for what only reads node and workload files."""

from collector.node.clock import RealtimeClock, SimulatedClock
from collector.node.hooks import EntityTable, NodeHooks, NullHooks
from collector.node.topology import NodeFileError, Topology, load_node, node_names
from collector.node.workload import WorkloadSpec, load_workload, workload_names

__all__ = [
    "EntityTable",
    "NodeFileError",
    "NodeHooks",
    "NullHooks",
    "RealtimeClock",
    "SimulatedClock",
    "Topology",
    "WorkloadSpec",
    "load_node",
    "load_workload",
    "node_names",
    "workload_names",
]
