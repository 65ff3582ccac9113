"""simpletfjob: render one Kubernetes Job template into the Jobs of a distributed TensorFlow run.

The packages, in the order a render flows through them (each package's own docstring
lists its modules; tests/unit/test_layout.py holds which may import which):

    cli/         the commands: parse, call the layer below, print (the only users of click)
    options/     every option of every command, declared once
    plan/        `plan(options) -> Plan`: nodes judged, tasks seated, documents rendered
    hosts/       nodes, what their pods take, and which of them a role may have
    frameworks/  what a training framework adds: roles, seating, values, options
    template/    finding, reading and rendering a template's text
    manifest/    the rendered documents: checked, labelled, Services added
    runs/        a run on the cluster: found, applied, followed, deleted
    kube/        the Kubernetes API, as kubectl reaches it (the only user of kubernetes)

and, below them all, modules that import nothing heavy: errors.py, identity.py (a run's
label and annotation names), streams.py, inputs.py (reading input files), yamlload.py,
quantity.py, output.py (writing the documents) and tasks.py (a run's tasks and their seats).
"""

__version__ = "0.1.0"
