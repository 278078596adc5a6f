"""KernBench's tests.

They run against the compiled twins of the hot modules (``kernbench.native``) when the
build matches the sources, as the workflow's and users' runs do: on two cores the suite
takes about a fifth less time (docs/adr/0060). Line coverage is measured on the Python
sources, so a run that asks for it (``--cov``, on the command line or in
``PYTEST_ADDOPTS``) imports pure Python, as does ``KERNBENCH_TEST_NATIVE=0``. Both give
the same results (``test_native`` compares them in subprocesses of its own); the
summary line ``kernbench:`` says which one ran.
"""

import os
import shlex
import sys


def _coverage_asked() -> bool:
    args = sys.argv[1:] + shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    return any(a == "--cov" or a.startswith("--cov=") for a in args)


if _coverage_asked():
    os.environ["KERNBENCH_TEST_NATIVE"] = "0"  # set before pytest-xdist starts its workers
NATIVE = os.environ.get("KERNBENCH_TEST_NATIVE") != "0"
if not NATIVE:
    os.environ["KERNBENCH_PURE"] = "1"
from kernbench import native  # noqa: E402  (after the variable is set)

# the workflow and CLI runs the tests start use the twins whenever the build is fresh
os.environ.pop("KERNBENCH_PURE", None)
assert NATIVE or not native.compiled(), native.status()
