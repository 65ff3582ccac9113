"""simpletfjob: render one Kubernetes Job template into the Jobs of a distributed TensorFlow run."""

__version__ = "0.1.0"
