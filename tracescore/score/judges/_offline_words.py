"""Small vocabulary resources for the offline judge: stopwords, negations, refusals, comparisons.

Kept deliberately short and general (function words of English, not domain terms) so the judge's
behaviour stays explainable. Every entry is in the normalised form the judge compares: lowercased,
accents folded, possessive 's removed, *not* stemmed (stopwords are checked before stemming).
"""

from __future__ import annotations

import re

__all__ = [
    "HIGH_WORDS",
    "LOW_WORDS",
    "NEGATIONS",
    "NUMBER_WORDS",
    "PRONOUNS",
    "REFUSAL_PATTERNS",
    "STOPWORDS",
    "TIME_WORDS",
    "WH_WORDS",
    "YES_NO",
    "YES_NO_OPENER",
]

# Function words plus question/answer filler ("also", "known", "called") that carry no checkable fact.
STOPWORDS: frozenset[str] = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "done", "down", "during", "each", "either", "else", "etc", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "many", "me", "might", "more", "most", "much", "must", "my", "myself", "neither", "nor", "now", "of", "off", "on", "once", "one", "only", "onto", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "per", "same", "she", "should", "since", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "thus", "to", "too", "under", "until", "up", "upon", "us", "very", "via", "was", "we", "were", "what", "when", "where", "whereas", "which", "while", "who", "whom", "whose", "why", "will", "with", "within", "would", "you", "your", "yours", "yourself", "yourselves", "s", "t", "d", "ll", "m", "o", "re", "ve", "y", "st", "nd", "rd", "th", "actually", "approximately", "around", "called", "currently", "exactly", "famous", "known", "named", "overall", "really", "roughly", "well", "name", "type", "kind", "form"]
)

# Wh-words and auxiliaries that open a question; used to tell yes/no questions from open ones.
WH_WORDS: frozenset[str] = frozenset(["what", "which", "who", "whom", "whose", "where", "when", "why", "how"])
_YES_NO_OPENERS = ["is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had", "will", "would", "should"]
YES_NO_OPENER = re.compile(r"^\s*(?:" + "|".join(_YES_NO_OPENERS) + r")\b", re.IGNORECASE)

YES_NO: dict[str, bool] = {"yes": True, "yeah": True, "yep": True, "correct": True, "no": False, "nope": False}

# Negation cues; the judge rewrites "n't" to " not" before tokenising.
NEGATIONS: frozenset[str] = frozenset(["not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot", "without"])

# Answers that decline to answer make no claim. Matched against the whole (lowercased) sentence.
REFUSAL_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"\bi (?:do not|don't|dont) know\b",
        r"\bi(?:'m| am) (?:not sure|unsure|unable|not able)\b",
        r"\bi (?:cannot|can't|cant|could not|couldn't) (?:answer|say|tell|determine|find|help|provide)\b",
        r"\b(?:no|not enough|insufficient) (?:information|data|context|evidence)\b",
        r"\b(?:the )?(?:context|documents?|sources?|passages?) (?:does not|doesn't|do not|don't) "
        r"(?:say|mention|contain|provide|specify|state)\b",
        r"\b(?:unable|not possible|impossible) to (?:answer|determine|say|tell)\b",
        r"^\s*(?:unknown|n/?a|no idea|not sure)\s*[.!]?\s*$",
        r"\bas an ai\b",
    )
)

# Small number words mapped to digits so "nine weeks" and "9 weeks" ground each other.
NUMBER_WORDS: dict[str, str] = {
    w: str(i)
    for i, w in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]
    )
    # "one" is mostly a pronoun ("one of the ...") and "zero" rare: neither is a checkable number.
    if i >= 2
}
NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "thousand": "1000"})

# Comparison cues in "which X ..., A or B?" questions: the option with the smaller number (year, rank)
# wins for LOW_WORDS, the larger for HIGH_WORDS. TIME_WORDS mark comparisons of dates (years only).
LOW_WORDS: frozenset[str] = frozenset(
    ["first", "earlier", "earliest", "older", "oldest", "before", "smaller", "smallest", "fewer", "less", "least", "shorter", "shortest", "lower", "lowest"]
)
HIGH_WORDS: frozenset[str] = frozenset(
    ["later", "latest", "last", "younger", "youngest", "newer", "newest", "recent", "more", "most", "larger", "largest", "bigger", "biggest", "longer", "longest", "higher", "highest", "taller", "tallest", "greater", "greatest"]
)
TIME_WORDS: frozenset[str] = frozenset(
    ["first", "earlier", "earliest", "older", "oldest", "before", "later", "latest", "last", "younger", "youngest", "newer", "newest", "recent", "born", "founded", "formed", "established", "released", "started", "created", "published", "opened", "built"]
)

# A sentence opening with one of these is about the previous sentence's subject ("He founded ...").
PRONOUNS: frozenset[str] = frozenset("he she it they his her its their this these him them".split())
