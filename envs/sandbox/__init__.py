"""A real isolation boundary for model-written Python: bubblewrap namespaces plus rlimits.

See :mod:`envs.sandbox.bwrap` for what the code can see, :class:`SandboxConfig` for the
limits, and :class:`Sandbox` for running code. The ``python`` tool
(:class:`envs.tools.python.PythonTool`) is the environments' way in.
"""

from envs.sandbox.config import SandboxConfig, SandboxMode, SandboxUnavailableError
from envs.sandbox.result import ExecutionResult
from envs.sandbox.runner import Sandbox

__all__ = ["ExecutionResult", "Sandbox", "SandboxConfig", "SandboxMode", "SandboxUnavailableError"]
