"""The answer analysis: one judge call that serves faithfulness and answer relevancy.

Both metrics read the answer alone (with its question): faithfulness needs its claims, answer relevancy
needs reverse questions, a noncommittal flag and a direct relevance rating. Asking for all of it at once
keeps the three built-in metrics within three judge calls per record (analysis, verdicts, context).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tracescore.score.judges._protocol import Judge, Judgement, JudgeTask, TaskKind

__all__ = ["ANALYSIS_TASK", "AnalysisInput", "AnswerAnalysis", "SentenceClaims", "analyse_answer"]


class AnalysisInput(BaseModel):
    question: str | None = Field(description="The user's question; null when it was not recorded.")
    answer_sentences: list[str] = Field(description="The answer, already split into numbered sentences.")
    questions_to_generate: int = Field(default=3, ge=0, le=10)


class SentenceClaims(BaseModel):
    sentence_index: int = Field(description="Index into answer_sentences.")
    claims: list[str] = Field(description="Atomic, self-contained claims of that sentence; no pronouns.")


class AnswerAnalysis(BaseModel):
    sentences: list[SentenceClaims]
    questions: list[str] = Field(default_factory=list, description="Questions this answer would answer.")
    noncommittal: bool = Field(default=False, description="The answer is evasive, vague or a refusal.")
    relevance: int = Field(
        default=3, ge=1, le=5, description="How directly the answer addresses the question."
    )
    relevance_reason: str = ""


ANALYSIS_TASK: JudgeTask[AnalysisInput, AnswerAnalysis] = JudgeTask(
    name="answer.analysis",
    instruction=(
        "Analyse the answer. (1) Break each answer sentence into atomic claims that stand on their own: "
        "replace pronouns with the names they refer to, and use the question (when given) to complete "
        "fragments (answer 'Delhi' to 'Where is the head office?' becomes 'The head office is in "
        "Delhi.'). Greetings, hedges and refusals carry no claim. (2) Write questions_to_generate "
        "questions that the answer would answer. (3) noncommittal: true if the answer is evasive, vague "
        "or a refusal. (4) relevance: 1 (off topic) to 5 (answers exactly what was asked), with a "
        "one-sentence reason."
    ),
    input_model=AnalysisInput,
    output_model=AnswerAnalysis,
    kind=TaskKind.ANSWER_CLAIMS,
    examples=(
        (
            AnalysisInput(
                question="Who wrote Hamlet and when?",
                answer_sentences=["Shakespeare wrote it around 1600.", "He was English."],
                questions_to_generate=2,
            ),
            AnswerAnalysis(
                sentences=[
                    SentenceClaims(
                        sentence_index=0,
                        claims=["Shakespeare wrote Hamlet.", "Hamlet was written around 1600."],
                    ),
                    SentenceClaims(sentence_index=1, claims=["Shakespeare was English."]),
                ],
                questions=["Who wrote Hamlet?", "When was Hamlet written?"],
                noncommittal=False,
                relevance=5,
                relevance_reason="Names the author and the date asked for.",
            ),
        ),
    ),
)


async def analyse_answer(
    question: str | None, sentences: list[str], judge: Judge, questions_to_generate: int = 3
) -> Judgement[AnswerAnalysis]:
    """The analysis of one answer. Every metric asks with the same input, so a per-record SharedCallsJudge
    answers it once for all of them."""
    data = AnalysisInput(
        question=question, answer_sentences=sentences, questions_to_generate=questions_to_generate
    )
    return await judge.run(ANALYSIS_TASK, data)
