"""The system prompt a harness shows: sections, heading styles, tool docs and skills catalogue.

Each section body is a sandboxed Jinja2 template over ``harness_id``, ``tools``, ``skills``,
``protocol``, ``tool_docs``, ``skills_catalog`` and ``call_instructions``; an empty body of kind
``tools``, ``skills`` or ``output_format`` is filled with the matching generated text, and a
section whose body renders empty is left out. A body loses the whitespace at its ends
unless the section is ``verbatim``, so that a source system message imported as a section gives
back every byte. Sections are joined by a blank line, each headed in the prompt's style:

- ``markdown``: ``## Title``, a blank line, the body;
- ``xml``: ``<id>``, the body, ``</id>`` (each on its own line);
- ``plain``: ``Title:`` and the body on the next line.

A section with an empty title has no heading in the markdown and plain styles. The two prompt
formats of the BFCL v4 format-sensitivity study map onto these: BFCL's ``plaintext`` prompt is
the ``plain`` style with untitled sections (persona, task, tool-call format, multi-turn
behaviour, available tools; BFCL glues persona and task without a blank line), and its
``markdown`` prompt is the ``markdown`` style with the
persona untitled and the other sections titled ``Task``, ``Tool Call Format``, ``Multi-turn
Behavior`` and ``Available Tools`` (BFCL puts no blank line under its headings). ``xml`` is an
extra axis. A ``prompt.template``, when set, receives the formatted ``sections`` and their
joined ``body`` and has the last word.
"""

from __future__ import annotations

from typing import Any

from hsa.errors import HarnessError, ProtocolError, refuse_kind
from hsa.harness.model import Harness, Section, Tool
from hsa.harness.protocols import CALL_FORMATS, DOC_FORMATS, CallFormat
from hsa.harness.sandbox import MAX_OUTPUT_CHARS, MAX_VALUE_SIZE, render_template


def surface_tools(harness: Harness) -> list[Tool]:
    """The tools the model can call under ``harness``, the skill tool last."""
    tools = list(harness.tools)
    if harness.skill_tool is not None:
        tools.append(harness.skill_tool)
    return tools


def tool_docs(harness: Harness) -> str:
    """Tool documentation for the system prompt (empty under the ``api`` protocol)."""
    if harness.protocol.is_api:
        return ""
    fmt = DOC_FORMATS.get(harness.protocol.doc_format)
    if fmt is None:
        raise ProtocolError(
            f"unknown tool-doc format {harness.protocol.doc_format!r}",
            where="$.protocol.doc_format",
        )
    return fmt(surface_tools(harness))


def call_instructions(harness: Harness) -> str:
    """How the model must write calls (empty under the ``api`` protocol)."""
    if harness.protocol.is_api:
        return ""
    return call_format(harness).instructions(harness.protocol.call_tag)


def call_format(harness: Harness) -> CallFormat:
    """The call format of a text-protocol harness."""
    fmt = CALL_FORMATS.get(harness.protocol.call_format)
    if fmt is None:
        raise ProtocolError(
            f"unknown call format {harness.protocol.call_format!r}", where="$.protocol.call_format"
        )
    return fmt


def skills_catalog(harness: Harness) -> str:
    """Skills listed by id and description, or in full when there is no skill tool. A
    description is one line there (a SKILL.md's may be a folded or literal YAML block)."""
    if not harness.skills:
        return ""
    if harness.skill_tool is not None:
        lines = [f"- {s.id}: {_one_line(s.description)}" for s in harness.skills]
        lines.append(f"Load a skill with the `{harness.skill_tool.name}` tool before following it.")
        return "\n".join(lines)
    return "\n\n".join(
        f"{s.id}: {_one_line(s.description)}\n\n{s.content.strip()}" for s in harness.skills
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


_AUTO_BODIES = {
    "tools": "tool_docs",
    "skills": "skills_catalog",
    "output_format": "call_instructions",
}


def _context(harness: Harness) -> dict[str, Any]:
    return {
        "harness_id": harness.id,
        "tools": [t.to_function() for t in surface_tools(harness)],
        "skills": [s.to_dict() for s in harness.skills],
        "protocol": harness.protocol.to_dict(),
        "tool_docs": tool_docs(harness),
        "skills_catalog": skills_catalog(harness),
        "call_instructions": call_instructions(harness),
    }


def format_section(section: Section, body: str, style: str) -> str:
    """One section with its heading in ``style`` (``markdown``, ``xml`` or ``plain``)."""
    if style == "xml":
        return f"<{section.id}>\n{body}\n</{section.id}>"
    if not section.title:
        return body
    if style == "plain":
        return f"{section.title}:\n{body}"
    return f"## {section.title}\n\n{body}"


#: the longest text ``{{ name }}`` prints in the sandbox, which refuses a longer one
_MAX_GENERATED = min(MAX_OUTPUT_CHARS, MAX_VALUE_SIZE)


def _generated(name: str, context: dict[str, Any], where: str) -> str:
    """The body of an empty section of an ``_AUTO_BODIES`` kind: what ``{{ name }}`` renders
    to, the generated text itself, taken without the template engine (every section of such
    a prompt would otherwise run one); a text the sandbox refuses is rendered, to raise as
    it does."""
    text = context[name]
    if type(text) is not str or len(text) > _MAX_GENERATED:
        return render_template("{{ " + name + " }}", context, where=where)
    return text


def system_prompt(harness: Harness) -> str:
    """The full system prompt text of ``harness``.

    A pure function of the harness, which is validated where it is made (loaded, imported or
    rewritten), not here. Render and parse ask for the prompt once per conversation, thousands
    of times under the same harness object, so the text is kept on the object once made.
    """
    refuse_kind(harness, Harness, "harness", "hsa.load_harness(path) reads one", HarnessError)
    return harness.derived(_system_prompt)


def _system_prompt(harness: Harness) -> str:
    context = _context(harness)
    formatted: list[str] = []
    for i, section in enumerate(harness.prompt.sections):
        where = f"$.prompt.sections[{i}].body"
        if section.body or section.kind not in _AUTO_BODIES:
            body = render_template(section.body or "", context, where=where)
        else:
            body = _generated(_AUTO_BODIES[section.kind], context, where)
        if not section.verbatim:
            body = body.strip()
        if body:
            formatted.append(format_section(section, body, harness.prompt.heading_style))
    joined = "\n\n".join(formatted)
    if harness.prompt.template is None:
        return joined
    return render_template(
        harness.prompt.template,
        {**context, "sections": formatted, "body": joined},
        where="$.prompt.template",
    )
