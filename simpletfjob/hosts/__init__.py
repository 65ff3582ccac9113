"""Hosts: the nodes a run may use, what their pods already take, and which of them a role may have.

nodes.py      the `Node` value; nodes read from a host list or a saved NodeList
cluster.py    nodes and their pods read from a live cluster (through kube/)
pages.py      a list page of them read for only the fields read, with msgspec
requested.py  what a pod spec asks of its node: each resource's request, its host ports
usage.py      what a node's pods request and which host ports they hold
fit.py        what a task asks against what a node has free; the room left as tasks are seated
packing.py    a seating searched for where the walk finds none: a heuristic, then search.py,
              and why a run has none (a multiset of roles per node, in numbers)
search.py     the search over seatings, node by node, within a bound of steps
selection.py  the rules a node must pass for a role, a verdict per node, and -N
"""
