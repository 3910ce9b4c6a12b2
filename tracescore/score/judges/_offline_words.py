"""Small vocabulary resources for the offline judge: stopwords, negations, refusals, comparison cues.

Kept short and general (English function words, not domain terms) so the judge's behaviour stays
explainable. Entries are in the form the judge compares before stemming: lowercased, accents folded.
"""

from __future__ import annotations

import re

__all__ = [
    "AUXILIARIES",
    "CJK_STOPWORDS",
    "CONNECTORS",
    "COURTESY_PATTERNS",
    "FRAMING_WORDS",
    "HIGH_WORDS",
    "IRREGULAR_VERBS",
    "LOW_WORDS",
    "NEGATIONS",
    "NUMBER_WORDS",
    "PRONOUNS",
    "REFUSAL_PATTERNS",
    "SOURCE_WORDS",
    "STOPWORDS",
    "TIME_WORDS",
    "WH_WORDS",
    "YES_NO",
    "YES_NO_OPENER",
    "script",
]


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Function words, plus filler and light verbs ("known", "called", "get", "based") that carry no checkable
# fact: an answer that paraphrases with them is not thereby unsupported.
STOPWORDS = _set(
    """
    a about above after again against all also am an and any are aren as at be because been before being
    below between both but by can could did do does doing done down during each either else etc for from
    further had has have having he her here hers herself him himself his how i if in into is it its itself
    just let many me might more most much must my myself neither nor now of off on once one only onto or
    other our ours ourselves out over own per same she should since so some such than that the their theirs
    them themselves then there these they this those through thus to too under until up upon us very via
    was we were what when where whereas which while who whom whose why will with within would you your
    yours yourself yourselves
    s t d ll m o re ve y st nd rd th
    actually approximately around called currently exactly famous known named overall really roughly well
    name type kind form although however therefore instead still yet even though
    get gets got getting make makes made making use uses used using take takes took taken give gives gave
    given giving go goes went gone going come comes came coming start starts started starting begin begins
    beginning began begun taking include includes included including
    receive receives received receiving become becomes became becoming based
    """
)

# Copulas and auxiliaries: a short answer without any is a bare answer ("Lake Erie State Park"), not a
# statement ("Blurred vision is rare").
AUXILIARIES = _set(
    "is are was were be been being am has have had do does did will would can could may might must shall "
    "should"
)

# Lowercase words allowed inside a name ("Sex and the City" is cut at "and" on purpose: "Eatza Pizza and
# Your Pie" are two names).
CONNECTORS = _set("of the for de la del du von van da di on &")

# Chinese/Japanese function characters that carry no fact on their own.
CJK_STOPWORDS = _set("的 是 了 在 和 与 及 也 就 而 之 其 这 那 个 为 以 于 被 把 吗 呢 吧 啊 や")

# Wh-words and auxiliaries that open a question: they tell yes/no questions from open ones.
WH_WORDS = _set("what which who whom whose where when why how")
YES_NO_OPENER = re.compile(
    r"^\s*(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)\b", re.I
)

YES_NO: dict[str, bool] = {
    "yes": True,
    "yeah": True,
    "yep": True,
    "correct": True,
    "no": False,
    "nope": False,
}

# Negation cues; the judge rewrites "n't" to " not" before tokenising.
NEGATIONS = _set("not no never none nobody nothing neither nor cannot without")

# A sentence opening with one of these is about the previous sentence's subject ("He founded ...").
PRONOUNS = _set("he she it they his her its their this these him them")

# Words by which an answer talks about the text it summarises rather than about the world ("Here is a brief
# overview of the article:", "The article lists three causes ..."). In a sentence naming the source
# (SOURCE_WORDS) they are framing, not facts: the judge neither needs nor looks for them in the context.
SOURCE_WORDS = _set(
    "passage passages text article document documents excerpt summary paragraph context documentation docs "
    "source sources"
)
FRAMING_WORDS = SOURCE_WORDS | _set(
    """
    here following below provided concise brief short overview core key main piece pieces point points
    information detail details topic topics mention mentions describe describes discuss discusses
    highlight highlights note notes cover covers covering outline outlines present presents provide
    provides focus focuses summarize summarizes summarise summarises solely offer according
    """
)

# Answers that decline to answer make no claim. Matched against the lowercased sentence.
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

# A chat assistant's courtesies make no claim: an opener that is the whole sentence ("Sure!", "Great
# question!") or a closing ("Let me know if ...", "I hope this helps!"). Matched against the lowercased
# sentence; the judge keeps one with a figure a claim ("Let me know if you want the 15 free seats").
_OPENERS = (
    r"sure(?: thing)?|certainly|of course|absolutely|okay|ok|no problem|great question|good question|"
    r"happy to help|glad to help|hello|hello there|hi|hi there|hey|thanks|thank you|you're welcome"
)
COURTESY_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        rf"^\W*(?:{_OPENERS})(?:[\s,!.]+(?:{_OPENERS}))*\W*$",
        r"\blet me know\b",
        r"\bhope (?:this|that|it) helps\b",
        r"\bfeel free to\b",
        r"\b(?:anything else|any other questions?|any further questions?|more questions?)\b",
        r"\b(?:happy|glad) (?:to|i could|i can) (?:help|assist)\b",
        r"\bhave a (?:great|nice|good|lovely) (?:day|one|evening|week)\b",
    )
)

# Number words mapped to digits so "nine weeks" and "9 weeks" ground each other. "one" is left out: it is
# mostly a pronoun ("one of the ...").
NUMBER_WORDS: dict[str, str] = {
    word: str(value)
    for value, word in enumerate(
        (
            "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
            "sixteen seventeen eighteen nineteen twenty"
        ).split()
    )
    if value >= 2
} | {"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "thousand": "1000"}

# Comparison cues of "which X ..., A or B?" questions: the option with the smaller figure (year, count)
# is the answer for LOW_WORDS, the larger for HIGH_WORDS. TIME_WORDS mean the figures are years.
LOW_WORDS = _set(
    "first earlier earliest older oldest before smaller smallest fewer less least shorter shortest lower "
    "lowest"
)
HIGH_WORDS = _set(
    "later latest last younger youngest newer newest recent more most larger largest bigger biggest longer "
    "longest higher highest taller tallest greater greatest"
)
TIME_WORDS = _set(
    "first earlier earliest older oldest before later latest last younger youngest newer newest recent born "
    "founded formed established released started created published opened built"
)


def _irregular(table: str) -> dict[str, str]:
    """Rows of "base past participle" -> {inflected form: base}; a slash separates variants."""
    forms: dict[str, str] = {}
    for row in table.strip().splitlines():
        base, *inflected = row.split()
        for form in (f for cell in inflected for f in cell.split("/")):
            if form != base:
                forms[form] = base
    return forms


# English irregular verbs: a claim in another tense ("Acme sold anvils", "she has written") is checked
# against the context's form of the same verb. Forms that are also common other words are left out (found:
# to found; saw, left, felt, rose, lay, ground, wound, bore), so they never merge two different words.
IRREGULAR_VERBS: dict[str, str] = _irregular(
    """
    arise arose arisen
    awake awoke awoken
    beat beat beaten
    bend bent bent
    bet bet bet
    bind bound bound
    bite bit bitten
    bleed bled bled
    blow blew blown
    break broke broken
    breed bred bred
    bring brought brought
    build built built
    burn burnt burnt
    buy bought bought
    catch caught caught
    choose chose chosen
    cling clung clung
    creep crept crept
    deal dealt dealt
    dig dug dug
    draw drew drawn
    dream dreamt dreamt
    drink drank drunk
    drive drove driven
    eat ate eaten
    fall fell fallen
    feed fed fed
    fight fought fought
    flee fled fled
    fly flew flown
    forbid forbade forbidden
    forget forgot forgotten
    forgive forgave forgiven
    freeze froze frozen
    grow grew grown
    hang hung hung
    hear heard heard
    hide hid hidden
    hold held held
    keep kept kept
    kneel knelt knelt
    know knew known
    lead led led
    lean leant leant
    leap leapt leapt
    lend lent lent
    lose lost lost
    mean meant meant
    meet met met
    pay paid paid
    ride rode ridden
    ring rang rung
    run ran run
    say said said
    see seen seen
    seek sought sought
    sell sold sold
    send sent sent
    shake shook shaken
    shine shone shone
    shoot shot shot
    show showed shown
    shrink shrank/shrunk shrunk
    sing sang sung
    sink sank sunk
    sit sat sat
    sleep slept slept
    slide slid slid
    speak spoke spoken
    spend spent spent
    spin spun spun
    spring sprang sprung
    stand stood stood
    steal stole stolen
    stick stuck stuck
    sting stung stung
    stride strode stridden
    strike struck struck/stricken
    strive strove striven
    swear swore sworn
    sweep swept swept
    swim swam swum
    swing swung swung
    teach taught taught
    tear tore torn
    tell told told
    think thought thought
    throw threw thrown
    understand understood understood
    wake woke woken
    wear wore worn
    weave wove woven
    weep wept wept
    win won won
    withdraw withdrew withdrawn
    write wrote written
    """
)


# Writing systems by the first code point of a word: enough to tell a claim from a context in another one.
_SCRIPTS = (
    ("\u0250", "latin"),
    ("\u0370", "other"),
    ("\u0400", "greek"),
    ("\u0530", "cyrillic"),
    ("\u0900", "west-asian"),
    ("\u0e00", "indic"),
    ("\u3040", "other"),
    ("\u3100", "kana"),
    ("\ua000", "han"),
    ("\uac00", "other"),
    ("\ud7b0", "hangul"),
)


def script(word: str) -> str:
    """The writing system of a word, by its first character ("latin", "cyrillic", "han", ...)."""
    first = word[:1]
    return next((name for end, name in _SCRIPTS if first < end), "other")
