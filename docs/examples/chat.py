"""docs/instrumenting.md, "A chat": a multi-turn chat app that keeps only the questions and answers and
resends them with each request, decorated with the SDK, each conversation named around its turns. Sends its
spans to Kafka ($TRACESCORE_BOOTSTRAP_SERVERS); tests/docs/test_chat_kafka.py runs it, then the page's
`tracescore consume`, `tracescore conversations` and `tracescore tail`, and checks what the page shows."""

# --8<-- [start:chat]
import tracescore

tracescore.init(service_name="chat-assistant")


@tracescore.retriever
def search(query: str) -> list[str]:
    return [text for topic, text in KNOWLEDGE.items() if topic in query.lower()]


@tracescore.generation(model="stand-in")
def generate(messages: list[dict]) -> str:
    return REPLIES[messages[-1]["content"]]  # your model call


@tracescore.rag(route="/chat")
def answer(question: str, history: list[dict]) -> str:
    documents = search(question)
    system = {"role": "system", "content": "Answer from: " + " ".join(documents)}
    return generate([system, *history, {"role": "user", "content": question}])


def chat(session_id: str | None, user_id: str, questions: list[str]) -> None:
    history: list[dict] = []  # the questions and answers, not the documents
    for question in questions:
        with tracescore.attributes(session_id=session_id, user_id=user_id):  # names the conversation
            reply = answer(question, history)
        print(f"{session_id or '(no session)'}: {question} -> {reply}")
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]


# --8<-- [end:chat]

KNOWLEDGE = {  # what the retriever finds, by a word of the question
    "basic": "Aurora Basic costs 9 euros a month, billed monthly.",
    "add-on": "The weekend add-on costs the same as the Basic plan.",
}
REPLIES = {  # stands in for your LLM
    "What does the Basic plan cost?": "The Basic plan costs 9 euros a month.",
    "And the weekend add-on?": "The weekend add-on costs 9 euros a month.",  # right: turn 1 retrieved it
    "How much is the weekend add-on?": "The weekend add-on costs 5 euros a month.",  # invented
}
# --8<-- [start:chats]
chat("chat-1", "u-1", ["What does the Basic plan cost?", "And the weekend add-on?"])
chat("chat-2", "u-2", ["What does the Basic plan cost?", "How much is the weekend add-on?"])
chat(None, "u-3", ["What does the Basic plan cost?", "And the weekend add-on?"])  # a chat named by nothing
tracescore.shutdown()
# --8<-- [end:chats]
