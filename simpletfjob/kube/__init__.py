"""Kubernetes access: connecting as kubectl does, one request function, and calls for any resource.

    paths.py       which kubeconfig files a run reads (no heavy imports: the output check uses it)
    kubeconfig.py  reading, checking and merging those files before the client sees them
    connection.py  `connect(Settings) -> Connection`: client, target, namespace, close()
    request.py     `request()`: retries, deadlines, TLS, and one-line errors naming verb and resource
    send.py        one try of a request, and each failure before an answer, in words
    outage.py      `riding_out()`: a command that waits keeps trying while the API server is away
    resources.py   `Resource` and the resources simpletfjob uses (nodes, pods, services, jobs, ...)
    lists.py       a paginated list: the next page fetched while this one is parsed; 410 restarts it
    objects.py     one object: get, server-side apply (created/configured/unchanged), delete
    inflight.py    a write sent from its own thread, whose answer an interrupt does not lose; reads
                   and dry runs sent a few at a time, their answers in order
    watch.py       watches, each read in a thread as its events come; resumed, re-listed on 410
    access.py      what the user may do, asked with SelfSubjectAccessReviews; who the server says it is
    podlog.py      a container's log as whole lines; followed, read on across a break

Only connection.py, send.py, watch.py and podlog.py import `kubernetes` or urllib3, inside
the functions that need them. Nothing here imports the rest of simpletfjob but the base
modules; this file imports nothing, so importing `simpletfjob.kube.paths` stays cheap.
"""
