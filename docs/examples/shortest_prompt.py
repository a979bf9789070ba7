"""docs/guide.md: shortest-prompt-first as a StepEngine subclass.

The same choice as `queue by (prompt);` on the request slots
(docs/examples/vllm_sjf.sq): among the requests waiting for the engine, admit
the one whose `prompt` attribute (the tokens its turn sends) is smallest; ties
go to the one that joined the queue first, as `queue by` breaks them.

    PYTHONPATH=docs/examples serq run programs/multi-turn/vllm.sq --engine engine=shortest_prompt:ShortestPromptFirst
"""

from serq.sim.stages.step import StepEngine


class ShortestPromptFirst(StepEngine):
    def select_waiting(self, candidates):
        # candidates come in queue order and min() keeps the first of equal keys
        return min(candidates, key=lambda c: c.attr("prompt"))
