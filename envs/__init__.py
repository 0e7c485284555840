"""Gymnasium environments for web research agents.

Importing this package registers, with string entry points (nothing heavy is imported):

- ``websailor/WikiSim-v0``: the offline Wikipedia simulator (``wiki_dir=``, ``tasks=``)
- ``websailor/LiveWeb-v0``: the managed live web
"""

from gymnasium.envs.registration import register, registry

from envs.tools.base import Tool, ToolResult

__all__ = ["Tool", "ToolResult"]

if "websailor/WikiSim-v0" not in registry:
    register(id="websailor/WikiSim-v0", entry_point="envs.wikisim:make_wikisim_env")
if "websailor/LiveWeb-v0" not in registry:
    register(id="websailor/LiveWeb-v0", entry_point="envs.liveweb:make_liveweb_env")
