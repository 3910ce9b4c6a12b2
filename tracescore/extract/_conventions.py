"""The conventions tracescore reads, in the one order that decides between them.

Readings of one interaction by two conventions (one's anchor span inside the other's, or a span both read)
are scored once, by the convention listed first:

1. tracescore's own spans: they name question, documents and answer explicitly (and carry OpenInference and
   GenAI keys too, so every later convention would read them again);
2. Langfuse: its `@observe` spans are usually the app's entry point, around other instrumentations' spans;
3. Haystack's own tracer: its pipeline span is the entry point around the spans that instrumentations of the
   model clients it calls (OpenInference, OpenLLMetry, GenAI) write;
4. OpenInference, 5. OpenLLMetry, 6. MLflow: each reads its own span kinds; where two describe one
   interaction (a framework traced by one calls a client traced by another) the earlier is kept, an order
   kept as they were added, not a judgement of which reads better;
7. Spring AI, 8. the Vercel AI SDK, 9. Strands Agents and 10. Mastra, before the OTel GenAI conventions:
   Spring AI's chat model calls and the SDK's carry a few `gen_ai.*` attributes, and the frameworks' own
   spans say more; Strands and Mastra write GenAI spans whose content they shape their own way;
11. Genkit (before 13. the OTel GenAI conventions): its `genkit:*` spans carry no other convention's keys,
   and a model client traced by another instrumentation inside a flow is read once, by the flow;
12. LangSmith's OTel export, before the OTel GenAI conventions: every run's span carries
   `gen_ai.operation.name` (a model call's `chat`) beside the run's inputs and outputs, which only its own
   keys say how to read.

A new producer's adapter takes its place here: before every convention whose spans it may enclose or whose
keys it also writes. One span written by several conventions (dual-emitting instrumentations) is read for an
agent's run (`_run`: tool names, arguments, results, tokens) by the open conventions' keys first
(`Convention.OPEN`: OpenInference, OTel GenAI), then by the others' in this order.
"""

from __future__ import annotations

from tracescore.extract._convention import Convention
from tracescore.extract._genai import GenAI
from tracescore.extract._genkit import Genkit
from tracescore.extract._haystack import Haystack
from tracescore.extract._langfuse import Langfuse
from tracescore.extract._langsmith import LangSmith
from tracescore.extract._mastra import Mastra
from tracescore.extract._mlflow import MLflow
from tracescore.extract._openinference import OpenInference
from tracescore.extract._openllmetry import OpenLLMetry
from tracescore.extract._spring_ai import SpringAI
from tracescore.extract._strands import Strands
from tracescore.extract._tracescore import Tracescore
from tracescore.extract._vercel import VercelAI

__all__ = ["CONVENTIONS", "RUN_KEY_ORDER"]

# --8<-- [start:order]
CONVENTIONS: tuple[Convention, ...] = (
    Tracescore(),
    Langfuse(),
    Haystack(),
    OpenInference(),
    OpenLLMetry(),
    MLflow(),
    SpringAI(),
    VercelAI(),
    Strands(),
    Mastra(),
    Genkit(),
    LangSmith(),
    GenAI(),
)
# --8<-- [end:order]

RUN_KEY_ORDER: tuple[Convention, ...] = (
    *(c for c in CONVENTIONS if c.OPEN),
    *(c for c in CONVENTIONS if not c.OPEN),
)
