"""Runs on the cluster: what a run is there, its state, and the operations on it.

objects.py  a run's Jobs and Services, found by its labels
state.py    a run's state, from its Jobs and pods as plain dicts (no cluster)
watch.py    reading a run, following it through watches, cleaning it up
apply.py    applying a run: server-side apply after a dry run of every object
delete.py   deleting a run, and waiting until its Jobs are gone
"""
