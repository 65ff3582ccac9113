"""Manifests: the rendered documents of a run, checked and completed before anything is written.

render.py     each task's text rendered, checked and labelled
skeleton.py   a role of many tasks rendered once, each task's values written in
documents.py  the checks every document passes (YAML, kind, names, keys)
textedit.py   entries added to the rendered text beside the template's own
labels.py     the run's labels, annotations and namespaces, added as text
network.py    pod networking: a headless Service per task
podspec.py    what the pods ask of a node: tolerations, host ports, node names
validate.py   --validate: the documents against the Kubernetes OpenAPI schema
"""
