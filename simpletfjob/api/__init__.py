"""The public Python API: what `import simpletfjob` offers, over the same functions as the command line.

render.py    `render(template, ...)`: a run's documents, as `render -o -` writes them
client.py    `Client`: a cluster and namespace, found as the CLI finds them; `Run`, a run on it
results.py   the values they return: RunStatus, TaskStatus, Outcome, Cause, LogLine (plain data);
             State and CauseKind, str enums
report.py    progress lines to the `simpletfjob` logger, where the CLI writes them to stderr
calls.py     each public call's arguments checked against its annotations: a wrong type is a
             UsageError, never a TypeError

Nothing here prints, exits or installs a signal handler: it returns values, raises
`simpletfjob.Error` subclasses (the CLI's one-line messages and exit codes), and logs.
Options go by keyword, checked through the CLI's option table (options/keywords.py).
"""
