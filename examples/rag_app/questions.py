"""The demo's question list: route, the document that answers it, and which answers get sabotaged.

/billing is deliberately mostly unfaithful (8 of 12) so its rolling faithfulness drops and alerts;
/support and /product get one altered answer each so they stay healthy but are not perfect.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import chain, zip_longest


@dataclass(frozen=True)
class Question:
    text: str
    route: str
    doc: str  # corpus file stem that holds the answer
    expect: str  # fact the faithful answer must contain
    alter: str | None = None  # alteration kind (see answerer.ALTERATIONS), None = answer faithfully


_B, _S, _P = "/billing", "/support", "/product"

BILLING = (
    Question("How much does the Starter plan cost per month?", _B, "pricing", "$19", "number"),
    Question("What does the Team plan cost and how many users does it allow?", _B, "pricing", "$79"),
    Question("At what monthly price does Enterprise pricing start?", _B, "pricing", "$1,200"),
    Question("How much is Northwind Compute usage billed per vCPU-hour?", _B, "pricing", "$0.042", "number"),
    Question("What discount do customers get for paying annually?", _B, "pricing", "15%", "addition"),
    Question("When does Northwind Cloud issue invoices?", _B, "billing", "first calendar day", "addition"),
    Question("Which credit cards are accepted for paying invoices?", _B, "billing", "Visa", "entity"),
    Question("What is the late fee for unpaid invoices?", _B, "billing", "1.5%", "number"),
    Question("When is a workspace with an overdue invoice suspended?", _B, "billing", "45 days"),
    Question("Are monthly subscriptions refunded?", _B, "refunds", "not refunded", "negation"),
    Question("When do service credits expire?", _B, "refunds", "12 months", "number"),
    Question("How many vCPU-hours does the free tier include per month?", _B, "free_tier", "750"),
)

SUPPORT = (
    Question("What are the email support hours for Starter customers?", _S, "support", "08:00 to 18:00"),
    Question("How fast do Team customers get a first response?", _S, "support", "4 business hours"),
    Question("Do Enterprise customers get support 24 hours a day?", _S, "support", "7 days a week"),
    Question("What is the first response time for Severity 1 incidents?", _S, "support", "30 minutes"),
    Question("Does an Enterprise contract include a technical account manager?", _S, "support", "named"),
    Question("What monthly uptime does Northwind Compute commit to?", _S, "sla", "99.95%", "number"),
    Question("What service credit applies when uptime falls below 99.0%?", _S, "sla", "25%"),
    Question("How long do customers have to file an SLA claim?", _S, "sla", "30 days"),
    Question("Does scheduled maintenance count as downtime?", _S, "sla", "does not count"),
    Question("How long are audit logs kept on the Team plan?", _S, "data_retention", "90 days"),
    Question("When is a deleted workspace permanently purged?", _S, "data_retention", "14 days"),
    Question("How long are automatic backups of Compute volumes retained?", _S, "data_retention", "35 days"),
)

PRODUCT = (
    Question("In which year was Northwind Cloud founded?", _P, "overview", "2014"),
    Question("Which five regions does Northwind Cloud operate?", _P, "regions", "Stockholm, Frankfurt"),
    Question("When was the Toronto region opened?", _P, "regions", "March 2023", "entity"),
    Question("How many API requests per minute can a Starter token make?", _P, "rate_limits", "600"),
    Question("What does the API return when a token exceeds its limit?", _P, "rate_limits", "429"),
    Question("For how long are bursts above the rate limit allowed?", _P, "rate_limits", "10 seconds"),
    Question("When did Northwind Vault launch?", _P, "release_history", "2018"),
    Question("When did version 2 of the REST API ship?", _P, "release_history", "2021"),
    Question("How much cheaper are ARM-based Compute instances?", _P, "release_history", "20% less"),
    Question("How is data in Northwind Vault encrypted at rest?", _P, "security", "AES-256"),
    Question("Since when has Northwind Cloud held ISO 27001 certification?", _P, "security", "2019"),
    Question("What is the name of the Northwind command line tool?", _P, "overview", "nwctl"),
)

# Round-robin over routes so every route's rolling window fills at the same pace during the demo.
QUESTIONS: tuple[Question, ...] = tuple(
    q for q in chain.from_iterable(zip_longest(BILLING, SUPPORT, PRODUCT)) if q is not None
)


PHASES = ("mixed", "healthy", "drift")
DRIFTING_ROUTE = _B


def schedule(n: int, phase: str = "mixed") -> list[Question]:
    """The first `n` requests of a run: the question list, cycled.

    phase "mixed" alters the answers marked in the list; "healthy" answers everything faithfully; "drift"
    makes every /billing answer unfaithful (as if its prompt or index broke) and the other routes faithful,
    so the demo can show /billing's alert fire and, back to "healthy", resolve."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; expected one of {PHASES}")
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(n)]
    if phase == "mixed":
        return questions
    return [
        replace(q, alter=(q.alter or "addition") if phase == "drift" and q.route == DRIFTING_ROUTE else None)
        for q in questions
    ]
