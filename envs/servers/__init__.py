"""The environments and tools served to other ecosystems.

- :mod:`envs.servers.episode`: one research episode driven by structured tool calls (the
  shape TRL ``environment_factory``, OpenEnv and verifiers speak), over ``gym.make``;
- :mod:`envs.servers.mcp_server`: ``search``, ``visit`` and ``python`` as an MCP server
  (optional extra ``mcp``);
- :mod:`envs.servers.openenv_server`: ``websailor/WikiSim-v0`` as an OpenEnv environment
  server (optional extra ``openenv``);
- :mod:`envs.servers.cli`: ``websailor serve mcp`` and ``websailor serve openenv``.

Nothing heavy is imported here.
"""
