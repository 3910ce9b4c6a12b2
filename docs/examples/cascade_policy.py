"""docs/sampling.md: the sampling policy driven by your own code, in the two steps `tracescore consume`
takes (admit, then escalate). Runs offline: the "LLM judge" here is a second offline judge."""

import asyncio
import os
import tempfile
import time
from pathlib import Path

from tracescore.model import DecodedSpan, Interaction, MetricStatus, RagRecord
from tracescore.sample import CascadePolicy, load_sampling_config
from tracescore.score import OfflineJudge, make_metrics
from tracescore.score.metrics import evaluate_record

# The example file's state_path is a server path; the environment outranks the file.
state = Path(tempfile.mkdtemp()) / "cascade.json"
os.environ["TRACESCORE_SAMPLING__CASCADE__LEARNING__STATE_PATH"] = str(state)
span = DecodedSpan(
    trace_id="4bf92f3577b34da6a3ce929d0e0e4736", span_id="00f067aa0ba902b7", name="answer",
    service_name="checkout-eu", scope_name="tracescore", attributes={}, end_time_unix_nano=0,
)  # fmt: skip
interaction = Interaction(
    span=span,
    record=RagRecord(query="How heavy is it?", contexts=("It weighs 1.2 kg.",), answer="It weighs 3 kg."),
    route="/ask",
)
llm_judge = OfflineJudge()  # stands in for OpenAIJudge()

# --8<-- [start:policy]
policy = CascadePolicy(load_sampling_config("docs/examples/sampling.toml"), metrics=("faithfulness",))
offline_judge = OfflineJudge()


async def judge(interaction: Interaction) -> None:
    decision = policy.admit(interaction)  # Decision(metrics=(...), skip=None | SkipReason)
    if not decision.sampled:
        return
    metrics = make_metrics(decision.metrics)
    started = time.process_time()
    offline = await evaluate_record(interaction.record, metrics, offline_judge)
    policy.observe_offline(time.process_time() - started)  # feeds CPU thinning
    escalation = policy.escalate(interaction, offline)
    if escalation.to_llm:  # escalation.selection: cascade | baseline | uniform
        llm = await evaluate_record(interaction.record, metrics, llm_judge)
        tokens = sum(r.usage.prompt_tokens + r.usage.completion_tokens for r in llm)
        policy.charge(tokens, reserved=escalation.reserved_tokens)
        if llm[0].status is MetricStatus.OK:  # an error is no verdict
            hallucinated = llm[0].label == "hallucinated"
            policy.judged(interaction, escalation, failed=hallucinated)  # the cascade's lift
            if escalation.selection == "baseline":  # chosen blind to its score: a label to learn from
                policy.learn(interaction, offline, hallucinated=hallucinated)
    print(f"offline {offline[0].label}, to the LLM judge: {escalation.to_llm} ({escalation.selection})")


asyncio.run(judge(interaction))
policy.save()  # on stop: the learned suspicion models (cascade.learning.state_path)
# --8<-- [end:policy]
