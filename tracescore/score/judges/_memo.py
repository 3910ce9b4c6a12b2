"""Share judge calls between the metrics of one record.

Faithfulness and answer relevancy both need the answer's analysis (claims, reverse questions); the combined
quality metric re-runs its sub-metrics. Wrapping the judge once per record makes the second ask of the same
task with the same input wait for the first instead of paying again. A new wrapper per record keeps the
shared judge itself stateless.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tracescore.model import Usage
from tracescore.score.judges._protocol import Judge, JudgeError, Judgement, JudgeTask

__all__ = ["SharedCallsJudge"]


class SharedCallsJudge:
    """A per-record view of `judge` that answers each distinct (task, input) once.

    The first caller is charged the usage; later callers get the same output with zero usage, so adding up
    the metrics' usage gives what the record really cost."""

    def __init__(self, judge: Judge) -> None:
        self._judge = judge
        self._calls: dict[tuple[str, int, str], asyncio.Future[Judgement[Any]]] = {}

    @property
    def name(self) -> str:
        return self._judge.name

    @property
    def inner(self) -> Judge:
        return self._judge

    async def run(self, task: JudgeTask[Any, Any], data: Any) -> Judgement[Any]:
        key = (task.name, task.sample, data.model_dump_json())
        shared = self._calls.get(key)
        if shared is not None:
            # Errors are shared too: a failed call is not retried by the next metric (the judge already
            # retried); each metric reports the same cause.
            try:
                first = await asyncio.shield(shared)
            except JudgeError as exc:
                # Same cause, but the spend was charged to the first caller already.
                raise JudgeError(exc.cause) from exc
            except asyncio.CancelledError:
                if not shared.cancelled():
                    raise  # this waiter itself was cancelled
                # The caller that was making the call was cancelled, not us: make it ourselves.
                return await self.run(task, data)
            return Judgement(output=first.output, usage=Usage(), warnings=first.warnings)
        future: asyncio.Future[Judgement[Any]] = asyncio.get_running_loop().create_future()
        self._calls[key] = future
        try:
            result = await self._judge.run(task, data)
        except asyncio.CancelledError:
            # Forget the call so the next ask makes it again instead of inheriting our cancellation.
            del self._calls[key]
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: nobody else may be waiting
            raise
        future.set_result(result)
        return result
