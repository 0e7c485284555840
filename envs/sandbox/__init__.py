"""A real isolation boundary for model-written Python: bubblewrap namespaces plus limits.

See :mod:`envs.sandbox.bwrap` and :mod:`envs.sandbox.paths` for what the code can see,
:mod:`envs.sandbox.memory` for the one memory cap of a whole execution,
:class:`SandboxConfig` for the limits, and :class:`Sandbox` for running code. The ``python`` tool
(:class:`envs.tools.python.PythonTool`) is the environments' way in.
"""

from envs.sandbox.config import SandboxConfig, SandboxMode, SandboxUnavailableError
from envs.sandbox.result import ExecutionResult
from envs.sandbox.runner import Sandbox

__all__ = ["ExecutionResult", "Sandbox", "SandboxConfig", "SandboxMode", "SandboxUnavailableError"]
