"""Runs on the cluster: what a run is there, its state, and the operations on it.

objects.py       a run's objects: its Jobs and Services found by their labels; the plan's shape; the manifests apply sends
taskstate.py     one task's state, from its Job and pods as plain dicts; an elastic run's lost tasks (no cluster)
state.py         a run's state, from its tasks and its success policy (no cluster)
annotations.py   what status and wait read back from the annotations on a run's Jobs
classify.py      why a run failed as a value (a Cause and its class), and run's restart decision (pure)
failure.py       why a run failed, said where the user looks (log lines, events); the refusals and lost nodes run restarts on
watch.py         reading a run, following it through watches (the Follower: wait's verdict, folded from the events), cleaning it up
ending.py        the one follower of a run's end (wait, run, status -w, logs -f): an Ending, and its lines; `status RUN` and `status -w`
wait.py          waiting for a run: followed to its end, its failure said, then cleaned up
progresslog.py   progress read from a task's log as it arrives: JSON lines, tqdm, Keras, a pattern (pure)
progress.py      a run's progress kept from its reporting task's reports, and shown (pure, no clock)
budget.py        what progress decides: a stall, and a restart budget that follows progress (pure)
apply.py         applying a run: connect, plan, server-side apply once the server has judged every object
limits.py        what apply and run add to a run's manifests for the cluster to carry out with no client
preview.py       `apply --dry-run=client`: the objects apply would send, and what it would do with each; none sent
judge.py         the server's dry runs (of each object, or of one of each shape), how each differs, and the writes' order
delete.py        deleting a run, and waiting until its Jobs are gone; what `apply --replace` checks first
permissions.py   what `run` and `wait` will need, asked of the server before they rely on it
run.py           `run`: from a template to a finished run, through failures and restarts
interventions.py what run does to a run it follows: a task restarted alone, a worker let go, an interrupt's end
logsources.py    which containers a run's logs come from; what to read of each, each stream read in a thread
logs.py          a run's logs, every task's at once, merged line by line
diagnose.py      `diagnose RUN`: the run read once, its bundle written atomically
bundle.py        the bundle's files, redacted and bounded; the error in a failed task's log (pure)
queue.py         `--queue`: a run's entry, its wait and its admission at the head; `queue NAME`
entries.py       a queue's Leases as data: names, order, expiry, the waiting line (pure)
"""
