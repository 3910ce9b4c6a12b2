"""docs/offline/library.md: scoring from Python, one record or a data set, with the offline judge (an LLM
judge takes the same place)."""

# --8<-- [start:evaluate]
from tracescore.score import Faithfulness, OfflineJudge, evaluate, evaluate_dataset

results = evaluate({"query": "Where is the head office?", "contexts": ["It is in Delhi."], "answer": "Delhi"})
print([(r.metric, r.score) for r in results])  # faithfulness, answer_relevancy, context_relevance
# (context_relevance 0.0: the offline judge rates a document by the question's words in it; none here)
# --8<-- [end:evaluate]

# --8<-- [start:dataset]
import pandas as pd  # noqa: E402

df = pd.DataFrame(  # your golden set, under names of your own
    {
        "prompt": ["Where is the head office?", "When was it founded?"],
        "contexts": [["The head office is in Delhi."], ["The head office is in Delhi."]],
        "completion": ["The head office is in Delhi.", "It was founded in 1950."],
    }
)
result = evaluate_dataset(
    df,  # a DataFrame, a list of dicts or RagRecords, any iterable
    [Faithfulness()],
    OfflineJudge(),  # or OpenAIJudge(): any OpenAI-compatible endpoint (TRACESCORE_JUDGE_*)
    concurrency=8,
    progress=False,
    column_map={"query": "prompt", "answer": "completion"},
)
print(result.rows[1]["faithfulness"], result.rows[1]["results"]["faithfulness"]["label"])  # input order
print(result.means())
print(result.summary)  # as `tracescore score` ends: counts, means, the flagged share with its interval
print(result.to_pandas()[["id", "faithfulness"]])  # needs pandas (pip install '.[pandas]' in a clone)
# --8<-- [end:dataset]

# --8<-- [start:gate]
rows = [*df.to_dict("records"), {"prompt": "Who founded it?"}]  # the last one has no answer: invalid
checked = evaluate_dataset(rows, ["faithfulness"], column_map={"query": "prompt", "answer": "completion"})
print(checked.summary.gate({"faithfulness": 0.4}))  # `tracescore score --fail-under faithfulness=0.4`
print(checked.summary.gate({"faithfulness": 0.4}, allow_unscored=1))  # [] : passed
# --8<-- [end:gate]
