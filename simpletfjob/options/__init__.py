"""Options: every option of every command, declared once.

table.py   how an option is declared, and what the declaration gives (click, header, checks)
rules.py   rules of single values: DNS names, label values, selectors, ports; durations
render.py  the render's options, by group
commands.py the options of nodes and init
limits.py  a run's limits that the cluster carries out (--deadline, --cleanup-after)
restarts.py what `run` restarts (--restart-on, --restart-exit-codes), header options too
runs.py    the options of the commands that act on a run: apply, run, status, wait, delete
keywords.py  options given as Python keyword arguments (the Python API), checked as the CLI's
"""
