"""Test infrastructure: a loopback Kubernetes API server and a real control plane for tests."""
