"""Pod networking: one headless Service per task, and task addresses that are Service DNS names.

Each Service has its Job's name and selects the Job's pods by the Job controller's
`job-name` label, so it works with --no-labels too. `publishNotReadyAddresses: true`
gives a task its DNS record once its pod has an IP: TensorFlow tasks dial each other
before any of them is Ready.

Each port says `protocol: TCP`, the default: a v1.20 API server refuses a server-side
apply of a Service port without its protocol (its ports are keyed by port and protocol).
"""

from __future__ import annotations

from collections.abc import Mapping

from simpletfjob.manifest.textedit import scalar


def service_dns_name(name: str, namespace: str, cluster_domain: str | None) -> str:
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
