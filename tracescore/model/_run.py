"""What an agent did in one run (one interaction's part of a trace): its tool calls, LLM calls and steps.

Extract fills it from the spans it read (`RagRecord.run`, also `Interaction.run`); the run metrics read it
without a judge call (failed tools, repeated calls, unused results, cost) or hand it to an LLM judge (tool
selection, goal completion). Bounded whatever the run: at most `MAX_RUN_TOOL_CALLS` tool calls are kept (the
first ones), each argument and result clipped to `MAX_RUN_TEXT_CHARS`; the rest are counted, never dropped
silently.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_RUN_TEXT_CHARS", "MAX_RUN_TOOL_CALLS", "Run", "RunToolCall"]

MAX_RUN_TOOL_CALLS = 64
MAX_RUN_TEXT_CHARS = 10_000


class RunToolCall(BaseModel):
    """One tool call: its name, arguments and result as recorded (text, clipped), and whether it failed."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="The tool's name as recorded (or the span's name).")
    arguments: str | None = Field(default=None, description="The call's arguments as recorded (JSON text).")
    result: str | None = Field(default=None, description="What the tool returned, as recorded; None if not.")
    ok: bool = Field(default=True, description="False when the call failed.")
    error: str | None = Field(default=None, description="Why it counts as failed (status, error, result).")
    clipped: bool = Field(default=False, description="The arguments or result were longer and are cut.")
    span_id: str | None = Field(default=None, description="The span the call was read from.")


class Run(BaseModel):
    """One agent run. `tool_calls` holds the first `MAX_RUN_TOOL_CALLS` calls in start order;
    `tool_calls_total` and `failed_tool_calls` count every call. `steps` is the number of LLM calls (one
    step of the agent loop each); tokens are summed over the LLM calls that recorded them (None: none
    did). `retrievals` counts the retriever spans whose documents the run read itself;
    `earlier_turn_documents` the documents of earlier turns' tool results its LLM calls were given."""

    model_config = ConfigDict(frozen=True)

    tool_calls: tuple[RunToolCall, ...] = ()
    tool_calls_total: int = Field(default=0, ge=0)
    failed_tool_calls: int = Field(default=0, ge=0)
    steps: int = Field(default=0, ge=0, description="LLM calls of the run.")
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    retrievals: int = Field(default=0, ge=0)
    earlier_turn_documents: int = Field(
        default=0, ge=0, description="Documents of earlier turns' tool results kept in the run's LLM input."
    )
    tools_offered: tuple[str, ...] = Field(
        default=(), description="The tools the model could call, `name: description` (from its LLM calls)."
    )

    @property
    def omitted_tool_calls(self) -> int:
        """Tool calls past the view's limit: counted, not kept."""
        return self.tool_calls_total - len(self.tool_calls)
