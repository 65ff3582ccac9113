"""The benchmarks, each a ratio measured side by side in one run.

    python -m bench.run            # all sections
    python -m bench.run render     # one section

These are not tests: machines are noisy, so nothing here asserts a speed.
"""

from __future__ import annotations

import importlib
import platform
import sys

SECTIONS = ("render", "nodelist", "cluster", "usage", "runs", "scale")


def main(argv: list[str]) -> None:
    chosen = argv or list(SECTIONS)
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.system()}")
    for name in chosen:
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError:
            print(f"[{name}] not available")
            continue
        print(f"[{name}]")
        module.run()


if __name__ == "__main__":
    main(sys.argv[1:])
