"""Pod networking: one headless Service per task, and task addresses that are Service DNS names.

Each Service has its Job's name and selects the Job's pods by the `job-name`
label that the Job controller puts on them, so it works with --no-labels too.
`publishNotReadyAddresses: true` makes a task's DNS record appear as soon as
its pod has an IP, not when it turns Ready: TensorFlow tasks dial each other
while starting, before any of them could be called ready, and a pod that is
never Ready would otherwise never be resolvable (the TFJob operator's
issue #1458).

Each port says `protocol: TCP`, although TCP is the default: a Service's ports are a list
keyed by port and protocol, and the v1.20 API server refuses a server-side apply of a port
without its protocol (500: "associative list with keys has an element that omits key field
\"protocol\""), so `simpletfjob apply` could not send the Service as rendered.
"""

from __future__ import annotations

from collections.abc import Mapping

from simpletfjob.manifest.textedit import scalar


def dns_name(name: str, namespace: str, cluster_domain: str | None) -> str:
    suffix = f".{cluster_domain}" if cluster_domain else ""
    return f"{name}.{namespace}.svc{suffix}"


def service_document(
    name: str,
    namespace: str,
    port: int,
    port_name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> str:
    """A headless Service for one task (its Job's name, its port), as YAML text."""

    def block(key: str, entries: Mapping[str, str]) -> str:
        lines = "".join(f"    {scalar(k)}: {scalar(v)}\n" for k, v in entries.items())
        return f"  {key}:\n{lines}" if entries else ""

    return (
        "apiVersion: v1\n"
        "kind: Service\n"
        "metadata:\n"
        f"  name: {name}\n"
        f"  namespace: {scalar(namespace)}\n"
        + block("labels", labels)
        + block("annotations", annotations)
        + "spec:\n"
        "  clusterIP: None\n"
        "  publishNotReadyAddresses: true\n"
        "  selector:\n"
        f"    job-name: {name}\n"
        "  ports:\n"
        f"    - name: {port_name}\n"
        f"      port: {port}\n"
        "      protocol: TCP\n"
        f"      targetPort: {port}\n"
    )
