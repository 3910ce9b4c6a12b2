"""A record that cannot be read: one line that names the field, what it held and the fix, and an output row
that keeps the record's id, so it can be joined back to the input (a notebook's DataFrame, main's scores)."""

from __future__ import annotations

import pytest

from tracescore.score import InputError, evaluate, evaluate_dataset

CONTEXTS = ["It is in Delhi."]


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (5, "answer: Input should be a valid string, got int 5"),
        (["In Delhi."], "answer: Input should be a valid string, got list ['In Delhi.']"),
        ({"text": "x" * 5_000_000}, "got dict {'text': 'xxxxxxxxx"),
        (None, "answer: null (column 'answer'); give the answer, '' for none"),
    ],
)
def test_a_field_of_another_type_is_named_with_what_it_held(answer: object, said: str) -> None:
    with pytest.raises(InputError) as raised:
        evaluate({"query": "Where?", "contexts": CONTEXTS, "answer": answer})
    assert said in str(raised.value)
    assert "\n" not in str(raised.value)
    assert len(str(raised.value)) < 200  # a 5 MB value is not printed back


def test_an_invalid_row_keeps_its_id() -> None:
    rows = [
        {"id": "q1", "query": "Where?", "contexts": CONTEXTS, "answer": "In Delhi."},
        {"id": "q2", "query": "Where?", "contexts": CONTEXTS, "answer": 5},
        {"ref": 7, "query": "Where?", "contexts": CONTEXTS, "answer": None},
    ]
    result = evaluate_dataset(rows, ["faithfulness"])
    assert [row["id"] for row in result.rows] == ["q1", "q2", None]
    mapped = evaluate_dataset([{**rows[2]}], ["faithfulness"], column_map={"id": "ref"})
    assert mapped.rows[0]["id"] == "7"
    said = "invalid input: answer: null (column 'answer'); give the answer, '' for none"
    assert mapped.rows[0]["reason"] == said
