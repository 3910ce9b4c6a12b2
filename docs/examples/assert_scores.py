"""docs/offline/library.md: a pytest gate. Run here as a script, so the failure it reports is printed."""

from tracescore.model import RagRecord

record = RagRecord(
    id="office",
    query="Where is the Oberoi Group's head office, and when was it founded?",
    contexts=("The Oberoi Group is a hotel company with its head office in Delhi.",),
    answer="The group has its head office in Delhi. The group was founded in 1950.",
)


# --8<-- [start:test]
from tracescore.score import assert_scores  # noqa: E402


def test_office_answer():
    assert_scores(record, {"faithfulness": 0.8})


# --8<-- [end:test]


try:
    test_office_answer()
except AssertionError as failure:
    print(f"AssertionError: {failure}")
