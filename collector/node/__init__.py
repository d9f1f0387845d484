"""The simulated NonStop node (numpy, virtual clock): topology, workloads, engine, hooks."""

from collector.node.clock import RealtimeClock, SimulatedClock
from collector.node.engine import Node
from collector.node.hooks import EntityTable, NodeHooks, NullHooks
from collector.node.topology import NodeFileError, Topology, load_node, node_names
from collector.node.workload import WorkloadSpec, load_workload, workload_names

__all__ = [
    "EntityTable",
    "Node",
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
