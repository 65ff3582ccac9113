"""TensorFlow: what a distributed TensorFlow run adds to the core of a render."""

from __future__ import annotations

from simpletfjob.optiontable import OptionGroup, at_least, option

# ---- options: TensorFlow's group of the option table (see options.py) ------------------------


class TensorFlowOptions(OptionGroup):
    """The roles a TensorFlow run has besides its workers, and what TF_CONFIG's cluster lists."""

    section = "TensorFlow options"

    psn: int = option(
        "--psn",
        default=1,
        show_default=True,
        rule=at_least(0),
        header=True,
        help="Parameter servers; 0 means none, as for all-reduce.",
    )
    psf: str | None = option(
        "--psf",
        default=None,
        metavar="FILE",
        help="Hosts that must be the parameter servers, one per line; overrides --psn.",
    )
    # Each switch has a --no- form so that the command line can turn off a template header's default.
    chief: bool = option(
        "--chief",
        default=False,
        negatable=True,
        header=True,
        help="Add one chief task (ParameterServerStrategy, Estimator).",
    )
    evaluator: bool = option(
        "--evaluator",
        default=False,
        negatable=True,
        header=True,
        help="Add one evaluator task, on the last host.",
    )
    evaluator_in_cluster: bool = option(
        "--evaluator-in-cluster",
        default=False,
        negatable=True,
        header=True,
        help="List the evaluator in TF_CONFIG's cluster too (TensorFlow leaves it out).",
    )
