"""Runs on the cluster: what a run is there, its state, and the operations on it.

objects.py       a run's objects: its Jobs and Services found by their labels; the plan's shape; the manifests apply sends
taskstate.py     one task's state, from its Job and pods as plain dicts; an elastic run's lost tasks (no cluster)
state.py         a run's state, from its tasks and its success policy (no cluster)
annotations.py   what a run's Jobs carry: what apply adds for the cluster to carry out, what status and wait read back
classify.py      why a run failed as a value (a Cause and its class), run's restart decision, a failed task's error in its log (pure)
failure.py       why a run failed, said where the user looks (log lines, events); the refusals and lost nodes run restarts on
watch.py         reading a run, following it through watches (the Follower: wait's verdict, folded from the events), cleaning it up
ending.py        the one follower of a run's end (wait, run, status -w, logs -f): an Ending, and its lines; `status RUN` and `status -w`
wait.py          waiting for a run: followed to its end, its failure said, then cleaned up; what run and wait need, asked first
progresslog.py   progress read from a task's log as it arrives: JSON lines, tqdm, Keras, a pattern (pure)
progress.py      a run's progress kept from its reporting task's reports, shown, and what it decides: a stall, the restart budget (pure)
reporting.py     the reporting task's log followed by run, wait and status: progress shown, a stall judged, noted
apply.py         applying a run: connect, plan, server-side apply once the server has judged every object; `--dry-run=client`
judge.py         the server's dry runs (of each object, or of one of each shape), how each differs, and the writes' order
delete.py        deleting a run, and waiting until its Jobs are gone; what `apply --replace` checks first
run.py           `run`: from a template to a finished run, through failures and restarts
interventions.py what run does to a run it follows: a task restarted alone, a worker let go, an interrupt's end
logsources.py    which containers a run's logs come from; what to read of each, each stream read in a thread
logs.py          a run's logs, every task's at once, merged line by line
diagnose.py      `diagnose RUN`: the run read once, its bundle written atomically
bundle.py        the bundle's files, redacted and bounded (pure)
queue.py         `--queue`: a run's entry, its wait and its admission at the head; `queue NAME`; its Leases as data
"""
