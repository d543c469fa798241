"""BFCL's format-sensitivity system prompt, as BFCL v4 words it for each configuration.

A configuration (``ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&
style=classic``) sets five things: how calls are written, whether they go in ``<TOOLCALL>``
tags, how the functions are documented, whether the prompt is plain text or Markdown, and which
of two wordings it uses. The texts below are BFCL's (``bfcl_eval/constants/default_prompts.py``,
``formulate_system_prompt`` in ``model_handler/utils.py``), kept word for word as data, quirks
included (the plain-text template joins persona and task with no space). The functions are
hsa's documentation of the harness's tools in the configuration's doc format, and replies are read
by BFCL's decoder for the configuration's return format and tag (``hsa.eval.bfcl_decode``).
"""

from __future__ import annotations

from collections.abc import Mapping

from hsa.harness.importers.base import literal_template

OUTPUT_FORMATS = {
    "python": "[func_name1(params_name1=params_value1, params_name2=params_value2...), "
    "func_name2(params)]",
    "json": '```json\n[{"function":"func_name1","parameters":{"param1":"value1",'
    '"param2":"value2"...}},{"function":"func_name2","parameters":{"param":"value"}}]\n```',
    "verbose_xml": '<functions><function name="func_name1"><params><param name="param1" '
    'value="value1" type="type1"/><param name="param2" value="value2" type="type2"/>...'
    '</params></function><function name="func_name2"><params><param name="param3" '
    'value="value3" type="type3"/></params></function></functions>',
    "concise_xml": '<functions><function name="func_name1"><param name="param1" '
    'type="type1">value1</param><param name="param2" type="type2">value2</param>...'
    '</function><function name="func_name2"><param name="param3" type="type3">value</param>'
    "</function></functions>",
}
_XML_TYPES = (
    "The type fields of the parameters in your function calls must be one of: string, "
    "integer, float, boolean, array, dict, or tuple."
)
PARAM_TYPES = {"python": "", "json": "", "verbose_xml": _XML_TYPES, "concise_xml": _XML_TYPES}
STYLES = {
    "classic": {
        "persona": "You are an expert in composing functions.",
        "task": "You are given a question and a set of possible functions. Based on the "
        "question, you will need to make one or more function/tool calls to achieve the "
        "purpose. If none of the functions can be used, point it out. If the given question "
        "lacks the parameters required by the function, also point it out.",
        "tool_call_no_tag": "You should only return the function calls in your response.\n\n"
        "If you decide to invoke any of the function(s), you MUST put it in the format of "
        "{output_format}. {param_types} You SHOULD NOT include any other text in the response.",
        "tool_call_with_tag": "You should only return the function calls in the <TOOLCALL> "
        "section. If you decide to invoke any of the function(s), you MUST put it in the "
        "format of <TOOLCALL>{output_format}</TOOLCALL>. {param_types} You SHOULD NOT include "
        "any other text in the response.",
        "multiturn_behavior": "At each turn, you should try your best to complete the tasks "
        "requested by the user within the current turn. Continue to output functions to call "
        "until you have fulfilled the user's request to the best of your ability. Once you "
        "have no more functions to call, the system will consider the current turn complete "
        "and proceed to the next turn or task.",
        "available_tools": "Here is a list of functions in {format} format that you can "
        "invoke.\n{functions}\n",
    },
    "experimental": {
        "persona": "You are an expert in generating structured function calls.",
        "task": "You are given a user query and a set of available functions. Your task is to "
        "produce one or more function/tool calls to fulfill the user's request. If no suitable "
        "function exists, or required parameters are missing, clearly indicate this.",
        "tool_call_no_tag": "Respond with only the function calls.\n\nYou MUST format it "
        "exactly as {output_format}. {param_types} Do NOT include any other text.",
        "tool_call_with_tag": "Return only the function calls enclosed in <TOOLCALL> tags.\n\n"
        "You MUST format it exactly as <TOOLCALL>{output_format}</TOOLCALL>. {param_types} Do "
        "NOT include any other text.",
        "multiturn_behavior": "At every turn, aim to complete the user's tasks within that "
        "turn. Continue emitting function calls until the request is satisfied to the best of "
        "your ability. Once no more calls are needed, the system will proceed to the next turn.",
        "available_tools": "Below is a list of callable functions in the {format} style:\n"
        "{functions}\n",
    },
}
LAYOUTS = {
    "plaintext": "{persona}{task}\n\n{tool_call_format}\n\n{multiturn_behavior}\n\n"
    "{available_tools}",
    "markdown": "{persona}\n\n## Task\n{task}\n\n## Tool Call Format\n{tool_call_format}\n\n"
    "## Multi-turn Behavior\n{multiturn_behavior}\n\n## Available Tools\n{available_tools}",
}
#: what stands for the functions until the prompt becomes a template
_FUNCTIONS = "\0functions\0"


def config_fields(config: str) -> dict[str, str]:
    """A configuration string's fields (``ret_fmt``, ``tool_call_tag``, ``func_doc_fmt``,
    ``prompt_fmt``, ``style``)."""
    return dict(part.split("=", 1) for part in config.split("&"))


def system_template(config: str) -> str:
    """BFCL's system prompt for ``config`` as a harness prompt template: its text literal,
    the functions the harness's ``tool_docs``."""
    fields = config_fields(config)
    return _template(fields, STYLES[fields["style"]])


def _template(fields: Mapping[str, str], style: Mapping[str, str]) -> str:
    ret = fields["ret_fmt"]
    tagged = fields["tool_call_tag"] == "True"
    calls = style["tool_call_with_tag" if tagged else "tool_call_no_tag"].format(
        output_format=OUTPUT_FORMATS[ret], param_types=PARAM_TYPES[ret]
    )
    tools = style["available_tools"].format(format=fields["func_doc_fmt"], functions=_FUNCTIONS)
    text = LAYOUTS[fields["prompt_fmt"]].format(
        persona=style["persona"],
        task=style["task"],
        tool_call_format=calls,
        multiturn_behavior=style["multiturn_behavior"],
        available_tools=tools,
    )
    before, after = text.split(_FUNCTIONS)
    return literal_template(before) + "{{ tool_docs }}" + literal_template(after)
