"""Runs on the cluster: what a run is there, its state, and the operations on it.

objects.py     a run's objects: its Jobs and Services found by their labels; the plan's shape; the manifests apply sends
taskstate.py   one task's state, from its Job and pods as plain dicts (no cluster)
state.py       a run's state, from its tasks and its success policy (no cluster)
elastic.py     an elastic PyTorch run's lost workers, under --min-workers (no cluster)
classify.py    why a run failed as a value (a Cause and its class), and run's restart decision (pure)
follower.py    `wait`'s verdict, folded from the watches' events (no cluster, no clock)
watch.py       reading a run, following it through watches, cleaning it up
ending.py      the one follower of a run's end (wait, run, status -w, logs -f): an Ending, and its lines
progresslog.py progress read from a task's log as it arrives: JSON lines, tqdm, Keras, a pattern (pure)
progress.py    a run's progress kept from its reporting task's reports, and shown (pure, no clock)
budget.py      what progress decides: a stall, and a restart budget that follows progress (pure)
status.py      `status RUN` and `status -w`: one run read now, or followed until it ends
apply.py       applying a run: connect, plan, server-side apply once the server has judged every object
preview.py     `apply --dry-run=client`: the objects apply would send, and what it would do with each; none sent
judge.py       the server's dry runs (of each object, or of one of each shape), how each differs, and the writes' order
delete.py      deleting a run, and waiting until its Jobs are gone; what `apply --replace` checks first
permissions.py what `run` and `wait` will need, asked of the server before they rely on it
interrupt.py   what an interrupt leaves of a run that `run` follows, phase by phase; --on-interrupt delete
logsources.py  which containers a run's logs come from
logstreams.py  what to read of each container, each stream read in a thread, read on after a break
logs.py        a run's logs, every task's at once, merged line by line
errorlines.py  the error in a failed task's log: its last traceback (torchrun's failed child's), else what reads as one (pure)
"""
