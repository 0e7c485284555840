"""A tool-calling chat template for SmolLM2 (and tokenizers that chat like it), for TRL's tool loop.

TRL's ``GRPOTrainer(environment_factory=...)`` (and ``tools=...``) refuses a tokenizer whose chat
template cannot render a tool-calling conversation (``trl.chat_template_utils.supports_tool_calling``:
tools, an assistant message's ``tool_calls`` and a ``tool`` message must all reach the text), and it
parses the model's tool calls with the tokenizer's ``response_template`` (``parse_response``; TRL
fills it in only for the templates it knows). SmolLM2-135M-Instruct, the model setup provides, ships
a plain ChatML template that renders only ``role`` and ``content``. :func:`tool_calling_tokenizer`
attaches :data:`SMOLLM2_TOOL_TEMPLATE` and its parser (:data:`CHATML_RESPONSE_TEMPLATE`) to such a
tokenizer at run time, so an already-converted model folder works without running setup again.

The template speaks the environment's turn protocol (``envs.prompts``): the tools as JSON schemas
inside ``<tools>...</tools>`` in the system prompt (the environment's own wording), assistant tool
calls as ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``, tool outputs as a user message
``<tool_response>\\n...\\n</tool_response>`` (consecutive ones in one message). Conversations without
tools, ``tool_calls`` or ``tool`` messages render exactly as SmolLM2's own template renders them
(default system prompt included), so the project's own rollouts and SFT see the same tokens.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

SMOLLM2_TOOL_TEMPLATE = r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system = messages[0]['content'] %}
{%- else %}
    {%- set system = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' %}
{%- endif %}
{{- '<|im_start|>system\n' + system }}
{%- if tools %}
    {{- '\n\n# Tools\n\nYou may call one of the following functions to assist with the user query.\n\n' }}
    {{- 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
    {%- for tool in tools %}
        {{- '\n' + (tool | tojson) }}
    {%- endfor %}
    {{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within '
        '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
        '<args-json-object>}\n</tool_call>' }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- for message in messages %}
    {%- if loop.first and message['role'] == 'system' %}
    {%- elif message['role'] == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}
            {{- '<|im_start|>user\n' }}
        {%- else %}
            {{- '\n' }}
        {%- endif %}
        {{- '<tool_response>\n' + message['content'] + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' and (message['tool_calls'] or message['reasoning_content']) %}
        {%- set ns = namespace(sep='') %}
        {{- '<|im_start|>assistant\n' }}
        {%- if message['reasoning_content'] %}
            {{- '<think>\n' + (message['reasoning_content'] | trim) + '\n</think>' }}
            {%- set ns.sep = '\n' %}
        {%- endif %}
        {%- if message['content'] %}
            {{- ns.sep + message['content'] }}
            {%- set ns.sep = '\n' %}
        {%- endif %}
        {%- for tool_call in message['tool_calls'] or [] %}
            {%- if tool_call['function'] is defined %}
                {%- set tool_call = tool_call['function'] %}
            {%- endif %}
            {%- if tool_call['arguments'] is string %}
                {%- set arguments = tool_call['arguments'] %}
            {%- else %}
                {%- set arguments = tool_call['arguments'] | tojson %}
            {%- endif %}
            {{- ns.sep + '<tool_call>\n{"name": ' + (tool_call['name'] | tojson) + ', "arguments": ' + arguments
                + '}\n</tool_call>' }}
            {%- set ns.sep = '\n' %}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""
"""SmolLM2-135M-Instruct's chat template plus tools, tool calls and tool responses (see the module)."""

CHATML_RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close_pattern": r"</think>\s*", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}
"""transformers' response parser for :data:`SMOLLM2_TOOL_TEMPLATE` (the one TRL uses for Qwen2.5/Qwen3,
which write tool calls the same way): ``<think>`` to ``reasoning_content``, each ``<tool_call>`` JSON
to ``tool_calls``, the rest to ``content``."""

# Plain conversations the attached template must render exactly as the tokenizer's own template does.
_PLAIN_CHATS = (
    [{"role": "user", "content": "hi"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
     {"role": "user", "content": "<tool_response>\nr\n</tool_response>"}],
)


def _renders_like(tokenizer: Any, template: str) -> bool:
    """Whether ``template`` renders every plain chat exactly as ``tokenizer``'s own template does."""
    try:
        return all(tokenizer.apply_chat_template(list(chat), tokenize=False, add_generation_prompt=gen)
                   == tokenizer.apply_chat_template(list(chat), tokenize=False, add_generation_prompt=gen,
                                                    chat_template=template)
                   for chat in _PLAIN_CHATS for gen in (False, True))
    except Exception:  # jinja raises many types on a template that cannot render these chats
        return False


def _set_response_parser(tokenizer: Any, response_template: Mapping[str, Any] | None) -> None:
    """Set the parser transformers reads: ``response_template`` (>= 5.13), else the legacy schema."""
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) >= Version("5.13.0.dev0"):
        tokenizer.response_template = dict(response_template or CHATML_RESPONSE_TEMPLATE)
        return
    if response_template is not None:
        raise ValueError(f"response_template needs transformers >= 5.13 (installed: {transformers.__version__}); "
                         "upgrade transformers or set tokenizer.response_schema yourself")
    from trl.chat_template_utils import qwen3_schema

    tokenizer.response_schema = qwen3_schema


def tool_calling_tokenizer(tokenizer: Any, *, chat_template: str | None = None,
                           response_template: Mapping[str, Any] | None = None) -> Any:
    """``tokenizer`` (a tokenizer, or a model name/folder for :func:`trainers.models.load_tokenizer`)
    ready for TRL's tool loop (``environment_factory``, ``tools``); modified in place and returned.

    - a template that already renders tool calls (Qwen2.5, Qwen3, ...) is left as it is (TRL adds
      its parser for the templates it knows);
    - a template that renders plain chats exactly as :data:`SMOLLM2_TOOL_TEMPLATE` (SmolLM2's own)
      gets that template and :data:`CHATML_RESPONSE_TEMPLATE`;
    - ``chat_template`` (Jinja text) is attached as given, with ``response_template`` (default: the
      ChatML parser) for a model that chats some other way.

    Anything else is one ``ValueError`` line saying what to pass.
    """
    from trainers.adapters.trl import _require_trl

    _require_trl()
    from trl.chat_template_utils import supports_tool_calling

    if isinstance(tokenizer, (str, os.PathLike)):
        from trainers.models import load_tokenizer

        tokenizer = load_tokenizer(tokenizer)
    name = type(tokenizer).__name__
    if chat_template is None:
        if supports_tool_calling(tokenizer):
            return tokenizer
        own = getattr(tokenizer, "chat_template", None)
        if not own or not _renders_like(tokenizer, SMOLLM2_TOOL_TEMPLATE):
            what = "has no chat template" if not own else "has a chat template that cannot render tool calls"
            raise ValueError(
                f"the tokenizer ({name}) {what}, and no tool-calling template is known for it (one ships for "
                "SmolLM2's ChatML template): pass tool_calling_tokenizer(tokenizer, chat_template=<a Jinja template "
                "that renders tools, tool_calls and tool messages>, response_template=<its transformers response "
                "parser>), or a tokenizer whose template calls tools (Qwen2.5, Qwen3)")
        chat_template = SMOLLM2_TOOL_TEMPLATE
    previous, tokenizer.chat_template = getattr(tokenizer, "chat_template", None), chat_template
    if not supports_tool_calling(tokenizer):
        tokenizer.chat_template = previous
        raise ValueError(f"the chat_template passed for the tokenizer ({name}) does not render tools, tool_calls "
                         "and tool messages (trl.chat_template_utils.supports_tool_calling): pass one that does")
    _set_response_parser(tokenizer, response_template)
    return tokenizer
